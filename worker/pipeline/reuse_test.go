package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// TestReuseMatchesFresh runs random interleavings of requests through the
// codec, which reuses ended requests (their message copies, header arrays
// and strings), and through Start and Resume, which make every request
// anew (fresh). Every output must be the same, and so must the caches at
// the end: a string of a reused request that something still held, or a
// request reused while it waits, would show as a difference. The messages
// pass through one buffer, overwritten after each call, as the reactor's
// alloc reuses one. The interleavings cover the JWKS fetch (answered, or
// failed), requests parked behind it and woken, gate calls answered 204,
// 412 (then a forward), an error or a failure, forwards, local errors,
// and malformed messages.
func TestReuseMatchesFresh(t *testing.T) {
	for seed := range uint64(8) {
		reuseRun(t, seed, false)
	}
}

// TestReuseMatchesFreshWithLeases is the same with leases on: lease
// requests and reports asked in the background and answered (a lease, no
// lease, a failure), 304s answered with leases, and the host's flush and
// revoke among them.
func TestReuseMatchesFreshWithLeases(t *testing.T) {
	for seed := range uint64(8) {
		reuseRun(t, seed, true)
	}
}

func reuseRun(t *testing.T, seed uint64, leases bool) {
	reused, fresh := newPipeline(), newPipeline()
	if leases {
		cfg := testCfg
		cfg.Leases, cfg.Revoke = true, revokeURL
		cfg.Random = &counter{}
		reused = New(cfg)
		cfg.Random = &counter{}
		fresh = New(cfg)
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	// Tokens of several organisations and lengths, so that messages of
	// different sizes land in one another's copies.
	var toks []string
	for i := range 6 {
		org := "org" + strings.Repeat("x", i*7) + strconv.Itoa(i)
		toks = append(toks, "Bearer "+sign("k1", t0, claims{"org": org, "jti": fmt.Sprint("j", i)}))
	}
	orgOf := func(tok string) string { return fresh.tokens.m[strings.TrimPrefix(tok, "Bearer ")].Org }
	grants := []string{"00ff", "0f0f", "ffff"}
	type waiting struct {
		handle Handle
		tok    string
		jwks   bool   // its subrequest is the JWKS fetch
		parked bool   // parked: resumed only with a wake, once woken
		bg     string // a lease-protocol call: "lease" or "usage"
	}
	var open []*waiting
	woken := map[Handle]bool{}
	var input []byte // one buffer for every message, as the reactor's alloc reuses one
	now := t0ms + 1000
	served, granted := 0, 0
	for step := range 2000 {
		now += int64(rng.IntN(3))
		var msg []byte
		var tok string
		var ready []int // the waiting requests that can be resumed now
		for i, w := range open {
			if !w.parked || woken[w.handle] {
				ready = append(ready, i)
			}
		}
		isStart := len(ready) == 0 || rng.IntN(2) == 0
		isControl := false
		switch {
		case leases && isStart && rng.IntN(25) == 0:
			isControl = true
			if rng.IntN(2) == 0 {
				msg = fmt.Appendf(nil, `{"op":"flush","now":%d}`, now)
			} else {
				rv := fmt.Sprintf(`{"leases":["L%d","L%d"],"keep":%v}`, rng.IntN(step+1), rng.IntN(step+1), rng.IntN(2) == 0)
				msg = fmt.Appendf(nil, `{"op":"revoke","now":%d,"body":%q}`, now, rv)
			}
		case rng.IntN(50) == 0:
			msg = []byte(`{"method":"GET","path":"/v1/tiers","headers":[["A"`) // malformed
			if !isStart {
				msg = []byte(`{"handle":` + strconv.Itoa(int(open[ready[0]].handle)) + `,"status":"x","now":1}`)
			}
		case isStart:
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
			h, _ := json.Marshal(hs)
			msg = fmt.Appendf(nil, `{"method":"GET","path":%q,"query":%q,"headers":%s,"now":%d}`, path, query, h, now)
		default:
			i := ready[rng.IntN(len(ready))]
			w := open[i]
			open = append(open[:i], open[i+1:]...)
			tok = w.tok
			switch {
			case w.bg == "usage":
				msg = fmt.Appendf(nil, `{"handle":%d,"status":%d,"now":%d}`, w.handle, []int{204, 204, 500, 0}[rng.IntN(4)], now)
			case w.bg == "lease":
				org := orgOf(w.tok)
				if org == "" {
					org = "unknown"
				}
				// Mostly a lease on the state the edge knows, so that it serves.
				g := fresh.orgs.m[orgKey{id: org}].grants
				if g == "" || rng.IntN(4) == 0 {
					g = grants[rng.IntN(len(grants))]
				}
				a := lease.Answer{Lease: "L" + strconv.Itoa(step), Org: org, Epoch: 1, ContentVersion: version, Grants: g,
					Calls: int64(8 + rng.IntN(56)), ValidMs: int64(500 + rng.IntN(5000)),
					Headers:    [][2]string{{"Cache-Control", "private"}, {"Vary", "Authorization, Accept-Encoding"}, {"X-Service-Content-Version", version}},
					RateLimits: []lease.RateLimit{{Name: "calls-month", Remaining: int64(rng.IntN(100)), Reset: t0.Unix() + 86400}}}
				status := 200
				switch rng.IntN(5) {
				case 0:
					a = lease.Answer{RetryMs: int64(rng.IntN(3000))}
				case 1:
					status = 500
				}
				msg = fmt.Appendf(nil, `{"handle":%d,"status":%d,"body":%q,"now":%d}`, w.handle, status, lease.AppendAnswer(nil, &a), now)
			case w.parked:
				delete(woken, w.handle)
				msg = fmt.Appendf(nil, `{"handle":%d,"wake":true,"now":%d}`, w.handle, now)
			case w.jwks && !leases && rng.IntN(5) == 0: // with leases, a failed fetch would leave nothing authenticated to lease
				msg = fmt.Appendf(nil, `{"handle":%d,"status":0,"error":"refused","now":%d}`, w.handle, now)
			case w.jwks:
				msg = fmt.Appendf(nil, `{"handle":%d,"status":200,"headers":[["Content-Type","application/json"]],"body":%q,"now":%d}`, w.handle, tokentest.JWKS("k1"), now)
			default:
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
		}
		input = append(input[:0], msg...)
		var got []byte
		if isControl {
			got = reused.HandleControl(input)
		} else if isStart {
			got = reused.HandleStart(input)
		} else {
			got = reused.HandleResume(input)
		}
		got = bytes.Clone(got)
		for i := range input {
			input[i] = '#' // the host's buffer is its own again
		}
		var want []byte
		if isControl {
			want = fresh.HandleControl(bytes.Clone(msg))
		} else {
			want = fresh.fresh(isStart, msg)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d, step %d, message %s:\nreused %s\nfresh  %s", seed, step, msg, got, want)
		}
		var out struct {
			Kind   string
			Handle Handle
			URL    string
			Wake   []Handle
			// A lease-protocol call the output asks for.
			Background struct {
				Handle Handle
				URL    string
			}
		}
		if err := json.Unmarshal(want, &out); err != nil {
			t.Fatalf("output %s: %v", want, err)
		}
		for _, h := range out.Wake {
			woken[h] = true
		}
		if bytes.Contains(want, []byte(`"lease":{`)) {
			served++
		}
		if bytes.Contains(msg, []byte(`\"calls\":`)) && !bytes.Contains(msg, []byte(`\"calls\":0`)) && bytes.Contains(msg, []byte(`"status":200`)) {
			granted++
		}
		if bg := out.Background; bg.Handle != 0 {
			open = append(open, &waiting{handle: bg.Handle, tok: tok, bg: strings.TrimPrefix(bg.URL, "http://origin.test/internal/")})
		}
		switch {
		case isControl && out.Kind == "subrequest":
			open = append(open, &waiting{handle: out.Handle, bg: "usage"})
		case out.Kind == "subrequest":
			open = append(open, &waiting{handle: out.Handle, tok: tok, jwks: out.URL == testCfg.JWKSURL})
		case out.Kind == "park":
			open = append(open, &waiting{handle: out.Handle, tok: tok, parked: true})
		}
	}
	if !reflect.DeepEqual(reused.tokens.m, fresh.tokens.m) || !reflect.DeepEqual(reused.orgs.m, fresh.orgs.m) {
		t.Errorf("seed %d: caches differ:\nreused %v %v\nfresh  %v %v", seed, reused.tokens.m, reused.orgs.m, fresh.tokens.m, fresh.orgs.m)
	}
	if !reflect.DeepEqual(reused.ls.held, fresh.ls.held) || !reflect.DeepEqual(reused.ls.orgs, fresh.ls.orgs) {
		t.Errorf("seed %d: lease state differs", seed)
	}
	if len(reused.free) == 0 {
		t.Errorf("seed %d: nothing was reused", seed)
	}
	if leases && (served == 0 || len(reused.ls.held) == 0 && granted == 0) {
		t.Errorf("seed %d: %d leased 304s, %d grants: the run tested little of leases", seed, served, granted)
	}
}

// fresh answers msg as the codec would, through Start or Resume: every
// request made anew, never reused. A message the codec cannot read goes
// to the codec, whose answer to it reuses nothing.
func (p *Pipeline) fresh(isStart bool, msg []byte) []byte {
	if isStart {
		req, err := decodeRequest(msg, nil)
		if err != nil {
			return p.HandleStart(bytes.Clone(msg))
		}
		out := p.Start(req)
		return out.AppendJSON(nil)
	}
	in, err := decodeResume(bytes.Clone(msg), nil)
	if err != nil {
		return p.HandleResume(bytes.Clone(msg))
	}
	out := p.Resume(in)
	return out.AppendJSON(nil)
}

// TestCodecKeepsNothingOfAMessage: once a call returns, the arrays the
// codec keeps for reuse hold no string of its message (the host may free
// a large one), and a start it could not read gives back the request it
// took for reuse.
func TestCodecKeepsNothingOfAMessage(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, nil)
	out := p.HandleStart(fmt.Appendf(nil, `{"method":"GET","path":"/v1/subjects","query":"","headers":[["Authorization",%q]],"now":%d}`, tok, t0ms))
	var sub struct{ Handle Handle }
	if err := json.Unmarshal(out, &sub); err != nil || sub.Handle == 0 {
		t.Fatalf("%s: %v", out, err)
	}
	var hs [][2]string
	for i := range 20 {
		hs = append(hs, [2]string{"X-H" + strconv.Itoa(i), strings.Repeat("v", 100)})
	}
	h, _ := json.Marshal(hs)
	p.HandleResume(fmt.Appendf(nil, `{"handle":%d,"status":200,"headers":%s,"now":%d}`, sub.Handle, h, t0ms+1))
	if len(p.resumeHeaders) != 0 || cap(p.resumeHeaders) < 20 {
		t.Fatalf("resume header array: len %d cap %d", len(p.resumeHeaders), cap(p.resumeHeaders))
	}
	for i, kv := range p.resumeHeaders[:cap(p.resumeHeaders)] {
		if kv != (Header{}) {
			t.Fatalf("resume header array slot %d still holds %q", i, kv.Name)
		}
	}
	free := len(p.free)
	if free == 0 {
		t.Fatal("the ended request was not kept for reuse")
	}
	p.HandleStart([]byte(`{"method":"GET","path":`))
	if len(p.free) != free {
		t.Errorf("a start the codec could not read took a request from the %d kept; %d are left", free, len(p.free))
	}
}
