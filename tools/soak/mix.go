package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
)

// mix drives the workload: workers pick an organisation and an operation
// at random, send its requests through the edge and record each outcome.
type mix struct {
	edge   string // the edge's base URL
	corpus *corpus.Corpus
	orgs   []*org
	client *http.Client

	tagsMu sync.Mutex
	tags   map[string]string // org + URL → the last ETag seen, for revalidation
}

// worker is one client goroutine's state.
type worker struct {
	m    *mix
	id   int
	seq  int
	rng  *rand.Rand
	outs []outcome
}

// op is an operation of the mix and its weight.
type op struct {
	weight int
	run    func(w *worker, o *org, idx int)
}

// ops is the mix: every route of the spec, link downloads, revalidations,
// cursor walks, and refusals, free and billed.
var ops = []op{
	{4, (*worker).tiers}, {5, (*worker).subjects}, {3, (*worker).subject}, {4, (*worker).classes},
	{8, (*worker).lesson}, {3, (*worker).transcript}, {3, (*worker).quiz}, {4, (*worker).mediaList},
	{5, (*worker).mint}, {5, (*worker).search}, {2, (*worker).exportSubject}, {3, (*worker).exportClass},
	{2, (*worker).testprep}, {4, (*worker).testprepItems}, {3, (*worker).license},
	{4, (*worker).progressGet}, {8, (*worker).progressPut}, {3, (*worker).refusal},
}

// run sends requests until ctx is done.
func (w *worker) run(ctx context.Context) {
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	for ctx.Err() == nil {
		idx := w.rng.IntN(len(w.m.orgs))
		o := w.m.orgs[idx]
		n := w.rng.IntN(total)
		for _, op := range ops {
			if n -= op.weight; n < 0 {
				n := len(w.outs)
				op.run(w, o, idx)
				// A client retries a 5xx or a lost answer after a pause
				// (spec: INTERNAL is "safe to retry once"), not in a
				// tight loop that would make an outage's error count.
				for _, out := range w.outs[n:] {
					if !out.answered() {
						time.Sleep(100 * time.Millisecond)
						break
					}
				}
				break
			}
		}
	}
}

// answer is a response as the mix reads it.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// send sends one request and records its outcome in o (Start, End,
// Status, Code) and in the worker's list; allowed are the error codes the
// request may get besides those every metered request may (hourly caps
// and monthly quotas).
func (w *worker) send(o *outcome, method, target, tok string, body []byte, allowed []string, hdr ...string) *answer {
	w.seq++
	o.ReqID = fmt.Sprintf("soak-%d-%d", w.id, w.seq)
	if strings.HasPrefix(target, "/") {
		target = w.m.edge + target
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		panic(err) // the mix builds its own targets
	}
	req.Header.Set("X-Request-Id", o.ReqID)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	o.Start = time.Now()
	resp, err := w.m.client.Do(req)
	var a *answer
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil {
			a = &answer{status: resp.StatusCode, header: resp.Header, body: b}
		}
	}
	o.End = time.Now()
	if a == nil {
		w.outs = append(w.outs, *o)
		return nil
	}
	o.Status = a.status
	if a.status >= 400 {
		var e struct{ Error struct{ Code string } }
		json.Unmarshal(a.body, &e)
		o.Code = e.Error.Code
		if a.status < 500 && !slices.Contains(allowed, o.Code) && !slices.Contains(always, o.Code) {
			o.Unexpected = fmt.Sprintf("%s %s: %d %.200s", method, strings.TrimPrefix(target, w.m.edge), a.status, a.body)
		}
	}
	if a.status < 500 && a.header.Get("X-Request-Id") != o.ReqID {
		o.Unexpected = fmt.Sprintf("%s %s: X-Request-Id %q, sent %q", method, strings.TrimPrefix(target, w.m.edge), a.header.Get("X-Request-Id"), o.ReqID)
	}
	w.outs = append(w.outs, *o)
	return a
}

// always are the refusals any metered request may get: an hourly cap, a
// spent monthly quota.
var always = []string{"RATE_LIMITED", "QUOTA_EXCEEDED"}

// last is the worker's last outcome, to fill in what its body says.
func (w *worker) last() *outcome { return &w.outs[len(w.outs)-1] }

