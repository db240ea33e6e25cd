package server

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/changes"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/scope"
)

// changesAnswer is a page of GET /v1/changes.
type changesAnswer struct {
	Items []struct {
		LessonID, Subject, Change string
		ContentDigest             *string
	}
	Subjects []struct {
		Subject, Change      string
		ContentDigest        *string
		ClassCount           int
		SubjectFieldsChanged bool
	}
	From, To, Next string
	NextCursor     *string
	Total          int
}

// editedContent is the small corpus with the title of class classNum of
// subject ref revised, under another contentVersion.
func editedContent(t *testing.T, ref string, classNum int) *Content {
	t.Helper()
	dir := t.TempDir()
	if _, err := gen.Write(dir, gen.Options{Seed: 1, Small: true, Date: "2026-12-01"}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "lessons", filepath.FromSlash(ref)+".json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	c := doc["classes"].([]any)[classNum-1].(map[string]any)
	c["title"] = c["title"].(string) + " (revised)"
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return loadContent(t, dir)
}

// pin records ct's version in the database, as the origin serving it
// first does (origin/corpus/follow).
func (h *harness) pin(ct *Content) {
	h.t.Helper()
	if _, err := h.store.PinCorpusVersion(context.Background(), ct.ContentVersion, ct.ContentDigest, ct.Parts.Encode(), time.Now()); err != nil {
		h.t.Fatal(err)
	}
}

// changesFrom walks every page of the feed from since and returns the
// first page with every page's items.
func (h *harness) changesFrom(tok, since string, limit int) changesAnswer {
	h.t.Helper()
	q := url.Values{"since": {since}, "limit": {strconv.Itoa(limit)}}
	var all changesAnswer
	for page := 0; ; page++ {
		r := h.get("/v1/changes?"+q.Encode(), tok)
		if r.status != 200 {
			h.t.Fatalf("GET /v1/changes?%s: %d %s", q.Encode(), r.status, r.body)
		}
		if got := r.header.Get("Cache-Control"); got != "no-store" {
			h.t.Errorf("Cache-Control %q, want no-store", got)
		}
		var a changesAnswer
		if err := json.Unmarshal(r.body, &a); err != nil {
			h.t.Fatal(err)
		}
		if page == 0 {
			all = a
		} else {
			if len(a.Subjects) != 0 {
				h.t.Errorf("page %d lists subjects: %+v", page+1, a.Subjects)
			}
			all.Items = append(all.Items, a.Items...)
		}
		if a.NextCursor == nil {
			all.Next = a.Next
			return all
		}
		q.Set("cursor", *a.NextCursor)
	}
}

// Issue #37, point 1: the feed answers the granted lessons changed between
// two versions, by lessonId with the subject's new digest, free; a grant's
// change through its next token as additions and removals, paginated; a
// since it does not hold is 410 CHANGES_EXPIRED, free.
func TestChangeFeed(t *testing.T) {
	v1 := smallContent(t, "")
	h := newHarnessWith(t, v1)
	h.pin(v1)
	h.createOrg("org", []string{"high"}, nil)
	tok := h.token("org", scope.ContentRead)
	h.createOrg("other", []string{"high"}, nil)
	otherTok := h.token("other", scope.ContentRead)

	v2 := editedContent(t, "high/algebra", 3)
	h.pin(v2)
	h.content.Store(v2)
	before := h.usage("org")

	a := h.changesFrom(tok, v1.ContentVersion, 500)
	if a.From != v1.ContentVersion || a.To != v2.ContentVersion {
		t.Errorf("from %s to %s, want %s to %s", a.From, a.To, v1.ContentVersion, v2.ContentVersion)
	}
	digest := v2.Subject("high", "algebra").ContentDigest
	if len(a.Subjects) != 1 || a.Subjects[0].Subject != "high/algebra" || a.Subjects[0].Change != "changed" ||
		a.Subjects[0].ContentDigest == nil || *a.Subjects[0].ContentDigest != digest || a.Subjects[0].SubjectFieldsChanged {
		t.Fatalf("subjects %+v, want high/algebra changed to %s", a.Subjects, digest)
	}
	if len(a.Items) != 1 || a.Items[0].LessonID != "high/algebra/3" || a.Items[0].Change != "changed" || *a.Items[0].ContentDigest != digest {
		t.Fatalf("lessons %+v, want high/algebra/3 changed", a.Items)
	}
	h.billed("org", before, 0, 0)

	// Nothing moved since next.
	if b := h.changesFrom(tok, a.Next, 500); len(b.Items) != 0 || len(b.Subjects) != 0 {
		t.Errorf("from next: %+v, want nothing", b)
	}

	// A tier granted: its subjects and every lesson, added, a page at a
	// time; then taken back: removed.
	if _, err := h.store.UpdateOrg(context.Background(), "org", func(o *store.Org) error {
		o.Grants = []string{"high", "middle"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	classes := 0
	for _, s := range v2.Subjects {
		if s.Tier == "middle" {
			classes += len(s.Lessons)
		}
	}
	c := h.changesFrom(tok, a.Next, 3)
	if len(c.Items) != classes || c.Total != classes || len(c.Subjects) == 0 {
		t.Fatalf("middle granted: %d lessons (total %d), %d subjects; want %d lessons", len(c.Items), c.Total, len(c.Subjects), classes)
	}
	for _, it := range c.Items {
		if !strings.HasPrefix(it.LessonID, "middle/") || it.Change != "added" {
			t.Fatalf("middle granted: %+v", it)
		}
	}
	if _, err := h.store.UpdateOrg(context.Background(), "org", func(o *store.Org) error {
		o.Grants = []string{"high"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d := h.changesFrom(tok, c.Next, 500)
	if len(d.Items) != classes || d.Items[0].Change != "removed" || d.Items[0].ContentDigest != nil {
		t.Fatalf("middle taken back: %d lessons, first %+v; want %d removed", len(d.Items), d.Items[0], classes)
	}
	// A bare version takes the grants as they are now: nothing of middle.
	if e := h.changesFrom(tok, v1.ContentVersion, 500); len(e.Items) != 1 {
		t.Errorf("from the bare version: %d lessons, want 1", len(e.Items))
	}

	before = h.usage("org")
	h.fails("/v1/changes?since=2020-01-01%2Bdead", tok, 410, "CHANGES_EXPIRED")
	h.fails("/v1/changes?since=yesterday", tok, 400, "BAD_REQUEST")
	h.fails("/v1/changes?since="+url.QueryEscape(a.Next), otherTok, 410, "CHANGES_EXPIRED") // another organisation's token
	rotated := changes.Seal([]byte("a secret this deployment no longer holds"), "org", v2.ContentVersion, []string{"high"})
	h.fails("/v1/changes?since="+url.QueryEscape(rotated), tok, 410, "CHANGES_EXPIRED")
	h.fails("/v1/changes", tok, 400, "BAD_REQUEST")
	h.billed("org", before, 0, 0)
}

// An origin that has not followed the deployment's corpus record yet
// answers nothing changed and gives the caller's since back: a since from
// an origin that did follow (newer than what this one serves) is never
// answered backwards.
func TestChangeFeedOnALaggingOrigin(t *testing.T) {
	v1 := smallContent(t, "")
	h := newHarnessWith(t, v1)
	h.pin(v1)
	h.createOrg("org", []string{"high"}, nil)
	tok := h.token("org", scope.ContentRead)
	v2 := editedContent(t, "high/algebra", 3)
	h.pin(v2)
	ctx := context.Background()
	// The deployment moved to v2; this origin still serves v1.
	if err := h.store.RecordCorpus(ctx, store.CorpusRecord{Dir: "/elsewhere", ContentVersion: v2.ContentVersion, LoadedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	since := changes.Seal(h.srv.cfg.ChangesKey, "org", v2.ContentVersion, []string{"high"}) // a next from an origin on v2
	a := h.changesFrom(tok, since, 500)
	if len(a.Items) != 0 || len(a.Subjects) != 0 || a.Next != since || a.To != v2.ContentVersion {
		t.Fatalf("on a lagging origin: %+v, want nothing changed and the since back", a)
	}
	// Once it follows, the feed answers again.
	h.content.Store(v2)
	time.Sleep(recordTTL)
	if b := h.changesFrom(tok, v1.ContentVersion, 500); len(b.Items) != 1 {
		t.Fatalf("after following: %d lessons, want 1", len(b.Items))
	}
}
