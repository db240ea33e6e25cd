// Package storetest is the conformance suite for store.Store. Every
// backend runs the same suite from its own tests:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Exclusive, func(t *testing.T) storetest.Opener {
//			path := filepath.Join(t.TempDir(), "lectern.db")
//			return func(ctx context.Context) (store.Store, error) {
//				return sqlitestore.New(ctx, path)
//			}
//		})
//	}
//
// Besides the contract's own words the suite holds backends to these
// shared rules: instants read back in UTC, to the microsecond or better;
// a nil limit (no cap) and a zero limit (a cap of zero) stay distinct; an
// empty list reads back as an empty, non-nil slice whether it was written
// nil or empty; and everything survives closing and reopening the store.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// An Opener opens a Store over one database. Each call opens another Store
// over the same data, as a restarted origin would; calls may be
// concurrent. The suite closes the stores it opens.
type Opener func(ctx context.Context) (store.Store, error)

// Kind says how the Stores of one database may coexist.
type Kind int

const (
	// Shared: several Stores (origins) may have one database open at once,
	// and each sees the others' writes on its next read (pgstore).
	Shared Kind = iota
	// Exclusive: one Store at a time owns a database; opening another
	// while it is open fails (sqlitestore, which caches organisations).
	Exclusive
)

// Run runs the suite. newDB makes a fresh, empty database for one subtest
// and returns its Opener; subtests run in parallel, each on its own
// database.
func Run(t *testing.T, kind Kind, newDB func(t *testing.T) Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"OrgRoundTrip", testOrgRoundTrip},
		{"OrgEmptyLists", testOrgEmptyLists},
		{"OrgConflict", testOrgConflict},
		{"OrgNotFound", testOrgNotFound},
		{"UpdateOrg", testUpdateOrg},
		{"UpdateOrgError", testUpdateOrgError},
		{"UpdateOrgConcurrent", testUpdateOrgConcurrent},
		{"DeleteOrg", testDeleteOrg},
		{"OrgIDs", testOrgIDs},
		{"OrgGeneration", testOrgGeneration},
		{"ClientRoundTrip", testClientRoundTrip},
		{"ClientMissingOrg", testClientMissingOrg},
		{"ClientConflict", testClientConflict},
		{"SigningKeys", testSigningKeys},
		{"ResealSigningKey", testResealSigningKey},
		{"SigningKeyUnlessNewer", testSigningKeyUnlessNewer},
		{"SigningKeyUnlessNewerConcurrent", func(t *testing.T, open Opener) { testSigningKeyUnlessNewerConcurrent(t, open, kind) }},
		{"AuthCodeTakenOnce", testAuthCodeTakenOnce},
		{"AuthCodeConcurrent", testAuthCodeConcurrent},
		{"AuthCodeExpired", testAuthCodeExpired},
		{"PruneAuthCodes", testPruneAuthCodes},
		{"Reopen", testReopen},
		{"ReadsAfterWrites", testReadsAfterWrites},
		{"ReadsDuringWrites", testReadsDuringWrites},
		{"TestClock", testTestClock},
		{"CorpusRecord", testCorpusRecord},
		{"CorpusVersionPin", testCorpusVersionPin},
		{"CorpusVersionHistory", testCorpusVersionHistory},
		{"CorpusAnnounced", testCorpusAnnounced},
	}
	if kind == Shared {
		tests = append(tests, struct {
			name string
			fn   func(t *testing.T, open Opener)
		}{"ConcurrentOpen", testConcurrentOpen})
	} else {
		tests = append(tests, struct {
			name string
			fn   func(t *testing.T, open Opener)
		}{"ExclusiveOpen", testExclusiveOpen})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newDB(t))
		})
	}
}

// openStore opens a store that is closed when the test ends.
func openStore(t *testing.T, open Opener) store.Store {
	t.Helper()
	s, err := open(t.Context())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	closeAtEnd(t, s)
	return s
}

// openRestartable opens a store and returns a stop func that closes it, as
// a shutdown would. If the test ends first, the store is closed then.
func openRestartable(t *testing.T, open Opener) (store.Store, func()) {
	t.Helper()
	s, err := open(t.Context())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Close()
		}
	})
	return s, func() {
		t.Helper()
		stopped = true
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

func closeAtEnd(t *testing.T, s store.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// resolution is the coarsest time resolution a backend may keep.
const resolution = time.Microsecond

var (
	// A zone other than UTC, to check that backends return UTC.
	zone = time.FixedZone("UTC+5:30", 5*3600+1800)
	// t0 carries nanoseconds, to check truncation to resolution.
	t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, zone)
)

func ptr(n int64) *int64 { return &n }

func fullOrg(id string) *store.Org {
	return &store.Org{
		ID:     id,
		Name:   "Org " + id,
		Tier:   "standard",
		Status: "active",
		Grants: []string{"high", "middle/algebra"},
		Quota: store.Quota{
			Calls:         ptr(100000),
			Downloads:     ptr(0), // a cap of zero, not "no cap"
			Exports:       nil,
			TestprepItems: ptr(1 << 40),
		},
		RateLimits: store.RateLimits{
			CallsPerHour:       nil,
			LessonReadsPerHour: ptr(0),
			URLMintsPerHour:    ptr(600),
		},
		EclaVersion:         2,
		RequiredEclaVersion: 3,
		RenewsAt:            t0.AddDate(1, 0, 0),
		LongURLs:            true,
		CreatedAt:           t0,
		UpdatedAt:           t0.Add(time.Hour),
	}
}

func fullClient(id, orgID string) *store.Client {
	return &store.Client{
		ID:           id,
		OrgID:        orgID,
		SecretHash:   []byte("$argon2id$v=19$m=65536,t=1,p=4$\x00\xff"),
		Scopes:       []string{"content.read", "progress.write"},
		GrantTypes:   []string{"client_credentials", "authorization_code"},
		RedirectURIs: []string{"https://app.example/cb", "http://127.0.0.1:9999/cb"},
		CreatedAt:    t0,
	}
}

func authCode(hash string, expires time.Time) store.AuthCode {
	return store.AuthCode{
		CodeHash:    hash,
		ClientID:    "client-1",
		RedirectURI: "https://app.example/cb",
		Scope:       "service-api/content.read service-api/progress.write",
		Challenge:   "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
		Learner:     "learner-42",
		ExpiresAt:   expires,
	}
}

func mustCreateOrg(t *testing.T, s store.Store, o *store.Org) {
	t.Helper()
	if err := s.CreateOrg(t.Context(), o); err != nil {
		t.Fatalf("CreateOrg(%s): %v", o.ID, err)
	}
}

func mustCreateClient(t *testing.T, s store.Store, c *store.Client) {
	t.Helper()
	if err := s.CreateClient(t.Context(), c); err != nil {
		t.Fatalf("CreateClient(%s): %v", c.ID, err)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", what, err, want)
	}
}

// equal checks that got is what a backend must return for want,
// comparing instants with checkTime and everything else exactly. Lists
// that are empty in want must come back non-nil.
func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	g, w := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	gc, wc := reflect.New(g.Type()).Elem(), reflect.New(w.Type()).Elem()
	gc.Set(g)
	wc.Set(w)
	for i := range wc.NumField() {
		switch f := wc.Field(i); v := f.Interface().(type) {
		case time.Time:
			checkTime(t, what+"."+wc.Type().Field(i).Name, gc.Field(i).Interface().(time.Time), v)
			f.SetZero()
			gc.Field(i).SetZero()
		case []string:
			if len(v) == 0 {
				f.Set(reflect.ValueOf([]string{}))
			}
		}
	}
	if !reflect.DeepEqual(gc.Interface(), wc.Interface()) {
		t.Errorf("%s:\n got %s\nwant %s", what, dump(gc.Interface()), dump(wc.Interface()))
	}
}