// ok reports whether a is a 200 (or 304 when revalidating).
func ok(a *answer) bool { return a != nil && (a.status == 200 || a.status == 304) }

// token is the organisation's client_credentials token; "" when the
// identity provider is unreachable (the origin is down).
func (w *worker) token(o *org) string {
	t, err := o.tokens.Token()
	if err != nil {
		time.Sleep(100 * time.Millisecond)
		return ""
	}
	return t.AccessToken
}

// get is a GET of a route with an ETag: it revalidates the last tag seen
// for the URL about a third of the time, and keeps the tag of a 200.
func (w *worker) get(o *org, idx int, k kind, target string, allowed ...string) *answer {
	tok := w.token(o)
	if tok == "" {
		return nil
	}
	key := o.ID + " " + target
	w.m.tagsMu.Lock()
	tag := w.m.tags[key]
	w.m.tagsMu.Unlock()
	var hdr []string
	if tag != "" && w.rng.IntN(3) == 0 {
		hdr = []string{"If-None-Match", tag}
	}
	a := w.send(&outcome{Org: idx, Kind: k}, "GET", target, tok, nil, allowed, hdr...)
	if a != nil && a.status == 200 {
		if t := a.header.Get("ETag"); t != "" {
			w.m.tagsMu.Lock()
			w.m.tags[key] = t
			w.m.tagsMu.Unlock()
		}
	}
	if a != nil && a.status == 304 && hdr == nil {
		w.last().Unexpected = "GET " + target + ": 304 without If-None-Match"
	}
	return a
}

// page is what the mix reads of a list envelope.
type page struct {
	Items      []json.RawMessage
	HasMore    bool
	NextCursor string
}

// walk follows a list's nextCursor for one more page, now and then.
func (w *worker) walk(o *org, idx int, k kind, a *answer, target string, allowed ...string) {
	var p page
	if a == nil || a.status != 200 || json.Unmarshal(a.body, &p) != nil || !p.HasMore || w.rng.IntN(2) == 0 {
		return
	}
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	w.get(o, idx, k, target+sep+"cursor="+url.QueryEscape(p.NextCursor), allowed...)
}

func (w *worker) pick(ls []*corpus.Lesson) *corpus.Lesson { return ls[w.rng.IntN(len(ls))] }

func (w *worker) tiers(o *org, idx int) { w.get(o, idx, kTiers, "/v1/tiers") }

func (w *worker) subjects(o *org, idx int) {
	t := "/v1/subjects?limit=3"
	if w.rng.IntN(2) == 0 {
		t += "&detail=" + []string{"brief", "full"}[w.rng.IntN(2)]
	}
	w.walk(o, idx, kSubjects, w.get(o, idx, kSubjects, t), t)
}

func (w *worker) subject(o *org, idx int) {
	s := o.subjects[w.rng.IntN(len(o.subjects))]
	w.get(o, idx, kSubject, "/v1/subjects/"+s.Slug+"?tier="+s.Tier)
}

func (w *worker) classes(o *org, idx int) {
	s := o.subjects[w.rng.IntN(len(o.subjects))]
	t := "/v1/subjects/" + s.Slug + "/classes?tier=" + s.Tier + "&limit=3"
	w.walk(o, idx, kClasses, w.get(o, idx, kClasses, t), t)
}

func (w *worker) lesson(o *org, idx int) {
	l := w.pick(o.readSet)
	t := "/v1/lessons/" + l.ID
	switch w.rng.IntN(4) {
	case 0:
		t += "?detail=full"
	case 1:
		t += "?include=quiz,media"
	}
	w.get(o, idx, kLesson, t)
}

func (w *worker) transcript(o *org, idx int) {
	t := "/v1/lessons/" + w.pick(o.readSet).ID + "/transcript"
	if w.rng.IntN(2) == 0 {
		t += "?include=markdown"
	}
	w.get(o, idx, kTranscript, t)
}

func (w *worker) quiz(o *org, idx int) {
	w.get(o, idx, kQuiz, "/v1/lessons/"+w.pick(o.readSet).ID+"/quiz")
}

