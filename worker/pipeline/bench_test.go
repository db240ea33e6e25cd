package pipeline

import (
	"testing"
)

// BenchmarkStartCachedToken is a request whose token was verified before:
// route, cache lookup, scope, validation and the forward's signature.
func BenchmarkStartCachedToken(b *testing.B) {
	p := newPipeline()
	installKeys(b, p, t0, "k1")
	req := get("/v1/subjects", "limit=5", t0ms, "Authorization", "Bearer "+sign("k1", t0, nil), "X-Request-Id", rid)
	p.Start(req)
	b.ReportAllocs()
	for b.Loop() {
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
	for b.Loop() {
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
	for b.Loop() {
		p.HandleStart(msg)
	}
}
