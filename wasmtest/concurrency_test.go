package wasmtest

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/worker/wazero"
)

// slowJWKS delays the JWKS answer so that requests arriving meanwhile
// find the fetch in flight.
type slowJWKS struct{ delay time.Duration }

func (s slowJWKS) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/jwks.json") {
		time.Sleep(s.delay)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestParkedRequests: one instance, a cold JWKS cache and many requests
// at once: one fetches the keys (single flight), the others park and are
// woken when it ends (docs/edge.md: park and wake); all are answered.
func TestParkedRequests(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		f := newFixture(t, o, "park-"+b.name)
		e := newEdge(t, b, o, func(c *wazero.Config) {
			c.Instances = 1
			c.Client = &http.Client{Transport: slowJWKS{300 * time.Millisecond},
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		})
		const n = 24
		var wg sync.WaitGroup
		got := make([]answer, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Answered at the edge once the token is verified: 400.
				got[i] = do(t, e.url, "GET", "/v1/tiers?bogus=1", "", "Authorization", "Bearer "+f.tokens["content"])
			}()
		}
		wg.Wait()
		for i, a := range got {
			if a.status != 400 || a.code() != "BAD_REQUEST" {
				t.Errorf("request %d: %d %.200s", i, a.status, a.body)
			}
		}
		st := e.host.Stats()
		t.Logf("stats %+v", st)
		if st.Subrequests != 1 {
			t.Errorf("%d JWKS fetches, want 1 (single flight)", st.Subrequests)
		}
		if st.Parks == 0 {
			t.Error("no request parked behind the fetch")
		}
		if st.Failures != 0 {
			t.Errorf("the host failed %d requests", st.Failures)
		}
	})
}

// TestSubrequestFailure: an unreachable JWKS is a failed subrequest
// (status 0): the guest still answers, with the API's error body, and the
// host does not fail or hang.
func TestSubrequestFailure(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		f := newFixture(t, o, "fail-"+b.name)
		e := newEdge(t, b, o, func(c *wazero.Config) {
			c.JWKSURL = "http://127.0.0.1:1/.well-known/jwks.json"
			c.Instances = 1
		})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+f.tokens["content"])
				if a.status < 400 || a.code() == "" {
					t.Errorf("unreachable JWKS: %d %.200s", a.status, a.body)
				}
			}()
		}
		wg.Wait()
		if st := e.host.Stats(); st.Failures != 0 {
			t.Errorf("the host failed %d requests", st.Failures)
		}
	})
}
