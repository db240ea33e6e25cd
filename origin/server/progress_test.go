package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	shid "github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/scope"
)

// progressRow is an item of GET /v1/progress.
type progressRow struct {
	LessonID        string   `json:"lessonId"`
	Tier            string   `json:"tier"`
	SubjectSlug     string   `json:"subjectSlug"`
	ClassNum        int      `json:"classNum"`
	Score           *float64 `json:"score"`
	BestScore       *float64 `json:"bestScore"`
	FirstRecordedAt string   `json:"firstRecordedAt"`
	LastRecordedAt  string   `json:"lastRecordedAt"`
}

type streakRow struct {
	Current int64   `json:"current"`
	Longest int64   `json:"longest"`
	LastDay *string `json:"lastDay"`
}

// progressPage is GET /v1/progress's body.
type progressPage struct {
	pageOf[progressRow]
	LearnerID string    `json:"learnerId"`
	XP        int64     `json:"xp"`
	Streak    streakRow `json:"streak"`
}

// ackBody is the PUT's 200 body.
type ackBody struct {
	LessonID  string    `json:"lessonId"`
	Score     *float64  `json:"score"`
	BestScore *float64  `json:"bestScore"`
	XP        int64     `json:"xp"`
	Streak    streakRow `json:"streak"`
}