func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if got.Location() != time.UTC {
		t.Errorf("%s: got location %v, want UTC", what, got.Location())
	}
	if d := got.Sub(want); d <= -resolution || d >= resolution {
		t.Errorf("%s: got %v, want %v", what, got, want.UTC())
	}
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func testOrgRoundTrip(t *testing.T, open Opener) {
	s := openStore(t, open)
	want := fullOrg("acme")
	mustCreateOrg(t, s, want)
	got, err := s.GetOrg(t.Context(), "acme")
	if err != nil {
		t.Fatalf("GetOrg: %v", err)
	}
	equal(t, "GetOrg", got, want)

	// Every limit nil, then every limit zero: neither reads as the other.
	none := &store.Org{ID: "none", Status: "active", CreatedAt: t0, UpdatedAt: t0, RenewsAt: t0}
	zero := &store.Org{ID: "zero", Status: "active", CreatedAt: t0, UpdatedAt: t0, RenewsAt: t0,
		Quota:      store.Quota{Calls: ptr(0), Downloads: ptr(0), Exports: ptr(0), TestprepItems: ptr(0)},
		RateLimits: store.RateLimits{CallsPerHour: ptr(0), LessonReadsPerHour: ptr(0), URLMintsPerHour: ptr(0)},
	}
	for _, want := range []*store.Org{none, zero} {
		mustCreateOrg(t, s, want)
		got, err := s.GetOrg(t.Context(), want.ID)
		if err != nil {
			t.Fatalf("GetOrg(%s): %v", want.ID, err)
		}
		equal(t, "GetOrg("+want.ID+")", got, want)
	}
}

func testOrgEmptyLists(t *testing.T, open Opener) {
	s := openStore(t, open)
	for i, grants := range [][]string{nil, {}} {
		o := fullOrg(fmt.Sprint("org-", i))
		o.Grants = grants
		mustCreateOrg(t, s, o)
		got, err := s.GetOrg(t.Context(), o.ID)
		if err != nil {
			t.Fatalf("GetOrg: %v", err)
		}
		if got.Grants == nil || len(got.Grants) != 0 {
			t.Errorf("grants written as %#v: got %#v, want []string{}", grants, got.Grants)
		}
	}
}

func testOrgConflict(t *testing.T, open Opener) {
	s := openStore(t, open)
	mustCreateOrg(t, s, fullOrg("acme"))
	dup := fullOrg("acme")
	dup.Name = "Impostor"
	wantErr(t, "CreateOrg duplicate", s.CreateOrg(t.Context(), dup), store.ErrConflict)
	got, err := s.GetOrg(t.Context(), "acme")
	if err != nil {
		t.Fatalf("GetOrg: %v", err)
	}
	if got.Name != "Org acme" {
		t.Errorf("after duplicate create: got name %q, want %q", got.Name, "Org acme")
	}
}

func testOrgNotFound(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	_, err := s.GetOrg(ctx, "ghost")
	wantErr(t, "GetOrg", err, store.ErrNotFound)
	called := false
	_, err = s.UpdateOrg(ctx, "ghost", func(*store.Org) error { called = true; return nil })
	wantErr(t, "UpdateOrg", err, store.ErrNotFound)
	if called {
		t.Error("UpdateOrg called fn for a missing org")
	}
	wantErr(t, "DeleteOrg", s.DeleteOrg(ctx, "ghost"), store.ErrNotFound)
}

func testUpdateOrg(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	created := fullOrg("acme")
	mustCreateOrg(t, s, created)
	want := fullOrg("acme")
	want.Generation = created.Generation
	change := func(o *store.Org) {
		o.Status = "suspended"
		o.Grants = []string{"college"}
		o.Quota.Calls = nil      // cap removed
		o.Quota.Exports = ptr(0) // cap of zero added
		o.RateLimits.CallsPerHour = ptr(3600)
		o.EclaVersion = 3
		o.LongURLs = false
		o.RenewsAt = t0.AddDate(2, 0, 0)
		o.UpdatedAt = t0.Add(48 * time.Hour)
	}
	change(want)
	got, err := s.UpdateOrg(ctx, "acme", func(o *store.Org) error {
		change(o)
		o.Generation = "forged" // not changed: the generation is immutable
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateOrg: %v", err)
	}
	equal(t, "UpdateOrg result", got, want)
	got, err = s.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatalf("GetOrg: %v", err)
	}
	equal(t, "GetOrg after UpdateOrg", got, want)
}

