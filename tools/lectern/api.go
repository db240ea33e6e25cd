package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/shared/id"
	lapi "github.com/lectern-api/lectern/tools/lectern/api"
)

// license is what the sync reads of GET /v1/license (unmetered).
type license struct {
	OrgID          string              `json:"orgId"`
	OrgName        string              `json:"orgName"`
	Status         string              `json:"status"`
	ContentGrants  []string            `json:"contentGrants"`
	ContentVersion string              `json:"contentVersion"`
	Quota          map[string]quotaUse `json:"quota"`
	RateLimits     map[string]*int64   `json:"rateLimits"`
}

type quotaUse struct {
	Used  int64  `json:"used"`
	Limit *int64 `json:"limit"`
}

// subject is what the sync reads of a subject row.
type subject struct {
	Slug          string `json:"slug"`
	Tier          string `json:"tier"`
	ClassCount    int    `json:"classCount"`
	ContentDigest string `json:"contentDigest"`
}

func (s subject) ref() string { return s.Tier + "/" + s.Slug }

// exportLink is a zip_url export's answer.
type exportLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
	Classes   int       `json:"classes"`
}

// minted is one URL of a mint.
type minted struct {
	MediaID   string    `json:"mediaId"`
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// apiClient is the API at base, called through the typed client generated
// from its OpenAPI description (tools/lectern/api) with the organisation's
// token.
type apiClient struct {
	c *lapi.ClientWithResponses
	// sleep waits out a short Retry-After.
	sleep func(context.Context, time.Duration) error
}

func newAPI(base string, hc *http.Client) (*apiClient, error) {
	c, err := lapi.NewClientWithResponses(strings.TrimSuffix(base, "/"), lapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return &apiClient{c: c, sleep: sleepCtx}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call sends one operation (send: its answer and raw body) until it is
// answered other than by a short wait: an hourly cap whose Retry-After is
// at most maxWait is waited out and the call sent again; a 5xx is sent
// again once after a second. A 200 returns its header; any other answer
// is an *apiError read from the API's error body.
func (a *apiClient) call(ctx context.Context, send func() (*http.Response, []byte, error)) (http.Header, error) {
	for attempt := 0; ; attempt++ {
		resp, body, err := send()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusOK {
			return resp.Header, nil
		}
		e := apiErrorOf(resp.StatusCode, resp.Header, body)
		switch {
		case e.Code == "RATE_LIMITED" && e.RetryAfter <= maxWait && attempt < 5:
			if err := a.sleep(ctx, max(e.RetryAfter, time.Second)); err != nil {
				return nil, err
			}
			continue
		case e.Status >= 500 && attempt == 0:
			if err := a.sleep(ctx, time.Second); err != nil {
				return nil, err
			}
			continue
		}
		return resp.Header, e
	}
}

// license reads the licence status: unmetered.
func (a *apiClient) license(ctx context.Context) (license, error) {
	var st *lapi.LicenseStatus
	_, err := a.call(ctx, func() (*http.Response, []byte, error) {
		r, err := a.c.GetLicenseWithResponse(ctx)
		if err != nil {
			return nil, nil, err
		}
		st = r.JSON200
		return r.HTTPResponse, r.Body, nil
	})
	if err != nil {
		return license{}, err
	}
	if st == nil {
		return license{}, errors.New("GET /v1/license answered no licence status")
	}
	q := func(used int, limit *int) quotaUse {
		u := quotaUse{Used: int64(used)}
		if limit != nil {
			l := int64(*limit)
			u.Limit = &l
		}
		return u
	}
	l := license{OrgID: st.OrgId, OrgName: st.OrgName, Status: st.Status, ContentGrants: st.ContentGrants, ContentVersion: st.ContentVersion,
		Quota: map[string]quotaUse{
			"calls":         q(st.Quota.Calls.Used, st.Quota.Calls.Limit),
			"downloads":     q(st.Quota.Downloads.Used, st.Quota.Downloads.Limit),
			"exports":       q(st.Quota.Exports.Used, st.Quota.Exports.Limit),
			"testprepitems": q(st.Quota.Testprepitems.Used, st.Quota.Testprepitems.Limit),
		},
		RateLimits: map[string]*int64{}}
	for k, v := range map[string]*int{"callsPerHour": st.RateLimits.CallsPerHour, "lessonReadsPerHour": st.RateLimits.LessonReadsPerHour,
		"urlMintsPerHour": st.RateLimits.UrlMintsPerHour} {
		if v != nil {
			n := int64(*v)
			l.RateLimits[k] = &n
		}
	}
	return l, nil
}

// subjects lists the granted subjects (of tier when not ""), a page of 100
// a call.
func (a *apiClient) subjects(ctx context.Context, tier string) ([]subject, error) {
	var out []subject
	limit := 100
	params := &lapi.ListSubjectsParams{Limit: &limit}
	if tier != "" {
		t := lapi.ListSubjectsParamsTier(tier)
		params.Tier = &t
	}
	for {
		var page *lapi.SubjectList
		if _, err := a.call(ctx, func() (*http.Response, []byte, error) {
			r, err := a.c.ListSubjectsWithResponse(ctx, params)
			if err != nil {
				return nil, nil, err
			}
			page = r.JSON200
			return r.HTTPResponse, r.Body, nil
		}); err != nil {
			return nil, err
		}
		if page == nil {
			return nil, errors.New("GET /v1/subjects answered no page")
		}
		for _, row := range page.Items {
			out = append(out, subject{Slug: row.Slug, Tier: string(row.Tier), ClassCount: row.ClassCount, ContentDigest: row.ContentDigest})
		}
		if !page.HasMore || page.NextCursor == nil {
			return out, nil
		}
		params.Cursor = page.NextCursor
	}
}

// export exports sub as a zip link: one call, one export, a download per
// class.
func (a *apiClient) export(ctx context.Context, sub subject) (exportLink, error) {
	format, tier := lapi.ExportSubjectParamsFormat("zip_url"), lapi.ExportSubjectParamsTier(sub.Tier)
	return a.exportLink(ctx, "export", func() (*http.Response, []byte, *lapi.ExportResult, error) {
		r, err := a.c.ExportSubjectWithResponse(ctx, sub.Slug, &lapi.ExportSubjectParams{Format: &format, Tier: &tier})
		if err != nil {
			return nil, nil, nil, err
		}
		return r.HTTPResponse, r.Body, r.JSON200, nil
	})
}

// exportLink makes the export request (what names it in errors) and reads
// its zip_url answer.
func (a *apiClient) exportLink(ctx context.Context, what string, do func() (*http.Response, []byte, *lapi.ExportResult, error)) (exportLink, error) {
	var res *lapi.ExportResult
	if _, err := a.call(ctx, func() (*http.Response, []byte, error) {
		r, b, x, err := do()
		res = x
		return r, b, err
	}); err != nil {
		return exportLink{}, err
	}
	if res == nil {
		return exportLink{}, fmt.Errorf("the %s answered no result", what)
	}
	x, err := res.AsExportResult0()
	if err != nil || x.Url == "" {
		return exportLink{}, fmt.Errorf("the %s answered no url (%v)", what, err)
	}
	return exportLink{URL: x.Url, ExpiresAt: x.ExpiresAt, Classes: x.Classes}, nil
}

// mint mints ids (at most 100): one call, a download and an hourly mint
// each. It returns the mints-hour remaining of the RateLimit field, or -1.
func (a *apiClient) mint(ctx context.Context, ids []string) ([]minted, int64, error) {
	var res *lapi.MintResult
	h, err := a.call(ctx, func() (*http.Response, []byte, error) {
		r, err := a.c.MintMediaURLsWithResponse(ctx, lapi.MintMediaURLsJSONRequestBody{MediaIds: ids})
		if err != nil {
			return nil, nil, err
		}
		res = r.JSON200
		return r.HTTPResponse, r.Body, nil
	})
	left := int64(-1)
	if r, ok := rateLimit(h, "mints-hour"); ok {
		left = r
	}
	if err != nil {
		return nil, left, err
	}
	if res == nil || len(res.Items) != len(ids) {
		return nil, left, fmt.Errorf("a mint of %d ids answered no or other urls", len(ids))
	}
	out := make([]minted, len(res.Items))
	for i, it := range res.Items {
		out[i] = minted{MediaID: it.MediaId, URL: it.Url, ExpiresAt: it.ExpiresAt}
	}
	return out, left, nil
}

// feedAnswer is every page of one walk of GET /v1/changes.
type feedAnswer struct {
	From, To string
	Next     string
	Subjects []feedSubject
	Lessons  []feedLesson
	// License is the caller's envelope, as the feed's answer carries it:
	// the _license its exports carry too (one token, one scope set).
	License envelope
}

// envelope is a licence envelope (_license).
type envelope struct {
	Lic string `json:"lic"`
	Tag string `json:"tag"`
}

// feedSubject is a subject the feed says changed.
type feedSubject struct {
	Ref           string
	Change        string // added, changed, removed
	ContentDigest string // "" when removed
	ClassCount    int
	FieldsChanged bool
}

// feedLesson is a class the feed says changed.
type feedLesson struct {
	Subject string
	Class   int
	Change  string
}

// errFeedGone is a since the feed no longer holds (410 CHANGES_EXPIRED),
// or a server without the feed (404): a full sync.
var errFeedGone = errors.New("the change feed does not answer from this since")

// maxFeedLessons bounds what one walk of the feed gathers: a hostile
// server cannot make the walk grow without end.
const maxFeedLessons = 1 << 20

// changes walks GET /v1/changes from since, every page (free, as the
// licence status). 410 and 404 are errFeedGone.
func (a *apiClient) changes(ctx context.Context, since string) (feedAnswer, error) {
	var out feedAnswer
	limit := 1000
	params := &lapi.ListChangesParams{Since: since, Limit: &limit}
	for page := 0; ; page++ {
		var res *lapi.ChangeList
		_, err := a.call(ctx, func() (*http.Response, []byte, error) {
			r, err := a.c.ListChangesWithResponse(ctx, params)
			if err != nil {
				return nil, nil, err
			}
			res = r.JSON200
			return r.HTTPResponse, r.Body, nil
		})
		var e *apiError
		if errors.As(err, &e) && (e.Status == http.StatusGone || e.Status == http.StatusNotFound) {
			return out, fmt.Errorf("%w: %v", errFeedGone, e)
		}
		if err != nil {
			return out, err
		}
		if res == nil || res.Next == nil || res.To == nil || res.From == nil {
			return out, errors.New("GET /v1/changes answered no page, or one without from, to and next")
		}
		if page == 0 {
			out.From, out.To, out.Next = *res.From, *res.To, *res.Next
			out.License = envelope{Lic: res.UnderscoreLicense.Lic, Tag: res.UnderscoreLicense.Tag}
			if res.Subjects != nil {
				for _, sc := range *res.Subjects {
					fs := feedSubject{Ref: sc.Subject, Change: string(sc.Change), ClassCount: sc.ClassCount, FieldsChanged: sc.SubjectFieldsChanged}
					if sc.ContentDigest != nil {
						fs.ContentDigest = *sc.ContentDigest
					}
					if err := fs.check(); err != nil {
						return out, err
					}
					out.Subjects = append(out.Subjects, fs)
				}
			}
		} else if *res.To != out.To {
			return out, fmt.Errorf("GET /v1/changes moved from %s to %s between its pages", out.To, *res.To)
		}
		for _, it := range res.Items {
			l, err := parseLessonChange(it.LessonId, it.Subject, string(it.Change))
			if err != nil {
				return out, err
			}
			out.Lessons = append(out.Lessons, l)
		}
		if len(out.Lessons) > maxFeedLessons {
			return out, fmt.Errorf("GET /v1/changes lists over %d lessons", maxFeedLessons)
		}
		if !res.HasMore || res.NextCursor == nil {
			return out, nil
		}
		params.Cursor = res.NextCursor
	}
}

// check refuses a subject change this client will not act on: a ref it
// would not make a path of, a change it does not know, a digest or class
// count missing where the change needs one.
func (fs feedSubject) check() error {
	tier, slug, ok := strings.Cut(fs.Ref, "/")
	switch {
	case !ok || !id.ValidTier(tier) || !id.ValidSlug(slug):
		return fmt.Errorf("the change feed names %q, not a tier and slug", fs.Ref)
	case fs.Change != "added" && fs.Change != "changed" && fs.Change != "removed":
		return fmt.Errorf("the change feed says %s %q", fs.Ref, fs.Change)
	case fs.Change != "removed" && (fs.ContentDigest == "" || fs.ClassCount < 1 || fs.ClassCount > maxClasses):
		return fmt.Errorf("the change feed gives %s %s without a digest or with %d classes", fs.Ref, fs.Change, fs.ClassCount)
	}
	return nil
}

// maxClasses bounds a subject's classes as the feed gives them.
const maxClasses = 1 << 16

// parseLessonChange reads a feed item: its lessonId must be
// <tier>/<slug>/<classNum> of its subject.
func parseLessonChange(lessonID, subject, change string) (feedLesson, error) {
	i := strings.LastIndexByte(lessonID, '/')
	if i < 0 || lessonID[:i] != subject {
		return feedLesson{}, fmt.Errorf("the change feed lists lesson %q of subject %q", lessonID, subject)
	}
	n, err := strconv.Atoi(lessonID[i+1:])
	tier, slug, ok := strings.Cut(subject, "/")
	if err != nil || n < 1 || n > maxClasses || strconv.Itoa(n) != lessonID[i+1:] || !ok || !id.ValidTier(tier) || !id.ValidSlug(slug) {
		return feedLesson{}, fmt.Errorf("the change feed lists %q, not a lesson id", lessonID)
	}
	if change != "added" && change != "changed" && change != "removed" {
		return feedLesson{}, fmt.Errorf("the change feed says %s %q", lessonID, change)
	}
	return feedLesson{Subject: subject, Class: n, Change: change}, nil
}

// exportClass exports class n of sub as a zip link: one call, one export,
// one download (spec: Route rules §5).
func (a *apiClient) exportClass(ctx context.Context, sub subject, n int) (exportLink, error) {
	format := lapi.ExportClassParamsFormat("zip_url")
	return a.exportLink(ctx, "class export", func() (*http.Response, []byte, *lapi.ExportResult, error) {
		r, err := a.c.ExportClassWithResponse(ctx, lapi.ExportClassParamsTier(sub.Tier), sub.Slug, n, &lapi.ExportClassParams{Format: &format})
		if err != nil {
			return nil, nil, nil, err
		}
		return r.HTTPResponse, r.Body, r.JSON200, nil
	})
}