// strictDecode decodes b into v, refusing unknown members.
func strictDecode(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// put records lesson for tok's learner with body.
func (h *harness) put(tok, lesson, body string) resp {
	h.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	return h.do("PUT", "/v1/progress/"+lesson, tok, b)
}

// ack wants the PUT's 200 and decodes it.
func (h *harness) ack(tok, lesson, body string) ackBody {
	h.t.Helper()
	r := h.put(tok, lesson, body)
	wantStatus(h.t, r, 200)
	var a ackBody
	strictDecode(h.t, r.body, &a)
	return a
}

// progressOf wants GET path's 200 and decodes it.
func (h *harness) progressOf(path, tok string) (progressPage, resp) {
	h.t.Helper()
	r := h.get(path, tok)
	wantStatus(h.t, r, 200)
	var p progressPage
	strictDecode(h.t, r.body, &p)
	return p, r
}

// record reads the learner's record from the store.
func (h *harness) record(orgID, learner string) progress.Record {
	h.t.Helper()
	rec, err := h.progress.Progress(context.Background(), orgID, learner)
	if err != nil {
		h.t.Fatal(err)
	}
	return rec
}

// lessonsOf returns n lesson ids of the corpus, each of another subject
// where the corpus allows.
func lessonsOf(c *corpus.Corpus, n int) []string {
	var ids []string
	for _, l := range c.Lessons {
		if len(ids) == n {
			break
		}
		ids = append(ids, l.ID)
	}
	return ids
}

func ptr(f float64) *float64 { return &f }

func sameFloat(a, b *float64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

var progressScopes = []string{scope.ProgressRead, scope.ProgressWrite}

// A client_credentials token gets LEARNER_REQUIRED on both routes, free;
// a learner token without the route's scope gets insufficient_scope.
func TestProgressLearnerRequired(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	machine := h.scopedOrg("m", nil, scope.All...)
	lesson := h.corpus().Lessons[0].ID
	before := h.usage("m")
	h.fails("/v1/progress", machine, 403, "LEARNER_REQUIRED")
	h.put(machine, lesson, `{"score":50}`).wantError(t, 403, "LEARNER_REQUIRED")
	h.billed("m", before, 0, 0)

	reader := h.learnerToken("m", "ana", scope.ProgressRead)
	writer := h.learnerToken("m", "ana", scope.ProgressWrite)
	if e := h.put(reader, lesson, `{"score":50}`).wantError(t, 403, "insufficient_scope"); e.Scope != scope.Full(scope.ProgressWrite) {
		t.Errorf("PUT: scope %q, want %q", e.Scope, scope.Full(scope.ProgressWrite))
	}
	if e := h.fails("/v1/progress", writer, 403, "insufficient_scope"); e.Scope != scope.Full(scope.ProgressRead) {
		t.Errorf("GET: scope %q, want %q", e.Scope, scope.Full(scope.ProgressRead))
	}
	h.billed("m", before, 0, 0)
	if rec := h.record("m", "ana"); rec.Version != 0 {
		t.Errorf("refused writes saved version %d", rec.Version)
	}
}

// A bad body is a free 400 before the gate, naming its member, and saves
// nothing; a learnerId naming the token's learner is accepted.
func TestProgressBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createOrg("b", slices.Clone(shid.Tiers), nil)
	tok := h.learnerToken("b", "ana", progressScopes...)
	lesson := h.corpus().Lessons[0].ID
	before := h.usage("b")
	for _, tt := range []struct{ body, param string }{
		{`not json`, "body"},
		{`[1]`, "body"},
		{`{"done":true}`, "done"},
		{`{"score":50,"score":60}`, "score"},
		{`{"score":-1}`, "score"},
		{`{"score":100.5}`, "score"},
		{`{"score":"90"}`, "score"},
		{`{"score":null}`, "score"},
		// Tokens fastjson reads as numbers but JSON has none of: the
		// same free 400, never a 500 from the store refusing NaN.
		{`{"score":NaN}`, "score"},
		{`{"score":nan}`, "score"},
		{`{"score":-NaN}`, "score"},
		{`{"score":inf}`, "score"},
		{`{"score":-Inf}`, "score"},
		{`{"score":Infinity}`, "body"},
		{`{"score":-Infinity}`, "body"},
		{`{"score":+50}`, "score"},
		{`{"score":050}`, "score"},
		{`{"score":.5}`, "score"},
		{`{"score":5.}`, "score"},
		{`{"learnerId":""}`, "learnerId"},
		{`{"learnerId":7}`, "learnerId"},
		{`{"learnerId":"` + strings.Repeat("a", 129) + `"}`, "learnerId"},
		{`{"learnerId":"bob"}`, "learnerId"},
		{`{"score":10,"learnerId":"ANA"}`, "learnerId"},
	} {
		r := h.put(tok, lesson, tt.body)
		e := r.errorBody(t)
		if r.status != 400 || e.Code != "BAD_REQUEST" || e.Parameter != tt.param {
			t.Errorf("%s: got %d %s naming %q, want 400 BAD_REQUEST naming %s", tt.body, r.status, e.Code, e.Parameter, tt.param)
		}
	}
	// The body is refused before the gate: a bad body of a suspended
	// organisation is the 400, not the 403.
	if _, err := h.store.UpdateOrg(context.Background(), "b", func(o *store.Org) error { o.Status = "suspended"; return nil }); err != nil {
		t.Fatal(err)
	}
	h.put(tok, lesson, `{"learnerId":"bob"}`).wantError(t, 400, "BAD_REQUEST")
	h.put(tok, lesson, `{}`).wantError(t, 403, "ORG_SUSPENDED")
	if _, err := h.store.UpdateOrg(context.Background(), "b", func(o *store.Org) error { o.Status = "active"; return nil }); err != nil {
		t.Fatal(err)
	}
	h.billed("b", before, 0, 0)
	if rec := h.record("b", "ana"); rec.Version != 0 || len(rec.Classes) != 0 {
		t.Fatalf("refused bodies saved: %+v", rec)
	}
	// Accepted: the learner's own id, an empty body, an empty object.
	if a := h.ack(tok, lesson, `{"score":70,"learnerId":"ana"}`); !sameFloat(a.Score, ptr(70)) {
		t.Errorf("score %v, want 70", a.Score)
	}
	h.ack(tok, h.corpus().Lessons[1].ID, ``)
	h.ack(tok, h.corpus().Lessons[2].ID, `{}`)
	h.billed("b", before, 3, 0)
}

// After the gate: BAD_LESSON_ID bills the call, the entitlement refuses
// free, LESSON_NOT_FOUND bills the call and no lesson read; no route feeds
// the enumeration alarm.
func TestProgressRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.corpus()
	l := c.Lessons[0]
	sub := l.Subject
	var other *corpus.Subject // a subject of another tier
	for _, s := range c.Subjects {
		if s.Tier != sub.Tier {
			other = s
			break
		}
	}
	h.createOrg("r", []string{sub.Ref()}, nil)
	tok := h.learnerToken("r", "ana", progressScopes...)
	before := h.usage("r")
	h.put(tok, "nope/"+sub.Slug+"/1", `{}`).wantError(t, 400, "BAD_LESSON_ID")
	before = h.billed("r", before, 1, 0)
	h.put(tok, other.Tier+"/"+other.Slug+"/1", `{}`).wantError(t, 403, "TIER_NOT_LICENSED")
	before = h.billed("r", before, 0, 0)
	h.put(tok, fmt.Sprintf("%s/%s/%d", sub.Tier, sub.Slug, len(sub.Lessons)+1), `{}`).wantError(t, 404, "LESSON_NOT_FOUND")
	before = h.billed("r", before, 1, 0)
	h.ack(tok, l.ID, `{"score":90}`)
	h.progressOf("/v1/progress", tok)
	u := h.billed("r", before, 2, 0)
	if u.distinct != 0 {
		t.Errorf("the enumeration alarm saw %d lessons", u.distinct)
	}
	if rec := h.record("r", "ana"); len(rec.Classes) != 1 {
		t.Errorf("recorded %d classes, want 1", len(rec.Classes))
	}
	h.fails("/v1/progress?learner=bob", tok, 400, "BAD_REQUEST")
	h.billed("r", u, 0, 0)
}

