package pipeline

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/lease"
)

// TestLeaseChurn drives the lease state through the JSON codec, as the
// module runs it, with many organisations at once: revalidations (gated
// and leased), lease requests answered out of order with grants, refusals
// and failures, usage calls, revokes and the collector run between calls.
// After every call the lease state must hold together: each organisation
// asking has its call out, each call out belongs to its organisation, and
// every key is one of the organisations'. It runs under TinyGo too
// (wasmtest's TestPipelineUnderTinyGo). (A test binary runs on a
// goroutine's stack, which TinyGo's collector scans whole: the collection
// of a call out while its answer was read showed only in the module, on
// the system stack; wasmtest's TestLeaseChurn drives that.)
func TestLeaseChurn(t *testing.T) {
	w := newLeaseWorld(t)
	p := w.p
	const orgs = 24
	var toks []string
	valid := map[orgKey]bool{}
	for i := range orgs {
		org := fmt.Sprintf("org-%02d-%s", i, strings.Repeat("x", i)) // of many lengths
		toks = append(toks, "Bearer "+sign("k1", t0, claims{"org": org}))
		valid[orgKey{id: org}] = true
		learnOrg(t, p, toks[i], "00ff", version)
	}
	tag := candidateTag("00ff")
	rng := rand.New(rand.NewPCG(1, 2))
	now := w.now
	var out []int64 // background calls not yet answered
	var lastLease []string
	n, asked, leased := 0, 0, 0
	step := func(what string, b []byte) wireOutput {
		t.Helper()
		o := decodeOut(t, b)
		if o.Background != nil {
			out = append(out, o.Background.Handle)
			if strings.HasSuffix(o.Background.URL, lease.Path) {
				asked++
			}
		}
		if o.Lease != nil {
			leased++
		}
		if n++; n%7 == 0 {
			runtime.GC()
		}
		checkLeaseState(t, p, valid, what)
		return o
	}
	for round := range 3000 {
		now += int64(rng.IntN(40))
		switch r := rng.IntN(10); {
		case r < 6: // a revalidation, and its gate answered when there is one
			tok := toks[rng.IntN(orgs)]
			o := step("start", p.HandleStart([]byte(`{"method":"GET","path":"/v1/subjects/algebra","query":"tier=high","headers":[["Authorization",`+
				strconv.Quote(tok)+`],["If-None-Match",`+strconv.Quote(tag)+`]],"now":`+strconv.FormatInt(now, 10)+`}`)))
			if o.Kind == "subrequest" {
				step("gate", p.HandleResume([]byte(`{"handle":`+strconv.FormatInt(o.Handle, 10)+`,"status":204,"headers":[["Cache-Control","private"],["Etag",`+
					strconv.Quote(tag)+`],["X-Lectern-Grants","00ff"],["X-Lectern-Org","acme"],["X-Service-Content-Version","`+version+`"]],"now":`+strconv.FormatInt(now, 10)+`}`)))
			}
		case r < 9 && len(out) > 0: // a background call answered, in any order
			i := rng.IntN(len(out))
			h := out[i]
			out = append(out[:i], out[i+1:]...)
			var msg string
			switch rng.IntN(4) {
			case 0:
				msg = `{"handle":` + strconv.FormatInt(h, 10) + `,"status":503,"now":` + strconv.FormatInt(now, 10) + `}`
			case 1: // a usage call's success, or a malformed lease answer
				msg = `{"handle":` + strconv.FormatInt(h, 10) + `,"status":204,"now":` + strconv.FormatInt(now, 10) + `}`
			default:
				id := fmt.Sprintf("L%d", round)
				a := acmeLease(id, int64(8+rng.IntN(40)))
				if rng.IntN(5) == 0 {
					a = lease.Answer{RetryMs: 50}
				} else {
					lastLease = append(lastLease, id)
				}
				msg = `{"handle":` + strconv.FormatInt(h, 10) + `,"status":200,"headers":[["Content-Type","application/json"]],"body":` +
					strconv.Quote(string(lease.AppendAnswer(nil, &a))) + `,"now":` + strconv.FormatInt(now, 10) + `}`
			}
			step("background", p.HandleResume([]byte(msg)))
		default: // the origin revokes a lease granted lately
			if len(lastLease) == 0 {
				continue
			}
			r := lease.Revoke{Leases: []string{lastLease[rng.IntN(len(lastLease))]}, Keep: rng.IntN(3) == 0}
			step("revoke", p.HandleControl([]byte(`{"op":"revoke","now":`+strconv.FormatInt(now, 10)+`,"body":`+
				strconv.Quote(string(lease.AppendRevoke(nil, &r)))+`}`)))
		}
		if t.Failed() {
			t.Fatalf("after %d rounds", round)
		}
	}
	t.Logf("%d lease requests, %d leased 304s, %d calls", asked, leased, n)
}

// checkLeaseState checks that the lease state holds together.
func checkLeaseState(t *testing.T, p *Pipeline, valid map[orgKey]bool, after string) {
	t.Helper()
	for k, ol := range p.ls.orgs {
		if !valid[k] || ol.key != k {
			t.Fatalf("after %s: lease state under key %q (its own %q), not an organisation's", after, k.id, ol.key.id)
		}
		if ol.asking != 0 {
			if c := p.ls.bg[ol.asking]; c == nil || c.kind != bgLease || c.key != k {
				t.Fatalf("after %s: %q asks with call %d, which is not its lease request out (%+v)", after, k.id, ol.asking, c)
			}
		}
	}
	for h, c := range p.ls.bg {
		if c.kind != bgLease {
			continue
		}
		if ol := p.ls.orgs[c.key]; ol == nil || ol.asking != h {
			t.Fatalf("after %s: lease request %d of %q is not its organisation's call out", after, h, c.key.id)
		}
	}
	for _, l := range p.ls.held {
		if !valid[l.key] {
			t.Fatalf("after %s: lease %s held for key %q, not an organisation's", after, l.id, l.key.id)
		}
	}
}