func testUpdateOrgError(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	created := fullOrg("acme")
	mustCreateOrg(t, s, created)
	errBoom := errors.New("boom")
	_, err := s.UpdateOrg(ctx, "acme", func(o *store.Org) error {
		o.Status = "suspended"
		o.EclaVersion = 99
		return errBoom
	})
	if err != errBoom { // the contract: "fn's error as is"
		t.Fatalf("UpdateOrg: got error %v, want %v unwrapped", err, errBoom)
	}
	got, err := s.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatalf("GetOrg: %v", err)
	}
	equal(t, "GetOrg after failed UpdateOrg", got, created)
}

func testUpdateOrgConcurrent(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	start := fullOrg("acme")
	mustCreateOrg(t, s, start)
	const n = 32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := s.UpdateOrg(ctx, "acme", func(o *store.Org) error {
				o.EclaVersion++
				return nil
			})
			if err != nil {
				t.Errorf("UpdateOrg: %v", err)
			}
		})
	}
	wg.Wait()
	got, err := s.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatalf("GetOrg: %v", err)
	}
	if want := start.EclaVersion + n; got.EclaVersion != want {
		t.Errorf("after %d concurrent increments: got EclaVersion %d, want %d", n, got.EclaVersion, want)
	}
}

func testDeleteOrg(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	mustCreateOrg(t, s, fullOrg("acme"))
	mustCreateOrg(t, s, fullOrg("other"))
	mustCreateClient(t, s, fullClient("c1", "acme"))
	mustCreateClient(t, s, fullClient("c2", "acme"))
	mustCreateClient(t, s, fullClient("c3", "other"))
	if err := s.DeleteOrg(ctx, "acme"); err != nil {
		t.Fatalf("DeleteOrg: %v", err)
	}
	_, err := s.GetOrg(ctx, "acme")
	wantErr(t, "GetOrg after DeleteOrg", err, store.ErrNotFound)
	for _, id := range []string{"c1", "c2"} {
		_, err := s.GetClient(ctx, id)
		wantErr(t, "GetClient("+id+") after DeleteOrg", err, store.ErrNotFound)
	}
	if _, err := s.GetClient(ctx, "c3"); err != nil {
		t.Errorf("GetClient(c3) of another org: %v", err)
	}
	if _, err := s.GetOrg(ctx, "other"); err != nil {
		t.Errorf("GetOrg(other): %v", err)
	}
	wantErr(t, "DeleteOrg again", s.DeleteOrg(ctx, "acme"), store.ErrNotFound)
	// The id is free again, and the old clients do not come back with it.
	mustCreateOrg(t, s, fullOrg("acme"))
	_, err = s.GetClient(ctx, "c1")
	wantErr(t, "GetClient(c1) after the org is recreated", err, store.ErrNotFound)
}

// testOrgIDs: every organisation's id, in byte order, a deleted one
// gone; none on a new database.
func testOrgIDs(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	ids, err := s.OrgIDs(ctx)
	if err != nil || len(ids) != 0 {
		t.Fatalf("OrgIDs on a new database = %q, %v; want none", ids, err)
	}
	for _, id := range []string{"zeta", "acme", "beta", "acme-2", "gone"} {
		mustCreateOrg(t, s, fullOrg(id))
	}
	if err := s.DeleteOrg(ctx, "gone"); err != nil {
		t.Fatalf("DeleteOrg: %v", err)
	}
	ids, err = s.OrgIDs(ctx)
	if want := []string{"acme", "acme-2", "beta", "zeta"}; err != nil || !slices.Equal(ids, want) {
		t.Errorf("OrgIDs = %q, %v; want %q", ids, err, want)
	}
}

// testOrgGeneration: CreateOrg gives every organisation a fresh
// generation, whatever the caller set; nothing changes it; clients read
// their organisation's; and an organisation created again under a deleted
// one's id has another (issue #13: a re-created id is a new organisation).
func testOrgGeneration(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	first := fullOrg("acme")
	first.Generation = "chosen-by-the-caller"
	mustCreateOrg(t, s, first)
	if first.Generation == "" || first.Generation == "chosen-by-the-caller" {
		t.Fatalf("CreateOrg set Generation %q, want a fresh one", first.Generation)
	}
	other := fullOrg("other")
	mustCreateOrg(t, s, other)
	if other.Generation == first.Generation {
		t.Errorf("two organisations share generation %q", first.Generation)
	}
	got, err := s.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatalf("GetOrg: %v", err)
	}
	if got.Generation != first.Generation {
		t.Errorf("GetOrg: generation %q, want %q", got.Generation, first.Generation)
	}
	if got, err = s.UpdateOrg(ctx, "acme", func(o *store.Org) error { o.Generation = "forged"; return nil }); err != nil {
		t.Fatalf("UpdateOrg: %v", err)
	} else if got.Generation != first.Generation {
		t.Errorf("UpdateOrg changed the generation to %q", got.Generation)
	}
	c := fullClient("c1", "acme")
	c.OrgGeneration = "forged"
	mustCreateClient(t, s, c)
	if c.OrgGeneration != first.Generation {
		t.Errorf("CreateClient: OrgGeneration %q, want the org's %q", c.OrgGeneration, first.Generation)
	}
	gc, err := s.GetClient(ctx, "c1")
	if err != nil {
		t.Fatalf("GetClient: %v", err)
	}
	if gc.OrgGeneration != first.Generation {
		t.Errorf("GetClient: OrgGeneration %q, want the org's %q", gc.OrgGeneration, first.Generation)
	}

	if err := s.DeleteOrg(ctx, "acme"); err != nil {
		t.Fatalf("DeleteOrg: %v", err)
	}
	second := fullOrg("acme")
	second.Generation = first.Generation // a caller cannot bring the old one back
	mustCreateOrg(t, s, second)
	if second.Generation == "" || second.Generation == first.Generation {
		t.Fatalf("re-created org: generation %q, want a new one (the first was %q)", second.Generation, first.Generation)
	}
	if got, err := s.GetOrg(ctx, "acme"); err != nil || got.Generation != second.Generation {
		t.Fatalf("GetOrg of the re-created org: %v, %v; want generation %q", got, err, second.Generation)
	}
	mustCreateClient(t, s, fullClient("c2", "acme"))
	if gc, err := s.GetClient(ctx, "c2"); err != nil || gc.OrgGeneration != second.Generation {
		t.Errorf("GetClient(c2) of the re-created org: %v, %v; want generation %q", gc, err, second.Generation)
	}
}