// The PUT's answer and the GET's, their headers, the 304s and the ETag's
// moves: only with a saved write, never with a retried PUT.
func TestProgressWriteAndRead(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createOrg("w", slices.Clone(shid.Tiers), nil)
	tok := h.learnerToken("w", "ana", progressScopes...)
	ids := lessonsOf(h.corpus(), 2)
	cv := h.content.Load().ContentVersion

	p, r := h.progressOf("/v1/progress", tok)
	if p.Total != 0 || len(p.Items) != 0 || p.XP != 0 || p.Streak.Current != 0 || p.Streak.LastDay != nil || p.LearnerID != "ana" {
		t.Errorf("empty record: %s", r.body)
	}
	empty := r.header.Get("ETag")

	w := h.do("PUT", "/v1/progress/"+ids[0], tok, []byte(`{"score":87.5}`), "Accept-Encoding", "gzip, br")
	wantStatus(t, w, 200)
	if len(w.body) >= 384 || w.header.Get("Content-Encoding") != "" || w.header.Get("ETag") != "" ||
		w.header.Get("X-Service-Content-Version") != cv || w.header.Get("Cache-Control") != "private" {
		t.Errorf("PUT answer: %d bytes, headers %v", len(w.body), w.header)
	}
	var a ackBody
	strictDecode(t, w.body, &a)
	today := h.now().UTC().Format("2006-01-02")
	if a.LessonID != ids[0] || !sameFloat(a.Score, ptr(87.5)) || !sameFloat(a.BestScore, ptr(87.5)) || a.XP != 18 ||
		a.Streak.Current != 1 || a.Streak.Longest != 1 || a.Streak.LastDay == nil || *a.Streak.LastDay != today {
		t.Errorf("ack: %s", w.body)
	}
	// A lower score: latest moves, best stays; a write without a score
	// keeps best and clears latest.
	if a := h.ack(tok, ids[0], `{"score":40}`); !sameFloat(a.Score, ptr(40)) || !sameFloat(a.BestScore, ptr(87.5)) || a.XP != 18 {
		t.Errorf("lower score: %+v", a)
	}
	if a := h.ack(tok, ids[1], ``); a.Score != nil || a.BestScore != nil || a.XP != 28 {
		t.Errorf("no score: %+v", a)
	}

	p, r = h.progressOf("/v1/progress", tok)
	tag := r.header.Get("ETag")
	if tag == "" || tag == empty || r.header.Get("X-Service-Content-Version") != cv || p.ContentVersion != cv || p.License == nil {
		t.Errorf("GET headers %v, body %s", r.header, r.body)
	}
	if p.Total != 2 || len(p.Items) != 2 || p.XP != 28 || p.HasMore || p.NextCursor != nil {
		t.Fatalf("GET: %s", r.body)
	}
	it := p.Items[0]
	if it.LessonID != ids[0] || !sameFloat(it.Score, ptr(40)) || !sameFloat(it.BestScore, ptr(87.5)) ||
		it.Tier+"/"+it.SubjectSlug+"/"+fmt.Sprint(it.ClassNum) != ids[0] {
		t.Errorf("item: %+v", it)
	}
	for _, ts := range []string{it.FirstRecordedAt, it.LastRecordedAt} {
		if at, err := time.Parse(time.RFC3339, ts); err != nil || !strings.HasSuffix(ts, "Z") || at.After(time.Now().Add(time.Minute)) {
			t.Errorf("timestamp %q: %v", ts, err)
		}
	}

	// 304 on the tag and on *, one call each, no body.
	before := h.usage("w")
	for _, inm := range []string{tag, "*", `W/"0000000000000000", ` + tag} {
		nm := h.get("/v1/progress", tok, "If-None-Match", inm)
		if nm.status != 304 || len(nm.body) != 0 || nm.header.Get("ETag") != tag || nm.header.Get("X-Service-Content-Version") != cv {
			t.Errorf("If-None-Match %s: %d %v", inm, nm.status, nm.header)
		}
	}
	before = h.billed("w", before, 3, 0)
	// A retried PUT (same body, same day) saves nothing: the version and
	// the tag stay; it bills its call.
	version := h.record("w", "ana").Version
	h.ack(tok, ids[0], `{"score":40}`)
	h.ack(tok, ids[1], `{}`)
	if v := h.record("w", "ana").Version; v != version {
		t.Errorf("a retried PUT moved the version %d → %d", version, v)
	}
	if nm := h.get("/v1/progress", tok, "If-None-Match", tag); nm.status != 304 {
		t.Errorf("after a retried PUT: %d, want 304", nm.status)
	}
	h.billed("w", before, 3, 0)
	// The next saved write moves the tag: 200.
	h.ack(tok, ids[0], `{"score":41}`)
	if r := h.get("/v1/progress", tok, "If-None-Match", tag); r.status != 200 || r.header.Get("ETag") == tag {
		t.Errorf("after a saved write: %d, ETag %q (was %q)", r.status, r.header.Get("ETag"), tag)
	}
}

