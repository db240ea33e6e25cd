package httpsig

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
)

// SignV2 signs v2 only the purposes whose v2 rule signed every field of
// their list (lease, usage, revoke), and each verifies by both rules'
// reader; a forward or gate call is refused (a panic).
func TestSignV2(t *testing.T) {
	keys := edgesig.KeysOf([]byte("a-test-secret-of-at-least-32-characters"))
	now := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	body := []byte(`{"leases":["L1"]}`)
	for _, purpose := range []string{edgesig.Lease, edgesig.Usage, edgesig.Revoke} {
		r, _ := http.NewRequest("POST", "http://edge.test:8787/internal/revoke", nil)
		r.Header.Set("X-Request-Id", "req_1")
		if err := SignV2(keys, purpose, r, body, now); err != nil {
			t.Fatalf("%s: %v", purpose, err)
		}
		sig := r.Header.Get(edgesig.Header)
		m := Message(purpose, r, edgesig.BodyHash(body))
		got, err := edgesig.Verify(&keys, sig, &m, now.UnixMilli())
		if !strings.HasPrefix(sig, "v2=") || err != nil || got.Version != 2 {
			t.Errorf("%s: %q verifies as v%d, %v; want v2, nil", purpose, sig, got.Version, err)
		}
	}
	for _, purpose := range []string{edgesig.Forward, edgesig.Gate} {
		r, _ := http.NewRequest("GET", "http://origin.test/v1/tiers", nil)
		if err := SignV2(keys, purpose, r, nil, now); !errors.Is(err, ErrV2Uncovered) || r.Header.Get(edgesig.Header) != "" {
			t.Errorf("SignV2 of a %s: %v, header %q; want ErrV2Uncovered and nothing signed", purpose, err, r.Header.Get(edgesig.Header))
		}
	}
}
