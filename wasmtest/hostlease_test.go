package wasmtest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/logbuftest"
	"github.com/lectern-api/lectern/worker/wazero"
)

// Leases end to end (docs/edge.md, "Leases"): the module under the wazero
// host, leases on, in front of a real origin that grants them, settles
// them before its meters are read and revokes them on a licence change.

// leasedEdge serves b in front of o with leases on: the revoke URL is its
// own listener's, the usage log in the test's directory.
func leasedEdge(t *testing.T, b *build, o *origin) (*edge, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Listener.Close()
	srv.Listener = o.edgeListener(t) // an address o lists in LECTERN_EDGE_URLS
	base := "http://" + srv.Listener.Addr().String()
	log := filepath.Join(t.TempDir(), "usage.log")
	cfg := edgeConfig(o)
	cfg.Leases, cfg.Revoke, cfg.UsageLog = true, base+lease.RevokePath, log
	e := &edge{url: base, stderr: new(logbuftest.Buffer)}
	cfg.Stderr = e.stderr
	h, err := wazero.New(context.Background(), b.mod, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		h.Close(context.Background())
		if t.Failed() && e.stderr.Len() > 0 {
			t.Logf("guest output:\n%s", e.stderr)
		}
	})
	return e, log
}

// fieldNames are the names of a's header fields but Date.
func fieldNames(a answer) []string {
	var names []string
	for name := range a.header {
		if name != "Date" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestLeases: after the first gated 304 the edge holds a lease and answers
// revalidations itself, each logged before it is answered; the origin's
// meters, read through the admin API (which settles the edge's leases by a
// push to its revoke endpoint), bill exactly one call per 304 however many
// were leased; a suspension acknowledged by the admin API reaches the very
// next revalidation (the lease is revoked first), as it does without
// leases.
func TestLeases(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := startOrigin(t) // its own: its leases are this edge's alone
		org := "lease-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		e, log := leasedEdge(t, b, o)
		n := 0
		get := func(hdr ...string) answer {
			t.Helper()
			n++
			return do(t, e.url, "GET", "/v1/tiers", "", append([]string{"Authorization", "Bearer " + tok,
				"X-Request-Id", fmt.Sprintf("lease-%s-%04d", b.name, n)}, hdr...)...)
		}
		first := get()
		tag := first.header.Get("ETag")
		if first.status != 200 || tag == "" {
			t.Fatalf("GET /v1/tiers: %d, ETag %q", first.status, tag)
		}
		calls := o.calls(t, org)

		gated := get("If-None-Match", tag)
		if gated.status != 304 {
			t.Fatalf("the first revalidation: %d, want 304: %.300s", gated.status, gated.body)
		}
		for e.host.Stats().Backgrounds == 0 { // the lease request, answered and resumed
			time.Sleep(time.Millisecond)
		}
		st := e.host.Stats()
		const revalidations = 6
		for range revalidations {
			r := get("If-None-Match", tag)
			if r.status != 304 || r.header.Get("ETag") != tag {
				t.Fatalf("revalidation: %d, ETag %q: %.300s", r.status, r.header.Get("ETag"), r.body)
			}
			if got, want := fieldNames(r), fieldNames(gated); !slices.Equal(got, want) {
				t.Errorf("a 304 with the fields %q, the gated one's %q", got, want)
			}
		}
		b2, _ := os.ReadFile(log)
		leased := strings.Count(string(b2), "\n")
		gates := e.host.Stats().Subrequests - st.Subrequests
		if leased == 0 || int(gates)+leased != revalidations {
			t.Errorf("%d revalidations: %d leased (usage log %q), %d gated; want some leased, and every one either",
				revalidations, leased, b2, gates)
		}
		revokes := e.host.Stats().Revokes
		if got := o.calls(t, org) - calls; got != revalidations+1 {
			t.Errorf("%d 304s billed %d calls once the leases were settled, want %d", revalidations+1, got, revalidations+1)
		}
		settled := e.host.Stats().Revokes
		if settled == revokes {
			t.Error("the admin read of the organisation pushed no settle to the edge")
		}
		t.Logf("%d revalidations: %d leased, %d gated", revalidations, leased, gates)

		if code, m := o.adminCall(t, "PATCH", "/admin/v1/orgs/"+org, `{"status":"suspended"}`); code != 200 {
			t.Fatalf("suspend: %d %v", code, m)
		}
		if e.host.Stats().Revokes == settled {
			t.Error("the suspension pushed no revoke to the edge")
		}
		if r := get("If-None-Match", tag); r.status != 403 {
			t.Errorf("the revalidation after the suspension: %d, want 403: %.300s", r.status, r.body)
		}
	})
}