// One record per organisation and learner: two learners of one
// organisation, and one learner id in two organisations, never see each
// other's.
func TestProgressIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createOrg("i1", slices.Clone(shid.Tiers), nil)
	h.createOrg("i2", slices.Clone(shid.Tiers), nil)
	ids := lessonsOf(h.corpus(), 3)
	ana1 := h.learnerToken("i1", "ana", progressScopes...)
	bob1 := h.learnerToken("i1", "bob", progressScopes...)
	ana2 := h.learnerToken("i2", "ana", progressScopes...)
	h.ack(ana1, ids[0], `{"score":10}`)
	h.ack(bob1, ids[1], `{"score":20}`)
	h.ack(bob1, ids[2], `{"score":30}`)
	h.ack(ana2, ids[2], `{"score":99}`)
	// bob may not name ana.
	h.put(bob1, ids[0], `{"learnerId":"ana"}`).wantError(t, 400, "BAD_REQUEST")
	for _, tt := range []struct {
		tok, learner string
		want         []string
		xp           int64
	}{
		{ana1, "ana", ids[:1], 11}, {bob1, "bob", ids[1:], 12 + 13}, {ana2, "ana", ids[2:], 19},
	} {
		p, r := h.progressOf("/v1/progress", tt.tok)
		var got []string
		for _, it := range p.Items {
			got = append(got, it.LessonID)
		}
		if p.LearnerID != tt.learner || !slices.Equal(got, tt.want) || p.XP != tt.xp || p.Total != len(tt.want) {
			t.Errorf("%s: %s, want %v, xp %d", tt.learner, r.body, tt.want, tt.xp)
		}
	}
	// A cursor of one learner is not another's.
	h.ack(bob1, ids[0], `{}`)
	p, _ := h.progressOf("/v1/progress?limit=1", bob1)
	if p.NextCursor == nil {
		t.Fatal("no cursor")
	}
	if e := h.get("/v1/progress?limit=1&cursor="+url.QueryEscape(*p.NextCursor), ana1).wantError(t, 400, "BAD_REQUEST"); e.Parameter != "cursor" {
		t.Errorf("another learner's cursor: parameter %q", e.Parameter)
	}
}