func testClientRoundTrip(t *testing.T, open Opener) {
	s := openStore(t, open)
	mustCreateOrg(t, s, fullOrg("acme"))
	want := fullClient("c1", "acme")
	mustCreateClient(t, s, want)
	got, err := s.GetClient(t.Context(), "c1")
	if err != nil {
		t.Fatalf("GetClient: %v", err)
	}
	equal(t, "GetClient", got, want)

	bare := &store.Client{ID: "c2", OrgID: "acme", SecretHash: []byte{0}, CreatedAt: t0}
	mustCreateClient(t, s, bare)
	got, err = s.GetClient(t.Context(), "c2")
	if err != nil {
		t.Fatalf("GetClient: %v", err)
	}
	equal(t, "GetClient (nil lists)", got, bare)

	_, err = s.GetClient(t.Context(), "ghost")
	wantErr(t, "GetClient missing", err, store.ErrNotFound)
}

func testClientMissingOrg(t *testing.T, open Opener) {
	s := openStore(t, open)
	wantErr(t, "CreateClient of a missing org", s.CreateClient(t.Context(), fullClient("c1", "ghost")), store.ErrNotFound)
	_, err := s.GetClient(t.Context(), "c1")
	wantErr(t, "GetClient after failed create", err, store.ErrNotFound)
}

func testClientConflict(t *testing.T, open Opener) {
	s := openStore(t, open)
	mustCreateOrg(t, s, fullOrg("acme"))
	mustCreateOrg(t, s, fullOrg("other"))
	mustCreateClient(t, s, fullClient("c1", "acme"))
	wantErr(t, "CreateClient duplicate", s.CreateClient(t.Context(), fullClient("c1", "other")), store.ErrConflict)
	got, err := s.GetClient(t.Context(), "c1")
	if err != nil {
		t.Fatalf("GetClient: %v", err)
	}
	if got.OrgID != "acme" {
		t.Errorf("after duplicate create: got org %q, want %q", got.OrgID, "acme")
	}
}

func testSigningKeys(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	keys, err := s.SigningKeys(ctx)
	if err != nil || len(keys) != 0 {
		t.Fatalf("SigningKeys on an empty store: got %v, %v; want none", keys, err)
	}
	key := func(kid string, age time.Duration) store.SigningKey {
		return store.SigningKey{KID: kid, Alg: "EdDSA", Private: []byte("seed-" + kid + "\x00\xff"), CreatedAt: t0.Add(-age)}
	}
	// Added out of order: the list is by creation time, not insertion.
	mid, old, newest := key("k2", time.Hour), key("k1", 48*time.Hour), key("k3", time.Second)
	for _, k := range []store.SigningKey{mid, old, newest} {
		if err := s.AddSigningKey(ctx, k); err != nil {
			t.Fatalf("AddSigningKey(%s): %v", k.KID, err)
		}
	}
	dup := key("k2", 0)
	wantErr(t, "AddSigningKey duplicate kid", s.AddSigningKey(ctx, dup), store.ErrConflict)
	keys, err = s.SigningKeys(ctx)
	if err != nil {
		t.Fatalf("SigningKeys: %v", err)
	}
	want := []store.SigningKey{newest, mid, old}
	if len(keys) != len(want) {
		t.Fatalf("SigningKeys: got %d keys, want %d", len(keys), len(want))
	}
	for i := range want {
		equal(t, fmt.Sprintf("SigningKeys[%d]", i), &keys[i], &want[i])
	}
}

// testSigningKeyUnlessNewer: a key is added only while no key created
// after since exists (the identity provider's "due for a key").
func testSigningKeyUnlessNewer(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	key := func(kid string, created time.Time) store.SigningKey {
		return store.SigningKey{KID: kid, Alg: "EdDSA", Private: []byte("seed-" + kid), CreatedAt: created}
	}
	add := func(what string, k store.SigningKey, since time.Time, want bool) {
		t.Helper()
		added, err := s.AddSigningKeyUnlessNewer(ctx, k, since)
		if err != nil || added != want {
			t.Fatalf("%s: got %v, %v; want %v", what, added, err, want)
		}
	}
	first := key("k1", t0)
	add("on an empty store", first, t0.Add(-time.Hour), true)
	add("with a key created after since", key("k2", t0.Add(time.Second)), t0.Add(-time.Hour), false)
	add("with a key created at since", key("k3", t0.Add(time.Minute)), t0, true)
	dup, err := s.AddSigningKeyUnlessNewer(ctx, key("k1", t0.Add(2*time.Minute)), t0.Add(time.Hour))
	if dup || !errors.Is(err, store.ErrConflict) {
		t.Errorf("a kid that exists: got %v, %v; want ErrConflict", dup, err)
	}
	keys, err := s.SigningKeys(ctx)
	if err != nil || len(keys) != 2 || keys[0].KID != "k3" || keys[1].KID != "k1" {
		t.Fatalf("SigningKeys: got %v, %v; want k3, k1", keys, err)
	}
	equal(t, "the first key", &keys[1], &first)
}