func (w *worker) mediaList(o *org, idx int) {
	t := "/v1/lessons/" + w.pick(o.readSet).ID + "/media?limit=10"
	if w.rng.IntN(3) == 0 {
		t += "&type=audio"
	}
	w.walk(o, idx, kMedia, w.get(o, idx, kMedia, t), t)
}

// mint mints 1 to 20 URLs of the organisation's media (a duplicate now
// and then) and downloads one of them half the time.
func (w *worker) mint(o *org, idx int) {
	tok := w.token(o)
	if tok == "" {
		return
	}
	n := 1 + w.rng.IntN(20)
	ids := make([]string, n)
	for i := range ids {
		l := w.pick(o.lessons)
		if len(l.Media) == 0 {
			l = o.lessons[0]
		}
		ids[i] = l.Media[w.rng.IntN(len(l.Media))].ID
	}
	if n > 1 && w.rng.IntN(4) == 0 {
		ids[n-1] = ids[0]
	}
	body, _ := json.Marshal(map[string]any{"mediaIds": ids, "expiresIn": 600})
	a := w.send(&outcome{Org: idx, Kind: kMint, N: n}, "POST", "/v1/media/urls", tok, body, nil)
	if a == nil || a.status != 200 {
		return
	}
	out := w.last()
	var res struct {
		Items []struct{ MediaID, URL string }
	}
	if err := json.Unmarshal(a.body, &res); err != nil || len(res.Items) != n {
		out.Unexpected = fmt.Sprintf("mint of %d: %.200s", n, a.body)
		return
	}
	for i, it := range res.Items {
		out.MintIDs = append(out.MintIDs, it.MediaID)
		row := int64(-1)
		if u, err := url.Parse(it.URL); err == nil {
			row, _ = strconv.ParseInt(u.Query().Get("r"), 10, 64)
		}
		out.LinkRows = append(out.LinkRows, row)
		if it.MediaID != ids[i] {
			out.Unexpected = fmt.Sprintf("mint: item %d is %s, asked %s", i, it.MediaID, ids[i])
		}
	}
	if w.rng.IntN(2) == 0 {
		w.download(idx, res.Items[w.rng.IntN(n)].URL, "")
	}
}

// download fetches a link; magic, when set, is how the body must begin.
func (w *worker) download(idx int, link, magic string) {
	a := w.send(&outcome{Org: idx, Kind: kFile}, "GET", link, "", nil, nil)
	if a != nil && a.status == 200 && !bytes.HasPrefix(a.body, []byte(magic)) {
		w.last().Unexpected = fmt.Sprintf("download %s: %d bytes, not %q", link, len(a.body), magic)
	} else if a != nil && a.status != 200 && a.status < 500 {
		w.last().Unexpected = fmt.Sprintf("download %s: %d %.200s", link, a.status, a.body)
	}
}

// export sends an export, zip_url (its zip downloaded) or inline
// (revalidated by get), and notes what it shipped.
func (w *worker) export(o *org, idx int, k kind, target, ref string, classes int) {
	var a *answer
	if w.rng.IntN(2) == 0 {
		a = w.get(o, idx, k, target+"format=inline", "EXPORT_LIMIT", "PAYLOAD_TOO_LARGE")
	} else {
		tok := w.token(o)
		if tok == "" {
			return
		}
		a = w.send(&outcome{Org: idx, Kind: k}, "GET", target+"format=zip_url", tok, nil, []string{"EXPORT_LIMIT"})
	}
	if a == nil {
		return
	}
	out := w.last()
	out.N, out.Export = classes, ref
	if a.status != 200 {
		return
	}
	var res struct {
		Format, URL string
		Classes     int
	}
	if err := json.Unmarshal(a.body, &res); err != nil || res.Classes != classes {
		out.Unexpected = fmt.Sprintf("export %s: %d classes, want %d (%v)", ref, res.Classes, classes, err)
		return
	}
	if res.Format == "zip_url" && w.rng.IntN(2) == 0 {
		w.download(idx, res.URL, "PK")
	}
}

func (w *worker) exportSubject(o *org, idx int) {
	s := o.subjects[w.rng.IntN(len(o.subjects))]
	w.export(o, idx, kExportSubject, "/v1/exports/subjects/"+s.Slug+"?tier="+s.Tier+"&", s.Ref(), len(s.Lessons))
}

