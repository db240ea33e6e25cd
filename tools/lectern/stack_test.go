package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/tools/lectern/internal/lecterntest"
)

// testStack is the test kit's stack (lecterntest) with the sync tests'
// helpers.
type testStack struct {
	*lecterntest.Stack
	t        *testing.T
	versions int // corpus versions made by editCorpus
}

const testOrg = lecterntest.Org

func newTestStack(t *testing.T, mod func(*store.Org)) *testStack {
	t.Helper()
	return &testStack{Stack: lecterntest.Start(t, mod), t: t}
}

// rebuild changes one class title of subject tier/slug in the corpus,
// gives the corpus a new contentVersion, and serves it.
func (s *testStack) rebuild(tier, slug string) {
	s.t.Helper()
	p := filepath.Join(s.Corpus, "lessons", tier, slug+".json")
	b, err := os.ReadFile(p)
	if err != nil {
		s.t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		s.t.Fatal(err)
	}
	classes := doc["classes"].([]any)
	classes[0].(map[string]any)["title"] = classes[0].(map[string]any)["title"].(string) + " (revised)"
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		s.t.Fatal(err)
	}
	mp := filepath.Join(s.Corpus, "corpus.json")
	mb, _ := os.ReadFile(mp)
	old := s.Content.Load().ContentVersion
	mb = []byte(strings.Replace(string(mb), old, "2026-11-02+"+strings.Repeat("a", 12), 1))
	if err := os.WriteFile(mp, mb, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.Load()
	if s.Content.Load().ContentVersion == old {
		s.t.Fatal("the rebuild kept the contentVersion")
	}
}

// env is the command's environment against the stack.
func (s *testStack) env() func(string) string {
	return func(k string) string {
		return map[string]string{"LECTERN_URL": s.URL, "LECTERN_CLIENT_ID": s.ClientID, "LECTERN_CLIENT_SECRET": s.Secret}[k]
	}
}

// usage is the organisation's meters now.
func (s *testStack) usage() meter.Usage {
	s.t.Helper()
	o, err := s.Store.GetOrg(context.Background(), testOrg)
	if err != nil {
		s.t.Fatal(err)
	}
	u, err := s.Meters.Usage(context.Background(), meter.Key(o), time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	return u
}

// exports is the number of exports in the organisation's ledger.
func (s *testStack) exports() int {
	s.t.Helper()
	o, _ := s.Store.GetOrg(context.Background(), testOrg)
	rows, err := s.Meters.Ledger(context.Background(), meter.Key(o), 0, 1000)
	if err != nil {
		s.t.Fatal(err)
	}
	n := 0
	for _, r := range rows {
		if r.Kind == meter.KindExport {
			n++
		}
	}
	return n
}

// exportsBySubject counts the organisation's exports by subject.
func (s *testStack) exportsBySubject() map[string]int {
	s.t.Helper()
	o, _ := s.Store.GetOrg(context.Background(), testOrg)
	rows, err := s.Meters.Ledger(context.Background(), meter.Key(o), 0, 1000)
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		if r.Kind == meter.KindExport {
			out[r.Target]++
		}
	}
	return out
}

// update changes the organisation.
func (s *testStack) update(mod func(*store.Org)) {
	s.t.Helper()
	if _, err := s.Store.UpdateOrg(context.Background(), testOrg, func(o *store.Org) error { mod(o); return nil }); err != nil {
		s.t.Fatal(err)
	}
}

// subjects are the subjects of the corpus served, as tier/slug.
func (s *testStack) subjects() []string {
	var out []string
	for _, sub := range s.Content.Load().Subjects {
		out = append(out, sub.Ref())
	}
	slices.Sort(out)
	return out
}