// testSigningKeyUnlessNewerConcurrent: callers due for a key at once (each
// on a Store of its own where the backend is shared, as origins started
// together on an empty database) add exactly one between them.
func testSigningKeyUnlessNewerConcurrent(t *testing.T, open Opener, kind Kind) {
	const n = 8
	stores := make([]store.Store, n)
	for i := range stores {
		if kind == Shared || i == 0 {
			stores[i] = openStore(t, open)
		} else {
			stores[i] = stores[0]
		}
	}
	for round := range 3 { // an empty store, then two rotations
		since := t0.Add(time.Duration(round)*time.Hour - time.Minute)
		var (
			wg    sync.WaitGroup
			gate  = make(chan struct{})
			added atomic.Int32
		)
		for i, s := range stores {
			wg.Go(func() {
				k := store.SigningKey{KID: fmt.Sprintf("r%d-k%d", round, i), Alg: "EdDSA", Private: []byte("seed"),
					CreatedAt: t0.Add(time.Duration(round) * time.Hour)}
				<-gate
				ok, err := s.AddSigningKeyUnlessNewer(t.Context(), k, since)
				if err != nil {
					t.Errorf("AddSigningKeyUnlessNewer: %v", err)
				}
				if ok {
					added.Add(1)
				}
			})
		}
		close(gate)
		wg.Wait()
		if got := added.Load(); got != 1 {
			t.Errorf("round %d: %d concurrent callers added %d keys, want 1", round, n, got)
		}
		keys, err := stores[n-1].SigningKeys(t.Context())
		if err != nil || len(keys) != round+1 {
			t.Fatalf("round %d: SigningKeys: got %d keys, %v; want %d", round, len(keys), err, round+1)
		}
	}
}

// testResealSigningKey: a key's Private is replaced only while it still
// holds what the caller read (two identity providers may reseal at once).
func testResealSigningKey(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	k := store.SigningKey{KID: "k1", Alg: "EdDSA", Private: []byte("plain\x00seed"), CreatedAt: t0}
	if err := s.AddSigningKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "ResealSigningKey unknown kid", s.ResealSigningKey(ctx, "k9", k.Private, []byte("x")), store.ErrNotFound)
	if err := s.ResealSigningKey(ctx, "k1", k.Private, []byte("sealed\xff")); err != nil {
		t.Fatalf("ResealSigningKey: %v", err)
	}
	wantErr(t, "ResealSigningKey of a replaced value", s.ResealSigningKey(ctx, "k1", k.Private, []byte("again")), store.ErrNotFound)
	keys, err := s.SigningKeys(ctx)
	if err != nil || len(keys) != 1 {
		t.Fatalf("SigningKeys: got %v, %v; want one key", keys, err)
	}
	k.Private = []byte("sealed\xff")
	equal(t, "resealed key", &keys[0], &k)
}

func testAuthCodeTakenOnce(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	want := authCode("hash-1", t0.Add(time.Minute))
	if err := s.SaveAuthCode(ctx, want); err != nil {
		t.Fatalf("SaveAuthCode: %v", err)
	}
	got, err := s.TakeAuthCode(ctx, "hash-1", t0)
	if err != nil {
		t.Fatalf("TakeAuthCode: %v", err)
	}
	equal(t, "TakeAuthCode", got, &want)
	_, err = s.TakeAuthCode(ctx, "hash-1", t0)
	wantErr(t, "TakeAuthCode again", err, store.ErrNotFound)
	_, err = s.TakeAuthCode(ctx, "unknown", t0)
	wantErr(t, "TakeAuthCode unknown", err, store.ErrNotFound)
}

// testAuthCodeConcurrent races 32 takers for each of several codes,
// released together so that their reads overlap.
func testAuthCodeConcurrent(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	const rounds, n = 8, 32
	for r := range rounds {
		hash := fmt.Sprint("hash-", r)
		if err := s.SaveAuthCode(ctx, authCode(hash, t0.Add(time.Minute))); err != nil {
			t.Fatalf("SaveAuthCode: %v", err)
		}
		var (
			wg   sync.WaitGroup
			gate = make(chan struct{})
			wins atomic.Int32
		)
		for range n {
			wg.Go(func() {
				<-gate
				_, err := s.TakeAuthCode(ctx, hash, t0)
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, store.ErrNotFound):
					t.Errorf("TakeAuthCode: %v", err)
				}
			})
		}
		close(gate)
		wg.Wait()
		if got := wins.Load(); got != 1 {
			t.Errorf("%d concurrent TakeAuthCode of one code: got %d winners, want 1", n, got)
		}
	}
}

func testAuthCodeExpired(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	exp := t0.Add(time.Minute)
	for _, c := range []struct {
		hash string
		now  time.Time
	}{
		{"at-expiry", exp},
		{"after-expiry", exp.Add(time.Second)},
	} {
		if err := s.SaveAuthCode(ctx, authCode(c.hash, exp)); err != nil {
			t.Fatalf("SaveAuthCode: %v", err)
		}
		_, err := s.TakeAuthCode(ctx, c.hash, c.now)
		wantErr(t, "TakeAuthCode "+c.hash, err, store.ErrNotFound)
		// Expired is gone for good, even for a caller whose clock is behind.
		_, err = s.TakeAuthCode(ctx, c.hash, t0)
		wantErr(t, "TakeAuthCode "+c.hash+" with an earlier clock", err, store.ErrNotFound)
	}
	// Just before expiry it is still good.
	if err := s.SaveAuthCode(ctx, authCode("live", exp)); err != nil {
		t.Fatalf("SaveAuthCode: %v", err)
	}
	if _, err := s.TakeAuthCode(ctx, "live", exp.Add(-time.Millisecond)); err != nil {
		t.Errorf("TakeAuthCode just before expiry: %v", err)
	}
}

func testReopen(t *testing.T, open Opener) {
	ctx := t.Context()
	s, stop := openRestartable(t, open)
	org, client := fullOrg("acme"), fullClient("c1", "acme")
	key := store.SigningKey{KID: "k1", Alg: "EdDSA", Private: []byte("seed"), CreatedAt: t0}
	code := authCode("hash-1", t0.Add(time.Minute))
	mustCreateOrg(t, s, org)
	mustCreateClient(t, s, client)
	if err := s.AddSigningKey(ctx, key); err != nil {
		t.Fatalf("AddSigningKey: %v", err)
	}
	if err := s.SaveAuthCode(ctx, code); err != nil {
		t.Fatalf("SaveAuthCode: %v", err)
	}
	if _, err := s.UpdateOrg(ctx, "acme", func(o *store.Org) error { o.EclaVersion = 7; return nil }); err != nil {
		t.Fatalf("UpdateOrg: %v", err)
	}
	org.EclaVersion = 7
	stop()

	// Twice: the second start finds its migrations applied.
	for i := range 2 {
		s, stop := openRestartable(t, open)
		gotOrg, err := s.GetOrg(ctx, "acme")
		if err != nil {
			t.Fatalf("reopen %d: GetOrg: %v", i, err)
		}
		equal(t, "GetOrg after reopen", gotOrg, org)
		gotClient, err := s.GetClient(ctx, "c1")
		if err != nil {
			t.Fatalf("reopen %d: GetClient: %v", i, err)
		}
		equal(t, "GetClient after reopen", gotClient, client)
		keys, err := s.SigningKeys(ctx)
		if err != nil || len(keys) != 1 {
			t.Fatalf("reopen %d: SigningKeys: got %d keys, %v; want 1", i, len(keys), err)
		}
		equal(t, "SigningKeys after reopen", &keys[0], &key)
		if i == 1 {
			gotCode, err := s.TakeAuthCode(ctx, "hash-1", t0)
			if err != nil {
				t.Fatalf("reopen %d: TakeAuthCode: %v", i, err)
			}
			equal(t, "TakeAuthCode after reopen", gotCode, &code)
		}
		stop()
	}
}

