package lease_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/shared/edgesig"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// #36 point 4, review: a revoke push is signed v3, or v2 with SignV2 (the
// upgrade's window, LECTERN_EDGE_ACCEPT_V2), the only form the previous
// release's edge hosts read. Either is taken by this release's edge
// hosts, which set no AcceptV2 (edgesig.V2Covers(Revoke)), and binds the
// body: the same signature over another body does not verify.
func TestRevokePushSignature(t *testing.T) {
	for _, c := range []struct {
		name    string
		signV2  bool
		version int
	}{
		{"v3", false, 3},
		{"v2 in the upgrade's window", true, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := func() time.Time { return day }
			var mu sync.Mutex
			var sig string
			var msg edgesig.Message
			edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				sig, msg = r.Header.Get(edgesig.Header), httpsig.Message(edgesig.Revoke, r, edgesig.BodyHash(b))
				mu.Unlock()
				rv, err := wire.ParseRevoke(b)
				if err != nil {
					t.Errorf("a push's body: %v: %s", err, b)
				}
				var rs []wire.Report
				for _, l := range rv.Leases {
					rs = append(rs, wire.Report{Lease: l, Used: 1, Final: true})
				}
				w.Write(wire.AppendReports(nil, rs))
			}))
			defer edge.Close()
			s := openSQLite(t)
			m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, SignV2: c.signV2, Now: clk, Edges: []string{edge.URL}})
			g := grant(t, m, acme(nil), 16, edge.URL+wire.RevokePath, day)
			if err := m.Revoke(context.Background(), "acme"); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if sig == "" {
				t.Fatal("no push arrived")
			}
			if !strings.HasPrefix(sig, fmt.Sprintf("v%d=", c.version)) {
				t.Errorf("signature %q, want v%d", sig, c.version)
			}
			parsed, err := edgesig.Verify(&edgeKeys, sig, &msg, day.UnixMilli())
			if err != nil || parsed.Version != c.version {
				t.Errorf("Verify: version %d, %v; want %d, nil", parsed.Version, err, c.version)
			}
			recv := edgesig.Receiver{Keys: edgeKeys, Hosts: []string{strings.TrimPrefix(edge.URL, "http://")}}
			if err := recv.Accept(sig, &msg, day.UnixMilli()); err != nil {
				t.Errorf("this release's edge host (no AcceptV2) refused it: %v", err)
			}
			other := msg
			other.Body = edgesig.BodyHash([]byte(`{"leases":["` + g.ID + `x"]}`))
			if _, err := edgesig.Verify(&edgeKeys, sig, &other, day.UnixMilli()); err != edgesig.ErrInvalid {
				t.Errorf("the signature over another body: %v, want %v", err, edgesig.ErrInvalid)
			}
			if got := calls(t, s, "acme", day); got != 1 {
				t.Errorf("billed %d, want the 1 the edge answered", got)
			}
		})
	}
}