func (w *worker) exportClass(o *org, idx int) {
	l := w.pick(o.lessons)
	w.export(o, idx, kExportClass, "/v1/exports/classes/"+l.ID+"?", l.ID, 1)
}

func (w *worker) testprep(o *org, idx int) { w.get(o, idx, kTestprep, "/v1/testprep") }

func (w *worker) testprepItems(o *org, idx int) {
	t := w.m.corpus.Tests[w.rng.IntN(len(w.m.corpus.Tests))]
	limit := 5 + w.rng.IntN(16)
	target := fmt.Sprintf("/v1/testprep/%s/items?limit=%d", t.ID, limit)
	if w.rng.IntN(3) > 0 {
		target += "&section=" + t.Sections[w.rng.IntN(len(t.Sections))].ID
	}
	w.testprepPage(o, idx, target, limit, true)
}

func (w *worker) testprepPage(o *org, idx int, target string, limit int, walk bool) {
	a := w.get(o, idx, kTestprepItems, target)
	if a == nil {
		return
	}
	w.last().N = limit
	var p page
	if a.status != 200 || json.Unmarshal(a.body, &p) != nil {
		return
	}
	w.last().Items = len(p.Items)
	if walk && p.HasMore && w.rng.IntN(2) == 0 {
		w.testprepPage(o, idx, target+"&cursor="+url.QueryEscape(p.NextCursor), limit, false)
	}
}

func (w *worker) license(o *org, idx int) {
	tok := w.token(o)
	if tok == "" {
		return
	}
	w.send(&outcome{Org: idx, Kind: kLicense}, "GET", "/v1/license", tok, nil, nil)
}

func (w *worker) learner(o *org) (*learner, string) {
	l := o.learners[w.rng.IntN(len(o.learners))]
	tok, err := l.token(context.Background())
	if err != nil {
		time.Sleep(100 * time.Millisecond)
		return l, ""
	}
	return l, tok
}

func (w *worker) progressGet(o *org, idx int) {
	l, tok := w.learner(o)
	if tok == "" {
		return
	}
	key := o.ID + " " + l.ID
	w.m.tagsMu.Lock()
	tag := w.m.tags[key]
	w.m.tagsMu.Unlock()
	var hdr []string
	if tag != "" && w.rng.IntN(2) == 0 {
		hdr = []string{"If-None-Match", tag}
	}
	a := w.send(&outcome{Org: idx, Kind: kProgress, Learner: l.ID}, "GET", "/v1/progress?limit=20", tok, nil, nil, hdr...)
	if a != nil && a.status == 200 && a.header.Get("ETag") != "" {
		w.m.tagsMu.Lock()
		w.m.tags[key] = a.header.Get("ETag")
		w.m.tagsMu.Unlock()
	}
}

// progressPut records a class for a learner: a score from 0 to 100 (now
// and then a fraction), none a fifth of the time, the learner's own
// learnerId now and then. Two workers may write one learner at once: a
// 409 WRITE_CONFLICT is an answer it may get.
func (w *worker) progressPut(o *org, idx int) {
	l, tok := w.learner(o)
	if tok == "" {
		return
	}
	lesson := w.pick(o.lessons)
	body := map[string]any{}
	var score *float64
	if w.rng.IntN(5) > 0 {
		s := float64(w.rng.IntN(101))
		if w.rng.IntN(4) == 0 && s < 100 {
			s += 0.5
		}
		score, body["score"] = &s, s
	}
	if w.rng.IntN(4) == 0 {
		body["learnerId"] = l.ID
	}
	b, _ := json.Marshal(body)
	w.send(&outcome{Org: idx, Kind: kPutProgress, Learner: l.ID, Lesson: lesson.ID, Score: score},
		"PUT", "/v1/progress/"+lesson.ID, tok, b, []string{"WRITE_CONFLICT"})
}