// testConcurrentOpen starts two stores on one new database at once, as two
// origins might: migrations must not race.
func testConcurrentOpen(t *testing.T, open Opener) {
	var (
		wg   sync.WaitGroup
		ss   [2]store.Store
		errs [2]error
	)
	for i := range ss {
		wg.Go(func() { ss[i], errs[i] = open(t.Context()) })
	}
	wg.Wait()
	for i, s := range ss {
		if errs[i] != nil {
			t.Fatalf("open store %d: %v", i, errs[i])
		}
		closeAtEnd(t, s)
	}
	mustCreateOrg(t, ss[0], fullOrg("acme"))
	if _, err := ss[1].GetOrg(t.Context(), "acme"); err != nil {
		t.Errorf("GetOrg from the other store: %v", err)
	}
}

// testExclusiveOpen: while a Store has the database open, a second open
// fails and names the reason; once the first is closed, it succeeds.
func testExclusiveOpen(t *testing.T, open Opener) {
	s, stop := openRestartable(t, open)
	mustCreateOrg(t, s, fullOrg("acme"))
	if s2, err := open(t.Context()); err == nil {
		s2.Close()
		t.Fatal("a second Store opened the database while the first had it open")
	}
	stop()
	s = openStore(t, open)
	if _, err := s.GetOrg(t.Context(), "acme"); err != nil {
		t.Errorf("GetOrg after reopening: %v", err)
	}
}

// testReadsAfterWrites: a GetOrg after a write returns what the write
// stored, also when the organisation was read (and possibly cached)
// before it, and what GetOrg returns is the caller's to change.
func testReadsAfterWrites(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	created := fullOrg("acme")
	mustCreateOrg(t, s, created)
	read := func(what string) *store.Org {
		t.Helper()
		o, err := s.GetOrg(ctx, "acme")
		if err != nil {
			t.Fatalf("GetOrg %s: %v", what, err)
		}
		return o
	}
	o := read("after CreateOrg")
	o.Status, o.Grants[0], *o.Quota.Calls = "mutated", "mutated", -1
	equal(t, "GetOrg after mutating an earlier result", read("again"), created)

	if _, err := s.UpdateOrg(ctx, "acme", func(o *store.Org) error { o.Status = "suspended"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := read("after UpdateOrg").Status; got != "suspended" {
		t.Errorf("status after UpdateOrg = %q, want suspended", got)
	}
	if err := s.DeleteOrg(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetOrg(ctx, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetOrg after DeleteOrg: %v, want ErrNotFound", err)
	}
	again := fullOrg("acme")
	again.Name = "Acme again"
	mustCreateOrg(t, s, again)
	if got := read("after CreateOrg again").Name; got != "Acme again" {
		t.Errorf("name after re-creating = %q", got)
	}
}

// testReadsDuringWrites: readers run while a writer bumps a counter; any
// GetOrg that starts after an UpdateOrg returned sees that update or a
// later one.
func testReadsDuringWrites(t *testing.T, open Opener) {
	s := openStore(t, open)
	ctx := t.Context()
	mustCreateOrg(t, s, fullOrg("acme"))
	var done atomic.Int64 // the last EclaVersion an UpdateOrg returned
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := done.Load()
				o, err := s.GetOrg(ctx, "acme")
				if err != nil {
					t.Errorf("GetOrg: %v", err)
					return
				}
				if int64(o.EclaVersion) < floor {
					t.Errorf("GetOrg returned version %d after UpdateOrg returned %d", o.EclaVersion, floor)
					return
				}
			}
		})
	}
	for i := 0; i < 200 && !t.Failed(); i++ {
		o, err := s.UpdateOrg(ctx, "acme", func(o *store.Org) error { o.EclaVersion++; return nil })
		if err != nil {
			t.Fatalf("UpdateOrg: %v", err)
		}
		done.Store(int64(o.EclaVersion))
	}
	close(stop)
	wg.Wait()
}

// testTestClock: the test clock's offset starts at 0, only grows, adds up
// under concurrent advances (from two stores where the database is
// Shared), and survives reopening.
func testTestClock(t *testing.T, open Opener) {
	ctx := t.Context()
	s, stop := openRestartable(t, open)
	read := func(s store.Store, what string, want time.Duration) {
		t.Helper()
		if got, err := s.TestClockOffset(ctx); err != nil || got != want {
			t.Fatalf("%s: TestClockOffset = %v, %v; want %v", what, got, err, want)
		}
	}
	move := func(s store.Store, add, atLeast, want time.Duration) {
		t.Helper()
		if got, err := s.MoveTestClock(ctx, add, atLeast); err != nil || got != want {
			t.Fatalf("MoveTestClock(%v, %v) = %v, %v; want %v", add, atLeast, got, err, want)
		}
	}
	read(s, "new database", 0)
	move(s, time.Hour, 0, time.Hour)
	move(s, 0, 30*time.Minute, time.Hour) // never backward
	move(s, 0, 3*time.Hour, 3*time.Hour)
	move(s, time.Hour, 2*time.Hour, 4*time.Hour)
	if _, err := s.MoveTestClock(ctx, -time.Hour, 0); err == nil {
		t.Error("MoveTestClock accepted a negative add")
	}
	read(s, "after moves", 4*time.Hour)

	others := []store.Store{s}
	if s2, err := open(ctx); err == nil { // Shared; an Exclusive open fails while s is open
		closeAtEnd(t, s2)
		others = append(others, s2)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := others[i%len(others)].MoveTestClock(ctx, time.Second, 0); err != nil {
				t.Errorf("concurrent MoveTestClock: %v", err)
			}
		})
	}
	wg.Wait()
	for _, o := range others {
		read(o, "after 20 concurrent advances", 4*time.Hour+20*time.Second)
	}
	stop()
	s = openStore(t, open)
	read(s, "after reopening", 4*time.Hour+20*time.Second)
}

