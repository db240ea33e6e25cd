package pipeline

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/lectern-api/lectern/shared/lease"
)

// BenchmarkStartCachedToken is a request whose token was verified before:
// route, cache lookup, scope, validation and the forward's signature.
func BenchmarkStartCachedToken(b *testing.B) {
	p := newPipeline()
	installKeys(b, p, t0, "k1")
	req := get("/v1/subjects", "limit=5", t0ms, "Authorization", "Bearer "+sign("k1", t0, nil), "X-Request-Id", rid)
	p.Start(req)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N { // not b.Loop: TinyGo 0.42 lacks it, and these run under TinyGo too
		out := p.Start(req)
		if out.Kind != Subrequest {
			b.Fatal(out.Kind)
		}
		p.drop(p.pending[out.Handle])
	}
}

// BenchmarkStartColdToken is the same request with the token cache
// emptied every time: one EdDSA verification each.
func BenchmarkStartColdToken(b *testing.B) {
	p := newPipeline()
	installKeys(b, p, t0, "k1")
	raw := sign("k1", t0, nil)
	req := get("/v1/subjects", "limit=5", t0ms, "Authorization", "Bearer "+raw, "X-Request-Id", rid)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N { // not b.Loop: TinyGo 0.42 lacks it, and these run under TinyGo too
		delete(p.tokens.m, raw)
		out := p.Start(req)
		if out.Kind != Subrequest {
			b.Fatal(out.Kind)
		}
		p.drop(p.pending[out.Handle])
	}
}

// BenchmarkHandleStart404 is the JSON codec around a locally answered
// request.
func BenchmarkHandleStart404(b *testing.B) {
	p := newPipeline()
	msg := []byte(`{"method":"GET","path":"/v1/nope","query":"","headers":[["X-Request-Id","req-test-0001"],["Accept","*/*"]],"now":1793534400000}`)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N { // not b.Loop: TinyGo 0.42 lacks it, and these run under TinyGo too
		p.HandleStart(msg)
	}
}

// BenchmarkGate304 is an edge 304 through the JSON codec, as the module
// runs it: the conditional request's start (token cached, candidate ETag
// matches: the gate call) and the gate's 204 resumed into the 304.
func BenchmarkGate304(b *testing.B) {
	p := newPipeline()
	installKeys(b, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, nil)
	learnOrg(b, p, tok, "00ff", version)
	tag := candidateTag("00ff")
	start := []byte(`{"method":"GET","path":"/v1/subjects/algebra","query":"tier=high&detail=full","headers":[["Host","127.0.0.1:8787"],["User-Agent","Go-http-client/1.1"],["Authorization",` +
		strconv.Quote(tok) + `],["If-None-Match",` + strconv.Quote(tag) + `],["Accept-Encoding","gzip"]],"now":` + strconv.FormatInt(t0ms+1000, 10) + `}`)
	resume := func(handle string) []byte {
		return []byte(`{"handle":` + handle + `,"status":204,"headers":[["Cache-Control","private"],["Date","Sun, 01 Nov 2026 12:00:01 GMT"],["Etag",` + strconv.Quote(tag) +
			`],["Ratelimit","\"calls\";r=998;t=2000"],["Ratelimit-Policy","\"calls\";q=1000;w=3600"],["Vary","Authorization, Accept-Encoding"],["X-Lectern-Grants","00ff"],["X-Lectern-Org","acme"],["X-Request-Id","req_0123456789abcdef01234567"],["X-Service-Content-Version","` + version + `"]],"now":` + strconv.FormatInt(t0ms+1010, 10) + `}`)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N { // not b.Loop: TinyGo 0.42 lacks it, and these run under TinyGo too
		out := p.HandleStart(start)
		i := bytes.Index(out, []byte(`"handle":`))
		j := bytes.IndexByte(out[i:], ',')
		res := p.HandleResume(resume(string(out[i+9 : i+j])))
		if !bytes.Contains(res, []byte(`"status":304`)) {
			b.Fatalf("%s\n%s", out, res)
		}
	}
}

// TestGate304Allocations holds the allocations of an edge 304 (start and
// resume through the JSON codec) to none, under both toolchains: under
// TinyGo each one is a search of the heap, and they bring the next
// collection closer.
func TestGate304Allocations(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, nil)
	learnOrg(t, p, tok, "00ff", version)
	tag := candidateTag("00ff")
	start := []byte(`{"method":"GET","path":"/v1/subjects/algebra","query":"tier=high&detail=full","headers":[["Host","127.0.0.1:8787"],["Authorization",` +
		strconv.Quote(tok) + `],["If-None-Match",` + strconv.Quote(tag) + `],["Accept-Encoding","gzip"]],"now":` + strconv.FormatInt(t0ms+1000, 10) + `}`)
	// Handles are given out in turn: the resume messages of the next ones.
	const runs = 50
	var resumes [][]byte
	for h := p.next + 1; len(resumes) <= runs; h++ {
		resumes = append(resumes, []byte(`{"handle":`+strconv.Itoa(int(h))+`,"status":204,"headers":[["Cache-Control","private"],["Etag",`+strconv.Quote(tag)+
			`],["Vary","Authorization, Accept-Encoding"],["X-Lectern-Grants","00ff"],["X-Lectern-Org","acme"],["X-Service-Content-Version","`+version+`"]],"now":`+strconv.FormatInt(t0ms+1010, 10)+`}`))
	}
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		p.HandleStart(start)
		if out := p.HandleResume(resumes[i]); !bytes.Contains(out, []byte(`"status":304`)) {
			t.Fatalf("%s", out)
		}
		i++
	})
	// None: the start is decoded into an ended request's message copy and
	// header array, and the resume in place, into the array of the last
	// one's header fields.
	if allocs > 0 {
		t.Errorf("%.1f allocations per edge 304, want none", allocs)
	}
}

// BenchmarkLease304 is a 304 the edge answers with its organisation's
// lease through the JSON codec, as the module runs it: one start, no
// subrequest. The lease is renewed (acknowledging the reports) whenever a
// background call is asked for, so every iteration is a leased 304.
func BenchmarkLease304(b *testing.B) {
	w := newLeaseWorld(b)
	w.leaseUp(acmeLease("L1", 1024))
	start := []byte(`{"method":"GET","path":"/v1/subjects/algebra","query":"tier=high&detail=full","headers":[["Host","127.0.0.1:8787"],["Authorization",` +
		strconv.Quote(w.tok) + `],["If-None-Match",` + strconv.Quote(candidateTag("00ff")) + `],["Accept-Encoding","gzip"]],"now":` + strconv.FormatInt(w.now, 10) + `}`)
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N { // not b.Loop: TinyGo 0.42 lacks it, and these run under TinyGo too
		out := w.p.HandleStart(start)
		if !bytes.Contains(out, []byte(`"status":304`)) {
			b.Fatalf("%s", out)
		}
		if bytes.Contains(out, []byte(`"background"`)) {
			// Answer every call out: a new lease (acknowledging the
			// reports it carried) or a report's 204.
			for h, c := range w.p.ls.bg {
				if c.kind == bgUsage {
					w.p.Resume(ResumeMsg{Handle: h, Status: 204, Now: w.now})
					continue
				}
				n++
				a := acmeLease("L"+strconv.Itoa(n+1), 1024)
				w.p.Resume(ResumeMsg{Handle: h, Status: 200, Body: lease.AppendAnswer(nil, &a), Now: w.now})
			}
		}
	}
}