// refusal sends a request the API refuses: billed ones (a class past the
// subject's last, an unknown test, an ambiguous or unknown subject) and
// free ones (an unknown parameter, an ungranted lesson, a client token on
// a learner route, a learner token on a content route).
func (w *worker) refusal(o *org, idx int) {
	tok := w.token(o)
	if tok == "" {
		return
	}
	s := o.subjects[w.rng.IntN(len(o.subjects))]
	switch w.rng.IntN(7) {
	case 0:
		w.send(&outcome{Org: idx, Kind: kLesson}, "GET", fmt.Sprintf("/v1/lessons/%s/%s/%d", s.Tier, s.Slug, len(s.Lessons)+1), tok, nil, []string{"LESSON_NOT_FOUND"})
	case 1:
		w.send(&outcome{Org: idx, Kind: kTestprepItems}, "GET", "/v1/testprep/no-such-test/items", tok, nil, []string{"UNKNOWN_TEST"})
	case 2:
		w.send(&outcome{Org: idx, Kind: kSubject}, "GET", "/v1/subjects/"+s.Slug, tok, nil, []string{"AMBIGUOUS_SUBJECT"})
	case 3:
		w.send(&outcome{Org: idx, Kind: kSubject}, "GET", "/v1/subjects/no-such-subject?tier="+s.Tier, tok, nil, []string{"UNKNOWN_SUBJECT", "CONTENT_NOT_GRANTED"})
	case 4:
		w.send(&outcome{Org: idx, Kind: kTiers}, "GET", "/v1/tiers?limt=10", tok, nil, []string{"BAD_REQUEST"})
	case 5:
		if o.other != nil {
			w.send(&outcome{Org: idx, Kind: kLesson}, "GET", "/v1/lessons/"+o.other.ID, tok, nil, []string{"TIER_NOT_LICENSED", "CONTENT_NOT_GRANTED"})
		} else {
			w.send(&outcome{Org: idx, Kind: kProgress}, "GET", "/v1/progress", tok, nil, []string{"LEARNER_REQUIRED"})
		}
	case 6:
		if _, ltok := w.learner(o); ltok != "" {
			w.send(&outcome{Org: idx, Kind: kTiers}, "GET", "/v1/tiers", ltok, nil, []string{"insufficient_scope"})
		}
	}
}

// finalRecord reads a learner's whole record through the edge, page by
// page, retrying a page that fails; the GETs are outcomes like the mix's
// (they bill calls).
func (w *worker) finalRecord(o *org, idx int, l *learner) (record, error) {
	rec := record{Items: map[string]recordItem{}}
	target := "/v1/progress?limit=100"
	for {
		var a *answer
		err := retry(time.Minute, func() error {
			tok, err := l.token(context.Background())
			if err != nil {
				return err
			}
			a = w.send(&outcome{Org: idx, Kind: kProgress, Learner: l.ID}, "GET", target, tok, nil, nil)
			if a == nil {
				return fmt.Errorf("GET %s: no answer", target)
			}
			if a.status != 200 {
				return fmt.Errorf("GET %s: %d %.300s", target, a.status, a.body)
			}
			return nil
		})
		if err != nil {
			return rec, err
		}
		var p struct {
			Items []struct {
				LessonID         string
				Score, BestScore *float64
			}
			HasMore    bool
			NextCursor string
			XP         int64
		}
		if err := json.Unmarshal(a.body, &p); err != nil {
			return rec, err
		}
		rec.XP = p.XP
		for _, it := range p.Items {
			rec.Items[it.LessonID] = recordItem{Score: it.Score, BestScore: it.BestScore}
		}
		if !p.HasMore {
			return rec, nil
		}
		target = "/v1/progress?limit=100&cursor=" + url.QueryEscape(p.NextCursor)
	}
}

// search looks for a word of a granted lesson's title, now and then
// within its tier or subject, and walks a page further.
func (w *worker) search(o *org, idx int) {
	l := w.pick(o.lessons)
	q := "the"
	for _, f := range strings.Fields(l.Title) {
		if len(f) >= 4 {
			q = strings.ToLower(f)
			break
		}
	}
	t := "/v1/search?limit=5&q=" + url.QueryEscape(q)
	switch w.rng.IntN(3) {
	case 0:
		t += "&tier=" + l.Subject.Tier
	case 1:
		t += "&subject=" + l.Subject.Slug
	}
	w.walk(o, idx, kSearch, w.get(o, idx, kSearch, t), t)
}