// testPruneAuthCodes: a prune deletes every code expired at now, of any
// client, and all but the newest keep codes of its client, whose other
// codes and the other clients' live codes stay.
func testPruneAuthCodes(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	save := func(hash, client string, expires time.Time) {
		t.Helper()
		c := authCode(hash, expires)
		c.ClientID = client
		if err := s.SaveAuthCode(ctx, c); err != nil {
			t.Fatalf("SaveAuthCode %s: %v", hash, err)
		}
	}
	for i := range 5 { // a1 is the oldest, a5 the newest
		save(fmt.Sprintf("a%d", i+1), "client-a", t0.Add(time.Duration(i+1)*time.Minute))
	}
	save("b-live", "client-b", t0.Add(time.Minute))
	save("b-expired", "client-b", t0)                 // expired at t0: ExpiresAt is not after now
	save("a-expired", "client-a", t0.Add(-time.Hour)) // expired, and the oldest of client-a
	if err := s.PruneAuthCodes(ctx, "client-a", t0, 2); err != nil {
		t.Fatalf("PruneAuthCodes: %v", err)
	}
	// An earlier clock shows whether a row is still there, expired or not.
	early := t0.Add(-2 * time.Hour)
	for _, gone := range []string{"a1", "a2", "a3", "a-expired", "b-expired"} {
		_, err := s.TakeAuthCode(ctx, gone, early)
		wantErr(t, "TakeAuthCode "+gone+" after the prune", err, store.ErrNotFound)
	}
	for _, kept := range []string{"a4", "a5", "b-live"} {
		if _, err := s.TakeAuthCode(ctx, kept, early); err != nil {
			t.Errorf("TakeAuthCode %s after the prune: %v, want it kept", kept, err)
		}
	}
	// keep 0 (and below) deletes all of the client's codes.
	save("a6", "client-a", t0.Add(time.Hour))
	save("b2", "client-b", t0.Add(time.Hour))
	if err := s.PruneAuthCodes(ctx, "client-a", t0, -1); err != nil {
		t.Fatalf("PruneAuthCodes keep -1: %v", err)
	}
	_, err := s.TakeAuthCode(ctx, "a6", early)
	wantErr(t, "TakeAuthCode a6 after keep -1", err, store.ErrNotFound)
	if _, err := s.TakeAuthCode(ctx, "b2", early); err != nil {
		t.Errorf("TakeAuthCode b2: %v, want another client's code kept", err)
	}
}

