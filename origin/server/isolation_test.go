package server

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/store"
)

// Isolation of the bulk path (issue #36, points 1 to 3): two organisations
// on one origin, one attacking, the other's bundles, builds and downloads
// unaffected.

// classPath is the inline export of class n of sub.
func classPath(sub *corpus.Subject, n int) string {
	return "/v1/exports/classes/" + sub.Ref() + "/" + strconv.Itoa(n) + "?format=inline"
}

// allClasses are the inline exports of every class of the corpus: as
// many distinct bundles an organisation can have built.
func allClasses(c *corpus.Corpus) []string {
	var paths []string
	for _, sub := range c.Subjects {
		for _, l := range sub.Lessons {
			paths = append(paths, classPath(sub, l.Number))
		}
	}
	return paths
}

// useStore makes st the bundle store of h's origin (before any export).
func useStore(t *testing.T, h *exportHarness, st *bundles.Store) {
	t.Helper()
	t.Cleanup(func() { st.Close() })
	h.srv.cfg.Bundles = st
}

// One organisation churning through distinct bundles does not evict
// another's: with a bound of three of the victim's bundles, the attacker's
// many inline exports (each a build) leave the victim's zip stored, so its
// next download builds nothing. Before the share and largest-first
// eviction, one LRU for everyone evicted it.
func TestBundleChurnSparesOtherOrg(t *testing.T) {
	// The victim's bundle's size, measured on an origin of its own.
	probe := newExportHarness(t, 0)
	sub := multiClass(t, probe.corpus())
	wantStatus(t, probe.get(probe.zipLink(probe.exporter("victim"), sub, 0), ""), 200)
	size := probe.srv.tmpBundles.st.Stats().Bytes

	h := newExportHarness(t, 0)
	h.srv.cfg.DownloadRate = 1e6 // the attacker's builds are bounded by the store here, not its download rate
	st, err := bundles.Open(t.TempDir(), 3*size, bundles.Clock(h.now))
	if err != nil {
		t.Fatal(err)
	}
	useStore(t, h, st)
	victim := h.zipLink(h.exporter("victim"), sub, 0)
	wantStatus(t, h.get(victim, ""), 200)
	if n := h.builds(); n != 1 {
		t.Fatalf("%d builds, want 1", n)
	}
	attacker := h.exporter("attacker")
	paths := allClasses(h.corpus())
	var churned int64
	for _, p := range paths {
		wantStatus(t, h.get(p, attacker), 200)
	}
	churned = st.Stats().Builds - 1
	if churned < int64(len(paths)) || st.Stats().Evictions+st.Stats().ShareEvictions == 0 {
		t.Fatalf("the attacker built %d bundles and evicted %+v: no churn to test", churned, st.Stats())
	}
	before := h.builds()
	wantStatus(t, h.get(victim, ""), 200)
	if n := h.builds() - before; n != 0 {
		t.Errorf("the victim's download after %d of the attacker's builds built %d bundles, want 0 (still stored)", churned, n)
	}
}

// An organisation builds at most BuildsPerHour bundles an hour on an
// origin: one more distinct bundle is 429 RATE_LIMITED with Retry-After
// to the top of the hour, billing nothing, for inline exports and zip
// downloads alike; its stored bundles are still served, another
// organisation builds as before, and the next hour it builds again.
func TestBundleBuildsPerHour(t *testing.T) {
	h := newExportHarness(t, 0)
	h.clock.Store(time.Date(2026, 11, 22, 10, 59, 20, 0, time.UTC).UnixNano())
	st, err := bundles.Open(t.TempDir(), 0, bundles.BuildsPerHour(3), bundles.Clock(h.now))
	if err != nil {
		t.Fatal(err)
	}
	useStore(t, h, st)
	sub := multiClass(t, h.corpus())
	paths := allClasses(h.corpus())
	attacker := h.exporter("attacker")
	for _, p := range paths[:3] {
		wantStatus(t, h.get(p, attacker), 200)
	}
	before := h.usage("attacker")
	r := h.get(paths[3], attacker)
	e := r.wantError(t, 429, "RATE_LIMITED")
	if r.header.Get("Retry-After") != "40" || e.RetryAfter == nil || *e.RetryAfter != 40 {
		t.Errorf("Retry-After %q, retryAfterSeconds %v; want 40 (the top of the hour)", r.header.Get("Retry-After"), e.RetryAfter)
	}
	link := h.zipLink(attacker, sub, 1) // billed: the export is, its download builds
	before = h.cost("refused build", "attacker", before, 1, 1, 1)
	h.get(link, "").wantError(t, 429, "RATE_LIMITED")
	wantStatus(t, h.get(paths[0], attacker), 200) // stored: read
	before = h.cost("stored", "attacker", before, 1, 1, 1)
	if n := h.builds(); n != 3 {
		t.Errorf("%d builds, want 3", n)
	}

	// Another organisation's builds are its own.
	victim := h.exporter("victim")
	for _, p := range paths[3:5] {
		wantStatus(t, h.get(p, victim), 200)
	}
	wantStatus(t, h.get(h.zipLink(victim, sub, 0), ""), 200)

	// Bundles of the same key asked at once take one build.
	h.clock.Add(int64(time.Minute)) // the next hour
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i] = h.get(paths[4], attacker).status }()
	}
	wg.Wait()
	for _, p := range paths[5:7] {
		wantStatus(t, h.get(p, attacker), 200)
	}
	for i, c := range codes {
		if c != 200 {
			t.Errorf("concurrent export %d of one bundle: %d, want 200", i, c)
		}
	}
	h.get(paths[7], attacker).wantError(t, 429, "RATE_LIMITED")
}

// Eight inline exports at once of eight distinct bundles, with room in the
// download quota for one: one is served, seven are 429 QUOTA_EXCEEDED
// billing the call only, and one bundle is built (all eight were, before
// the export was reserved before its build).
func TestInlineRefusalsBuildNothing(t *testing.T) {
	h := newExportHarness(t, 0)
	paths := allClasses(h.corpus())[:8]
	tok := h.exporter("org")
	one := int64(1)
	if _, err := h.store.UpdateOrg(context.Background(), "org", func(o *store.Org) error { o.Quota.Downloads = &one; return nil }); err != nil {
		t.Fatal(err)
	}
	before := h.usage("org")
	var wg sync.WaitGroup
	got := make([]resp, len(paths))
	start := make(chan struct{})
	for i, p := range paths {
		wg.Add(1)
		go func() { defer wg.Done(); <-start; got[i] = h.get(p, tok) }()
	}
	close(start)
	wg.Wait()
	served := 0
	for _, r := range got {
		if r.status == 200 {
			served++
			continue
		}
		r.wantError(t, 429, "QUOTA_EXCEEDED")
	}
	if served != 1 {
		t.Errorf("%d served, want 1", served)
	}
	if n := h.builds(); n != 1 {
		t.Errorf("%d bundles built for %d exports with room for one, want 1", n, len(paths))
	}
	h.cost("eight at once", "org", before, 8, 1, 1)
	if rows := h.ledger("org"); len(rows) != 1 {
		t.Errorf("%d ledger rows, want 1", len(rows))
	}
}