// recordingProgress records every saved record by the version it made.
type recordingProgress struct {
	progress.Store
	mu    sync.Mutex
	saved map[int64]progress.Record
}

func (p *recordingProgress) SaveProgress(ctx context.Context, r progress.Record) (int64, error) {
	v, err := p.Store.SaveProgress(ctx, r)
	if err == nil {
		p.mu.Lock()
		p.saved[v] = r.Clone()
		p.mu.Unlock()
	}
	return v, err
}

// 64 concurrent PUTs of one learner over 8 classes: each answers 200 or
// 409 (Retry-After: 1, nothing saved), every one bills its call, and the
// saved versions are exactly the 200s, whose replay in commit order is the
// final record, its XP the sum of its classes'.
func TestProgressConcurrentWriters(t *testing.T) {
	t.Parallel()
	rec := &recordingProgress{saved: map[int64]progress.Record{}}
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{progress: func(s progress.Store) progress.Store {
		rec.Store = s
		return rec
	}})
	h.createOrg("c", slices.Clone(shid.Tiers), nil)
	tok := h.learnerToken("c", "ana", progressScopes...)
	c := h.corpus()
	ids := lessonsOf(c, 8)
	const n = 64
	// Request i writes class i%8 with score i+0.5, which names it.
	answers := make([]resp, n)
	before := h.usage("c")
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = h.put(tok, ids[i%8], fmt.Sprintf(`{"score":%g}`, float64(i)+0.5))
		}()
	}
	close(start)
	wg.Wait()
	h.billed("c", before, n, 0)

	ok := map[int]ackBody{}
	conflicts := 0
	for i, r := range answers {
		switch r.status {
		case 200:
			var a ackBody
			strictDecode(t, r.body, &a)
			ok[i] = a
		case 409:
			r.wantError(t, 409, "WRITE_CONFLICT")
			if r.header.Get("Retry-After") != "1" || !bytes.Contains(r.body, []byte(`"retryAfterSeconds":1`)) {
				t.Errorf("409: Retry-After %q, body %s", r.header.Get("Retry-After"), r.body)
			}
			conflicts++
		default:
			t.Fatalf("PUT %d: %d %s", i, r.status, r.body)
		}
	}
	t.Logf("%d saved, %d conflicts", len(ok), conflicts)
	if len(ok) == 0 {
		t.Fatal("no PUT succeeded")
	}
	if len(rec.saved) != len(ok) {
		t.Fatalf("%d saves for %d answers 200", len(rec.saved), len(ok))
	}
	// Commit order: version v's save differs from v-1's in the one class
	// it wrote, whose score names the request.
	var replay progress.Record
	seen := map[int]bool{}
	for v := int64(1); v <= int64(len(ok)); v++ {
		saved, found := rec.saved[v]
		if !found {
			t.Fatalf("no save made version %d", v)
		}
		var prev progress.Record
		if v > 1 {
			prev = rec.saved[v-1]
		}
		i := -1
		for _, k := range saved.Classes {
			if pk, had := prev.Class(k.Lesson); !had || !sameFloat(pk.Score, k.Score) {
				i = int(math.Floor(*k.Score))
			}
		}
		a, answered := ok[i]
		if i < 0 || !answered || seen[i] {
			t.Fatalf("version %d: request %d (answered 200: %v, seen: %v)", v, i, answered, seen[i])
		}
		seen[i] = true
		lid, err := shid.ParseLesson(ids[i%8])
		if err != nil {
			t.Fatal(err)
		}
		replay.Apply(lid, ptr(float64(i)+0.5), time.Now())
		k, _ := replay.Class(lid)
		if a.XP != replay.XP() || !sameFloat(a.Score, k.Score) || !sameFloat(a.BestScore, k.BestScore) {
			t.Errorf("request %d: answered %+v, replay: xp %d, class %+v", i, a, replay.XP(), k)
		}
	}
	p, _ := h.progressOf("/v1/progress?limit=100", tok)
	var sum int64
	for _, it := range p.Items {
		lid, _ := shid.ParseLesson(it.LessonID)
		k, found := replay.Class(lid)
		if !found || !sameFloat(it.Score, k.Score) || !sameFloat(it.BestScore, k.BestScore) {
			t.Errorf("final %s: score %v best %v, replay %+v", it.LessonID, it.Score, it.BestScore, k)
		}
		sum += 10 + int64(math.Floor(*it.BestScore/10))
	}
	if len(p.Items) != len(replay.Classes) || p.XP != replay.XP() || p.XP != sum {
		t.Errorf("final: %d classes xp %d (items sum %d), replay %d classes xp %d", len(p.Items), p.XP, sum, len(replay.Classes), replay.XP())
	}
}