// testCorpusRecord: a new database records no corpus; of first records
// made at once (from two stores where the database is Shared) exactly one
// is kept and the others are ErrConflict; RecordCorpus replaces the
// record, which every store then reads, and which survives reopening.
func testCorpusRecord(t *testing.T, open Opener) {
	ctx := t.Context()
	s, stop := openRestartable(t, open)
	read := func(s store.Store, what string, want store.CorpusRecord) {
		t.Helper()
		got, err := s.Corpus(ctx)
		if err != nil {
			t.Fatalf("%s: Corpus: %v", what, err)
		}
		equal(t, what, got, &want)
	}
	_, err := s.Corpus(ctx)
	wantErr(t, "Corpus on a new database", err, store.ErrNotFound)

	stores := []store.Store{s}
	if s2, err := open(ctx); err == nil { // Shared; an Exclusive open fails while s is open
		closeAtEnd(t, s2)
		stores = append(stores, s2)
	}
	first := func(i int) store.CorpusRecord {
		return store.CorpusRecord{Dir: fmt.Sprintf("/srv/corpus-%d", i), ContentVersion: fmt.Sprintf("2026-01-%02d+%04x", i+1, i),
			LoadedAt: t0.Add(time.Duration(i) * time.Second)}
	}
	var (
		wg     sync.WaitGroup
		winner atomic.Int64
		wins   atomic.Int64
	)
	for i := range 8 {
		wg.Go(func() {
			err := stores[i%len(stores)].RecordFirstCorpus(ctx, first(i))
			switch {
			case err == nil:
				wins.Add(1)
				winner.Store(int64(i))
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("concurrent RecordFirstCorpus: %v, want nil or ErrConflict", err)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d of 8 concurrent first records were kept, want 1", n)
	}
	kept := first(int(winner.Load()))
	for _, o := range stores {
		read(o, "after the first records", kept)
	}

	next := store.CorpusRecord{Dir: "relative/corpus-next", ContentVersion: "2026-02-01+beef", LoadedAt: t0.Add(time.Hour).In(zone)}
	if err := s.RecordCorpus(ctx, next); err != nil {
		t.Fatalf("RecordCorpus: %v", err)
	}
	for _, o := range stores {
		read(o, "after RecordCorpus", next)
	}
	wantErr(t, "RecordFirstCorpus over a record", s.RecordFirstCorpus(ctx, first(9)), store.ErrConflict)
	read(s, "after a refused first record", next)
	stop()
	s = openStore(t, open)
	read(s, "after reopening", next)
}

// testCorpusVersionPin: the first digest pinned to a version is the one
// every later pin returns, from any store of the database, concurrent
// pins agree on one, other versions are apart, and pins survive
// reopening.
func testCorpusVersionPin(t *testing.T, open Opener) {
	ctx := t.Context()
	s, stop := openRestartable(t, open)
	stores := []store.Store{s}
	if s2, err := open(ctx); err == nil { // Shared
		closeAtEnd(t, s2)
		stores = append(stores, s2)
	}
	const v = "2026-03-01+0a0b"
	pinned := make([]string, 8)
	var wg sync.WaitGroup
	for i := range pinned {
		wg.Go(func() {
			got, err := stores[i%len(stores)].PinCorpusVersion(ctx, v, fmt.Sprintf("digest-%d", i), []byte{byte(i)}, t0)
			if err != nil {
				t.Errorf("concurrent PinCorpusVersion: %v", err)
			}
			pinned[i] = got
		})
	}
	wg.Wait()
	first := pinned[0]
	if !strings.HasPrefix(first, "digest-") {
		t.Fatalf("PinCorpusVersion answered %q, want one of the pinned digests", first)
	}
	for i, got := range pinned {
		if got != first {
			t.Fatalf("pin %d answered %q, pin 0 %q: concurrent pins of one version disagree", i, got, first)
		}
	}
	if got, err := s.PinCorpusVersion(ctx, "2026-03-02+0c0d", "other", nil, t0); err != nil || got != "other" {
		t.Fatalf("pin of another version: %q, %v; want its own digest", got, err)
	}
	// The first pin's parts are the version's, from every store.
	want := []byte{first[len(first)-1] - '0'}
	for _, o := range stores {
		if parts, err := o.CorpusVersionParts(ctx, v); err != nil || !bytes.Equal(parts, want) {
			t.Fatalf("parts of %s: %v, %v; want the first pin's %v", v, parts, err, want)
		}
	}
	_, err := s.CorpusVersionParts(ctx, "2026-03-02+0c0d")
	wantErr(t, "parts of a version pinned without", err, store.ErrNotFound)
	_, err = s.CorpusVersionParts(ctx, "2026-03-03+0e0f")
	wantErr(t, "parts of a version never pinned", err, store.ErrNotFound)
	stop()
	s = openStore(t, open)
	if got, err := s.PinCorpusVersion(ctx, v, "changed", []byte("changed"), t0.Add(time.Hour)); err != nil || got != first {
		t.Fatalf("pin after reopening: %q, %v; want the first pinned %q", got, err, first)
	}
	if parts, err := s.CorpusVersionParts(ctx, v); err != nil || !bytes.Equal(parts, want) {
		t.Fatalf("parts after a refused pin: %v, %v; want %v", parts, err, want)
	}
}

// testCorpusVersionHistory: the parts of the versions past the feed's
// history (older than store.KeepVersionsFor and not among the
// store.KeepVersions last) are dropped by a later pin; a version pinned
// again with its digest gets its parts back.
func testCorpusVersionHistory(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	version := func(i int) string { return fmt.Sprintf("2026-04-%02d+%04x", 1+i%28, i) }
	pin := func(i int, at time.Time) {
		t.Helper()
		if _, err := s.PinCorpusVersion(ctx, version(i), fmt.Sprint("digest-", i), []byte{byte(i)}, at); err != nil {
			t.Fatalf("pin %d: %v", i, err)
		}
	}
	old := t0.Add(-store.KeepVersionsFor - time.Hour)
	const n = store.KeepVersions + 5
	for i := range n { // recorded long ago, a second apart
		pin(i, old.Add(time.Duration(i)*time.Second))
	}
	has := func(i int) bool {
		_, err := s.CorpusVersionParts(ctx, version(i))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	// The pins above ran at their own times: nothing was older than the
	// history then, past the last KeepVersions.
	pin(n, t0) // now: the n old ones are past 90 days; the last 20 pinned stay
	for i := range n + 1 {
		if want := i > n-store.KeepVersions; has(i) != want {
			t.Errorf("version %d of %d: parts kept %v, want %v", i, n, has(i), want)
		}
	}
	// Pinned again with its digest: the parts come back.
	if _, err := s.PinCorpusVersion(ctx, version(0), "digest-0", []byte{0}, t0); err != nil || !has(0) {
		t.Errorf("version 0 pinned again: %v, parts %v", err, has(0))
	}
}

// testCorpusAnnounced: a record is not announced until marked for its
// LoadedAt; a new record keeps the last announcement, which is then not
// its own; a mark for a record that moved on changes nothing.
func testCorpusAnnounced(t *testing.T, open Opener) {
	ctx := t.Context()
	s := openStore(t, open)
	first := store.CorpusRecord{Dir: "/srv/c1", ContentVersion: "2026-05-01+aa", LoadedAt: t0}
	if err := s.RecordFirstCorpus(ctx, first); err != nil {
		t.Fatal(err)
	}
	read := func() *store.CorpusRecord {
		t.Helper()
		c, err := s.Corpus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := read(); c.Announced != "" || !c.AnnouncedFor.IsZero() {
		t.Fatalf("a new record reads announced: %+v", c)
	}
	if err := s.MarkCorpusAnnounced(ctx, t0, first.ContentVersion); err != nil {
		t.Fatal(err)
	}
	if c := read(); c.Announced != first.ContentVersion || !c.AnnouncedFor.Equal(c.LoadedAt) {
		t.Fatalf("after the mark: %+v", c)
	}
	next := store.CorpusRecord{Dir: "/srv/c2", ContentVersion: "2026-05-02+bb", LoadedAt: t0.Add(time.Minute)}
	if err := s.RecordCorpus(ctx, next); err != nil {
		t.Fatal(err)
	}
	c := read()
	if c.Announced != first.ContentVersion || c.AnnouncedFor.Equal(c.LoadedAt) {
		t.Fatalf("a new record: %+v, want the last announcement kept and not its own", c)
	}
	if err := s.MarkCorpusAnnounced(ctx, t0, "2026-05-09+ff"); err != nil { // the record moved on
		t.Fatal(err)
	}
	if c := read(); c.Announced != first.ContentVersion {
		t.Fatalf("a mark for a record that moved on changed it: %+v", c)
	}
	if err := s.MarkCorpusAnnounced(ctx, c.LoadedAt, next.ContentVersion); err != nil {
		t.Fatal(err)
	}
	if c := read(); c.Announced != next.ContentVersion || !c.AnnouncedFor.Equal(c.LoadedAt) {
		t.Fatalf("after the second mark: %+v", c)
	}
}
