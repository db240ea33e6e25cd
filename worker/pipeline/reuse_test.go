package pipeline

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/etag"
)

// TestReuseMatchesFresh runs one random interleaving of requests through
// the codec, which reuses ended requests (their message copies, header
// arrays and strings), and through Start and Resume, which make every
// request anew, and requires the same output at every step and the same
// caches at the end: a string of a reused request that something still
// held would show as a difference.
func TestReuseMatchesFresh(t *testing.T) {
	reused, fresh := newPipeline(), newPipeline()
	installKeys(t, reused, t0, "k1")
	installKeys(t, fresh, t0, "k1")
	rng := rand.New(rand.NewPCG(1, 2))
	// Tokens of several organisations and lengths, so that messages of
	// different sizes land in one another's copies.
	var toks []string
	for i := range 6 {
		org := "org" + strings.Repeat("x", i*7) + strconv.Itoa(i)
		toks = append(toks, "Bearer "+sign("k1", t0, claims{"org": org, "jti": fmt.Sprint("j", i)}))
	}
	orgOf := func(tok string) string {
		c, _ := fresh.tokens.get(strings.TrimPrefix(tok, "Bearer "), t0)
		return c.Org
	}
	grants := []string{"00ff", "0f0f", "ffff"}
	type open struct {
		handle Handle
		tok    string
	}
	var waiting []open
	var input []byte // one buffer for every message, as the reactor's alloc reuses one
	now := t0ms + 1000
	for step := range 4000 {
		now += int64(rng.IntN(3))
		var msg []byte
		isStart := len(waiting) == 0 || rng.IntN(2) == 0
		var tok string
		if isStart {
			tok = toks[rng.IntN(len(toks))]
			hs := [][2]string{{"Authorization", tok}}
			if rng.IntN(4) == 0 {
				hs = append(hs, [2]string{"X-Request-Id", "req-" + strings.Repeat("r", rng.IntN(20)) + strconv.Itoa(step)})
			}
			path, query := "/v1/subjects/algebra", "tier=high"
			switch rng.IntN(6) {
			case 0:
				path, query = "/v1/nope", ""
			case 1:
				path, query = "/v1/subjects", "limit="+strconv.Itoa(rng.IntN(30))
			case 2:
				hs = append(hs, [2]string{"If-None-Match", `W/"nope"`})
			default:
				if org := orgOf(tok); org != "" {
					g := grants[rng.IntN(len(grants))]
					hs = append(hs, [2]string{"If-None-Match", etag.Derive(etag.Input{Version: version, Route: 4,
						Target: "subjectSlug=algebra", Params: "tier=high", Org: org, Grants: g})})
				}
			}
			for range rng.IntN(3) {
				hs = append(hs, [2]string{"X-Pad", strings.Repeat("p", rng.IntN(300))})
			}
			var b bytes.Buffer
			fmt.Fprintf(&b, `{"method":"GET","path":%q,"query":%q,"headers":[`, path, query)
			for i, kv := range hs {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `[%q,%q]`, kv[0], kv[1])
			}
			fmt.Fprintf(&b, `],"now":%d}`, now)
			msg = b.Bytes()
		} else {
			i := rng.IntN(len(waiting))
			w := waiting[i]
			waiting = append(waiting[:i], waiting[i+1:]...)
			tok = w.tok
			org := orgOf(w.tok)
			if org == "" {
				org = "unknown"
			}
			status, body := 204, ""
			switch rng.IntN(5) {
			case 0:
				status = 412
			case 1:
				status = 200
			case 2:
				status, body = 403, `{"error":{"code":"ORG_SUSPENDED"}}`
			case 3:
				status = 0
			}
			msg = fmt.Appendf(nil, `{"handle":%d,"status":%d,"headers":[["X-Lectern-Org",%q],["X-Lectern-Grants",%q],["X-Service-Content-Version",%q],["Etag","W/\"e%d\""]],"body":%q,"error":"x","now":%d}`,
				w.handle, status, org, grants[rng.IntN(len(grants))], version, step, body, now)
		}
		var got []byte
		var want Output
		if isStart {
			input = append(input[:0], msg...)
			got = reused.HandleStart(input)
			req, err := decodeRequest(msg, nil)
			if err != nil {
				t.Fatal(err)
			}
			want = fresh.Start(req)
		} else {
			input = append(input[:0], msg...)
			got = reused.HandleResume(input)
			in, err := decodeResume(bytes.Clone(msg), nil)
			if err != nil {
				t.Fatal(err)
			}
			want = fresh.Resume(in)
		}
		if w := want.AppendJSON(nil); !bytes.Equal(got, w) {
			t.Fatalf("step %d, message %s:\nreused %s\nfresh  %s", step, msg, got, w)
		}
		if want.Kind == Subrequest {
			waiting = append(waiting, open{want.Handle, tok})
		}
	}
	if !reflect.DeepEqual(reused.tokens.m, fresh.tokens.m) || !reflect.DeepEqual(reused.orgs.m, fresh.orgs.m) {
		t.Errorf("caches differ:\nreused %v %v\nfresh  %v %v", reused.tokens.m, reused.orgs.m, fresh.tokens.m, fresh.orgs.m)
	}
	if len(reused.free) == 0 {
		t.Error("nothing was reused")
	}
}