// The streak counts consecutive UTC days with a saved write, by the
// stack's clock: it holds through the next day, falls to 0 after a
// missed day, and the longest run is kept.
func TestProgressStreak(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	day0 := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
	clock.Store(day0.UnixNano())
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{now: func() time.Time { return time.Unix(0, clock.Load()) }})
	h.createOrg("s", slices.Clone(shid.Tiers), nil)
	tok := h.learnerToken("s", "ana", progressScopes...)
	ids := lessonsOf(h.corpus(), 2)
	at := func(d int, hour int) {
		clock.Store(day0.Add(time.Duration(d)*24*time.Hour + time.Duration(hour-12)*time.Hour).UnixNano())
	}
	dayOf := func(d int) string { return day0.Add(time.Duration(d) * 24 * time.Hour).Format("2006-01-02") }
	want := func(what string, s streakRow, current, longest int64, last int) {
		t.Helper()
		if s.Current != current || s.Longest != longest || s.LastDay == nil || *s.LastDay != dayOf(last) {
			t.Errorf("%s: streak %+v (lastDay %v), want %d/%d ending %s", what, s, s.LastDay, current, longest, dayOf(last))
		}
	}
	want("day 0", h.ack(tok, ids[0], `{"score":10}`).Streak, 1, 1, 0)
	at(0, 23)
	want("day 0 again", h.ack(tok, ids[1], `{"score":10}`).Streak, 1, 1, 0)
	at(1, 0)
	p, r := h.progressOf("/v1/progress", tok)
	want("day 1, nothing yet", p.Streak, 1, 1, 0)
	tag := r.header.Get("ETag")
	want("day 1", h.ack(tok, ids[0], `{"score":20}`).Streak, 2, 2, 1)
	at(2, 1)
	want("day 2", h.ack(tok, ids[0], `{"score":30}`).Streak, 3, 3, 2)
	// A retried PUT on the next day is a saved write: the run grows.
	at(3, 23)
	want("day 3", h.ack(tok, ids[0], `{"score":30}`).Streak, 4, 4, 3)
	at(4, 12)
	p, _ = h.progressOf("/v1/progress", tok)
	want("day 4, nothing yet", p.Streak, 4, 4, 3)
	// Day 4 is missed: on day 5 the run is 0, the longest stays, and
	// the GET's tag moves although nothing was saved.
	at(5, 12)
	p, r = h.progressOf("/v1/progress", tok)
	want("day 5, a day missed", p.Streak, 0, 4, 3)
	if r.header.Get("ETag") == tag {
		t.Error("the tag did not move with the streak")
	}
	want("day 5", h.ack(tok, ids[1], `{"score":10}`).Streak, 1, 4, 5)
}

