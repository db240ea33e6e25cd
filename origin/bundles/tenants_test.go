package bundles

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// getFor reads key's bundle for owner, built as n bytes when missing.
func getFor(t *testing.T, s *Store, key, owner string, n int) {
	t.Helper()
	f, err := s.Get(context.Background(), key, owner, bytesOf('x', n))
	read(t, f, err)
}

// No owner holds more than its share of the bound: past it, its own least
// recently used bundles go, never another owner's, and never the one just
// built.
func TestOrgShare(t *testing.T) {
	s, err := Open(t.TempDir(), 1000, Reserve(0), OrgShare(25))
	if err != nil {
		t.Fatal(err)
	}
	getFor(t, s, Key("victim"), "victim", 100)
	for i := range 10 {
		getFor(t, s, Key("a", strconv.Itoa(i)), "attacker", 100)
		if held := s.Held("attacker"); held > 250 {
			t.Fatalf("the attacker holds %d bytes after %d builds, its share is 250", held, i+1)
		}
	}
	if !s.Has(Key("victim")) || !s.Has(Key("a", "9")) || s.Has(Key("a", "0")) {
		t.Error("the share evicted the wrong bundles")
	}
	if st := s.Stats(); st.ShareEvictions != 8 || st.Evictions != 0 || st.Owners != 2 {
		t.Errorf("stats %+v: want 8 share evictions, none for the bound, 2 owners", st)
	}
	// A bundle bigger than the share is kept alone.
	getFor(t, s, Key("big"), "attacker", 400)
	if s.Held("attacker") != 400 || !s.Has(Key("big")) {
		t.Errorf("the attacker holds %d bytes; want its newest bundle alone, 400", s.Held("attacker"))
	}
}

// Over the bound, the owner holding the most gives up its least recently
// used bundle first: an owner holding less keeps its bundles, however
// recently the others built theirs.
func TestLargestHolderEvictedFirst(t *testing.T) {
	s, err := Open(t.TempDir(), 600, Reserve(0), OrgShare(100))
	if err != nil {
		t.Fatal(err)
	}
	getFor(t, s, Key("v1"), "victim", 100)
	getFor(t, s, Key("v2"), "victim", 100)
	for i := range 20 {
		getFor(t, s, Key("a", strconv.Itoa(i)), "attacker", 100)
	}
	if !s.Has(Key("v1")) || !s.Has(Key("v2")) {
		t.Error("the attacker's builds evicted the victim's bundles")
	}
	if st := s.Stats(); st.Bytes > 600 || s.Held("attacker") != 400 {
		t.Errorf("%d bytes held, the attacker %d; want at most 600, 400", st.Bytes, s.Held("attacker"))
	}
	// The victim holding the most now, its least recently used goes.
	getFor(t, s, Key("v1"), "victim", 100)     // read: v2 is its oldest
	getFor(t, s, Key("v", "3"), "victim", 100) // 300 each: the attacker's oldest goes
	getFor(t, s, Key("v", "4"), "victim", 100) // the victim holds 400: its oldest goes
	if s.Has(Key("v2")) || !s.Has(Key("v1")) {
		t.Error("the largest holder's least recently used bundle was not the one evicted")
	}
}

// Admit bounds the builds an owner starts an hour: concurrent requests of
// one key take one build; a key held takes none; an admission given back
// unbuilt frees its build; the next hour starts afresh.
func TestAdmit(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	s, err := Open(t.TempDir(), 0, Reserve(0), BuildsPerHour(2), Clock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	admit := func(key string) (func(), error) { return s.Admit("org", Key(key)) }
	d1, err := admit("k1")
	if err != nil {
		t.Fatal(err)
	}
	d1b, err := admit("k1") // the same bundle: the same build
	if err != nil {
		t.Fatal(err)
	}
	getFor(t, s, Key("k1"), "org", 10)
	d1()
	d1b()
	d2, err := admit("k2")
	if err != nil {
		t.Fatal(err)
	}
	_, err = admit("k3")
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != 2 || le.RetryAfter != 45*time.Minute {
		t.Fatalf("a third build: %v; want a LimitError of 2, retry in 45m", err)
	}
	if _, err := admit("k1"); err != nil { // held: nothing to build
		t.Errorf("a held bundle: %v", err)
	}
	if _, err := s.Admit("other", Key("o1")); err != nil {
		t.Errorf("another owner: %v", err)
	}
	d2() // not built: given back
	d3, err := admit("k3")
	if err != nil {
		t.Fatalf("after an admission given back: %v", err)
	}
	getFor(t, s, Key("k3"), "org", 10)
	d3()
	if _, err := admit("k4"); err == nil {
		t.Error("a third build in the hour admitted")
	}
	now = now.Add(45 * time.Minute)
	if _, err := admit("k4"); err != nil {
		t.Errorf("the next hour: %v", err)
	}
	if st := s.Stats(); st.Limited != 2 {
		t.Errorf("%d refused, want 2", st.Limited)
	}
}

// Bundles a previous process left are owned by nobody until a read names
// their owner: then they count in its share.
func TestReopenOwner(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, 1000, Reserve(0))
	if err != nil {
		t.Fatal(err)
	}
	getFor(t, s, Key("a"), "org", 100)
	s.Close()
	s, err = Open(dir, 1000, Reserve(0))
	if err != nil {
		t.Fatal(err)
	}
	if s.Held("org") != 0 || s.Held("") != 100 {
		t.Fatalf("reopened: org holds %d, nobody %d", s.Held("org"), s.Held(""))
	}
	f, ok := s.Stored(Key("a"), "org")
	if !ok {
		t.Fatal("the bundle left is not stored")
	}
	f.Close()
	if s.Held("org") != 100 || s.Held("") != 0 {
		t.Errorf("after a read: org holds %d, nobody %d", s.Held("org"), s.Held(""))
	}
	if _, ok := s.Stored(Key("b"), "org"); ok {
		t.Error("a bundle never built is stored")
	}
}
