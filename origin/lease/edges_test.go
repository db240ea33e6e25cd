package lease_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/lease/leasetest"
	wire "github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

// LECTERN_EDGE_URLS: base URLs, canonical (scheme, lower-case host, the
// port as a number, the default port left out, the trailing slash
// dropped), in order and without duplicates; anything else refused with
// the entry named.
func TestParseEdges(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ", nil},
		{"http://127.0.0.1:8787", []string{"http://127.0.0.1:8787"}},
		{"http://10.0.0.5:8787/, https://Edge-2.Internal ,http://edge-3:80,https://edge-4:443/",
			[]string{"http://10.0.0.5:8787", "https://edge-2.internal", "http://edge-3", "https://edge-4"}},
		{"http://edge:8787,http://EDGE:08787/", []string{"http://edge:8787"}},
		{"https://edge:80,http://edge:443", []string{"https://edge:80", "http://edge:443"}},
		{"http://[::1]:8787,http://[::1]", []string{"http://[::1]:8787", "http://[::1]"}},
	} {
		got, err := lease.ParseEdges(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseEdges(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		",", "http://edge:8787,", ",http://edge:8787", "http://a:1,,http://b:2",
		"edge:8787", "127.0.0.1:8787", "//edge:8787", "ftp://edge", "file:///tmp", "http:edge",
		"http://", "http://:8787", "http://edge:", "http://edge:0", "http://edge:65536", "http://edge:port",
		"http://edge:8787/internal/revoke", "http://edge:8787/x", "http://edge:8787//",
		"http://edge:8787?", "http://edge:8787/?a=b", "http://edge:8787#", "http://edge:8787/#top",
		"http://user@edge:8787", "http://user:pw@edge:8787", "http://@edge:8787",
		"http://ed ge:8787", "http://edge\x00:8787", "http://edge:8787/\x7f",
	} {
		if got, err := lease.ParseEdges(in); err == nil {
			t.Errorf("ParseEdges(%q) = %q, want an error", in, got)
		} else if !strings.Contains(err.Error(), "entry ") {
			t.Errorf("ParseEdges(%q): %v, want the entry named", in, err)
		}
	}
}

// A revoke URL is allowed only when it is exactly the revoke endpoint of
// a listed edge host; "" (no push) always is.
func TestAllowsRevokeURL(t *testing.T) {
	m := lease.New(lease.Config{Edges: []string{"http://127.0.0.1:8787", "https://Edge.Example/", "http://edge-3:80"}})
	for u, want := range map[string]bool{
		"":                                      true,
		"http://127.0.0.1:8787/internal/revoke": true,
		"https://edge.example/internal/revoke":  true,
		"https://EDGE.example:443/internal/revoke":     true, // the default port is no port
		"http://edge-3/internal/revoke":                true,
		"http://edge-3:80/internal/revoke":             true,
		"http://127.0.0.1:8788/internal/revoke":        false, // another port
		"http://127.0.0.1/internal/revoke":             false,
		"https://127.0.0.1:8787/internal/revoke":       false, // another scheme
		"http://127.0.0.2:8787/internal/revoke":        false, // another host
		"http://localhost:8787/internal/revoke":        false, // names are not resolved
		"http://127.0.0.1:8081/admin/v1/clock":         false,
		"http://127.0.0.1:8787/admin/v1/orgs":          false,
		"http://127.0.0.1:8787":                        false,
		"http://127.0.0.1:8787/":                       false,
		"http://127.0.0.1:8787/internal/revoke/":       false,
		"http://127.0.0.1:8787/internal/revoke/x":      false,
		"http://127.0.0.1:8787/x/internal/revoke":      false,
		"http://127.0.0.1:8787//internal/revoke":       false,
		"http://127.0.0.1:8787/internal/%72evoke":      false,
		"http://127.0.0.1:8787/internal/revoke?":       false,
		"http://127.0.0.1:8787/internal/revoke?a=b":    false,
		"http://127.0.0.1:8787/internal/revoke#":       false,
		"http://127.0.0.1:8787/internal/revoke#f":      false,
		"http://u@127.0.0.1:8787/internal/revoke":      false,
		"http://u:p@127.0.0.1:8787/internal/revoke":    false,
		"http://evil@127.0.0.1:8787@x/internal/revoke": false,
		"ftp://127.0.0.1:8787/internal/revoke":         false,
		"/internal/revoke":                             false,
		"127.0.0.1:8787/internal/revoke":               false,
		"http:127.0.0.1:8787/internal/revoke":          false,
		"http://127.0.0.1:8787:8787/internal/revoke":   false,
		"http://127.0.0.1:8787 /internal/revoke":       false,
	} {
		if got := m.AllowsRevokeURL(u); got != want {
			t.Errorf("AllowsRevokeURL(%q) = %v, want %v", u, got, want)
		}
	}
	// No edge host listed: only "".
	none := lease.New(lease.Config{})
	if !none.AllowsRevokeURL("") || none.AllowsRevokeURL("http://127.0.0.1:8787"+wire.RevokePath) {
		t.Error("with no edge host listed, a revoke URL was allowed or \"\" was not")
	}
}

// A lease stored with a revoke URL its origin now does not list (granted
// before a restart under another LECTERN_EDGE_URLS) is never pushed to:
// a settle skips it, a recall pushes nothing to it, and a revoke waits
// for its expiry as for a lease without a revoke URL; the listed edge
// host still gets its pushes.
func TestUnlistedEdgeIsNeverPushed(t *testing.T) { eachBackend(t, testUnlistedEdgeIsNeverPushed) }

func testUnlistedEdgeIsNeverPushed(t *testing.T, s leaseStore) {
	ctx := context.Background()
	listed := leasetest.NewEdge(t, edgeKeys, time.Now)
	dropped := leasetest.NewEdge(t, edgeKeys, time.Now)
	const ttl = 300 * time.Millisecond
	before := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: ttl, Edges: []string{listed.Base(), dropped.Base()}})
	now := time.Now()
	kept := grant(t, before, acme(nil), 8, listed.URL(), now)
	stale := grant(t, before, acme(nil), 8, dropped.URL(), now)
	if kept.Calls == 0 || stale.Calls == 0 {
		t.Fatalf("grants %+v %+v", kept, stale)
	}
	listed.Set(kept.ID, 1)
	dropped.Set(stale.ID, 2)
	expires := recorded(t, s, "acme", stale.ID).Expires

	// The origin restarted with the second edge host no longer listed.
	log := new(logbuftest.Buffer)
	after := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: ttl, Edges: []string{listed.Base()},
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if after.AllowsRevokeURL(dropped.URL()) || !after.AllowsRevokeURL(listed.URL()) {
		t.Fatal("AllowsRevokeURL does not follow the list")
	}
	after.Settle(ctx, "acme", 0)
	if ps := listed.Pushes(); len(ps) != 1 || !ps[0].Keep || !slices.Equal(ps[0].Leases, []string{kept.ID}) {
		t.Errorf("settle: the listed edge got %+v, want one keep push of its lease", ps)
	}
	after.Recall(ctx, "acme")
	if err := after.Revoke(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(expires) {
		t.Errorf("Revoke returned before the unlisted edge's lease expired (%v)", expires)
	}
	if ps := dropped.Pushes(); len(ps) != 0 {
		t.Errorf("the edge host no longer listed was pushed to: %+v", ps)
	}
	if !dropped.Holds(stale.ID) {
		t.Error("the unlisted edge's lease was taken from it")
	}
	if listed.Holds(kept.ID) {
		t.Error("the listed edge still holds its lease after the recall")
	}
	if !strings.Contains(log.String(), dropped.URL()) || !strings.Contains(log.String(), lease.EdgesSetting) {
		t.Errorf("no warning names the unlisted revoke URL and %s:\n%s", lease.EdgesSetting, log)
	}

	// With no edge host listed at all, nothing is pushed anywhere.
	none := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: ttl})
	g := grant(t, none, acme(nil), 8, listed.URL(), time.Now())
	listed.Set(g.ID, 1)
	pushed := len(listed.Pushes())
	none.Settle(ctx, "acme", 0)
	if err := none.Revoke(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if got := len(listed.Pushes()); got != pushed {
		t.Errorf("with no edge host listed, %d pushes were made", got-pushed)
	}
}