// items and total count the subjects granted now; a record of an ungranted
// subject is kept, counts in xp, and comes back with the grant.
func TestProgressGrants(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.corpus()
	a := c.Lessons[0]
	var b *corpus.Lesson
	for _, l := range c.Lessons {
		if l.Subject != a.Subject {
			b = l
			break
		}
	}
	both := []string{a.Subject.Ref(), b.Subject.Ref()}
	h.createOrg("g", both, nil)
	tok := h.learnerToken("g", "ana", progressScopes...)
	h.ack(tok, a.ID, `{"score":50}`)
	h.ack(tok, b.ID, `{"score":100}`)
	p, r := h.progressOf("/v1/progress", tok)
	tag := r.header.Get("ETag")
	if p.Total != 2 || p.XP != 35 {
		t.Fatalf("both granted: %s", r.body)
	}
	setGrants := func(g []string) {
		if _, err := h.store.UpdateOrg(context.Background(), "g", func(o *store.Org) error { o.Grants = g; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setGrants(both[:1])
	p, r = h.progressOf("/v1/progress", tok)
	if p.Total != 1 || len(p.Items) != 1 || p.Items[0].LessonID != a.ID || p.XP != 35 || r.header.Get("ETag") == tag {
		t.Errorf("one revoked: %s (ETag %s)", r.body, r.header.Get("ETag"))
	}
	h.put(tok, b.ID, `{"score":1}`).wantError(t, 403, "CONTENT_NOT_GRANTED")
	setGrants(both)
	p, r = h.progressOf("/v1/progress", tok)
	if p.Total != 2 || p.XP != 35 || r.header.Get("ETag") != tag {
		t.Errorf("granted again: %s", r.body)
	}
}

// Pages in listing order (tier in canonical order, slug, class number);
// the cursor walks them and expires when contentVersion moves; a bad
// limit or an unknown parameter is 400.
func TestProgressPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createOrg("p", slices.Clone(shid.Tiers), nil)
	tok := h.learnerToken("p", "ana", progressScopes...)
	c := h.corpus()
	// Classes from the end of the corpus first, so that write order is
	// not listing order.
	var written []shid.Lesson
	for i := len(c.Lessons) - 1; i >= 0 && len(written) < 7; i -= max(1, len(c.Lessons)/7) {
		lid, err := shid.ParseLesson(c.Lessons[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		h.ack(tok, c.Lessons[i].ID, `{"score":60}`)
		written = append(written, lid)
	}
	slices.SortFunc(written, func(a, b shid.Lesson) int {
		switch {
		case progress.Less(a, b):
			return -1
		case progress.Less(b, a):
			return 1
		}
		return 0
	})
	var walked []string
	path := "/v1/progress?limit=3"
	var cur string
	for pageNum := 1; ; pageNum++ {
		p, r := h.progressOf(path, tok)
		if p.Total != len(written) || p.PageNum != pageNum || p.TotalPages != 3 {
			t.Fatalf("page %d: %s", pageNum, r.body)
		}
		for _, it := range p.Items {
			walked = append(walked, it.LessonID)
		}
		if !p.HasMore {
			break
		}
		cur = *p.NextCursor
		path = "/v1/progress?limit=3&cursor=" + url.QueryEscape(cur)
	}
	var want []string
	for _, l := range written {
		want = append(want, l.String())
	}
	if !slices.Equal(walked, want) {
		t.Errorf("walk %v, want %v", walked, want)
	}
	before := h.usage("p")
	h.fails("/v1/progress?limit=0", tok, 400, "BAD_REQUEST")
	h.fails("/v1/progress?limit=101", tok, 400, "BAD_REQUEST")
	h.fails("/v1/progress?tier=high", tok, 400, "BAD_REQUEST")
	before = h.billed("p", before, 0, 0)
	h.fails("/v1/progress?cursor=garbage", tok, 400, "BAD_REQUEST")
	before = h.billed("p", before, 1, 0)
	h.content.Store(smallContent(t, "2026-12-01"))
	h.fails("/v1/progress?limit=3&cursor="+url.QueryEscape(cur), tok, 400, "CURSOR_EXPIRED")
	h.billed("p", before, 1, 0)
}

// racingProgress, once armed, lets another app save the learner's record
// between the server's next read and its save: the server's compare and
// swap loses.
type racingProgress struct {
	progress.Store
	lesson shid.Lesson
	armed  atomic.Bool
}

func (p *racingProgress) Progress(ctx context.Context, orgID, learner string) (progress.Record, error) {
	r, err := p.Store.Progress(ctx, orgID, learner)
	if err != nil || !p.armed.CompareAndSwap(true, false) {
		return r, err
	}
	other := r.Clone()
	other.Apply(p.lesson, ptr(3), time.Now())
	if _, err := p.Store.SaveProgress(ctx, other); err != nil {
		return r, err
	}
	return r, nil
}

// A writer that lost the race answers 409 WRITE_CONFLICT with Retry-After
// 1 and retryAfterSeconds 1: its write is not saved (the other app's is),
// its call is billed, and the server does not retry.
func TestProgressWriteConflict(t *testing.T) {
	t.Parallel()
	race := &racingProgress{}
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{progress: func(s progress.Store) progress.Store {
		race.Store = s
		return race
	}})
	h.createOrg("x", slices.Clone(shid.Tiers), nil)
	tok := h.learnerToken("x", "ana", progressScopes...)
	ids := lessonsOf(h.corpus(), 2)
	race.lesson, _ = shid.ParseLesson(ids[1])
	race.armed.Store(true)
	before := h.usage("x")
	r := h.put(tok, ids[0], `{"score":80}`)
	e := r.wantError(t, 409, "WRITE_CONFLICT")
	if r.header.Get("Retry-After") != "1" || !bytes.Contains(r.body, []byte(`"retryAfterSeconds":1`)) || e.Message == "" {
		t.Errorf("409: Retry-After %q, body %s", r.header.Get("Retry-After"), r.body)
	}
	h.billed("x", before, 1, 0)
	rec := h.record("x", "ana")
	if rec.Version != 1 || len(rec.Classes) != 1 || rec.Classes[0].Lesson != race.lesson {
		t.Errorf("after the lost race: %+v, want the other app's write only", rec)
	}
	// The retry succeeds on the new version.
	if a := h.ack(tok, ids[0], `{"score":80}`); a.XP != 10+18 {
		t.Errorf("retry: %+v", a)
	}
	if v := h.record("x", "ana").Version; v != 2 {
		t.Errorf("version %d, want 2", v)
	}
}

// orgDeletingProgress deletes the organisation between the server's read
// of the record and its save, as an operator's DELETE racing a PUT would.
type orgDeletingProgress struct {
	progress.Store
	orgs store.Store
}

func (p *orgDeletingProgress) Progress(ctx context.Context, orgID, learner string) (progress.Record, error) {
	r, err := p.Store.Progress(ctx, orgID, learner)
	if err == nil {
		err = p.orgs.DeleteOrg(ctx, orgID)
	}
	return r, err
}

// A PUT whose organisation is deleted before its save answers the gate's
// 403 NO_ORGANIZATION, not a 500, and saves nothing.
func TestProgressOrgDeletedBeforeSave(t *testing.T) {
	t.Parallel()
	del := &orgDeletingProgress{}
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{progress: func(s progress.Store) progress.Store {
		del.Store = s
		return del
	}})
	del.orgs = h.store
	h.createOrg("gone", slices.Clone(shid.Tiers), nil)
	tok := h.learnerToken("gone", "ana", progressScopes...)
	h.put(tok, lessonsOf(h.corpus(), 1)[0], `{"score":50}`).wantError(t, 403, "NO_ORGANIZATION")
	if r, err := h.progress.Progress(context.Background(), "gone", "ana"); err != nil || r.Version != 0 {
		t.Errorf("after the refused PUT: %+v, %v", r, err)
	}
}
