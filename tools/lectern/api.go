package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// license is what the sync reads of GET /v1/license (unmetered).
type license struct {
	OrgID          string              `json:"orgId"`
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

// api is the API at base, called with the organisation's token.
type api struct {
	base string
	c    *http.Client
	// sleep waits out a short Retry-After (a test shortens it).
	sleep func(context.Context, time.Duration) error
	// calls counts the requests made, by route.
	calls map[string]int
}

func newAPI(base string, c *http.Client) *api {
	return &api{base: strings.TrimSuffix(base, "/"), c: c, sleep: sleepCtx, calls: map[string]int{}}
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

// call sends method path (with body, JSON) and decodes a 200 into out. An
// hourly cap whose Retry-After is at most maxWait is waited out and the
// call sent again; a 5xx is sent again once after a second. Other refusals
// are *apiError. It returns the answer's header.
func (a *api) call(ctx context.Context, route, method, path string, body []byte, out any) (http.Header, error) {
	for attempt := 0; ; attempt++ {
		var rd io.Reader
		if body != nil {
			rd = strings.NewReader(string(body))
		}
		req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		a.calls[route]++
		resp, err := a.c.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusOK {
			err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out)
			resp.Body.Close()
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			return resp.Header, nil
		}
		e := readAPIError(resp)
		resp.Body.Close()
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
func (a *api) license(ctx context.Context) (license, error) {
	var l license
	_, err := a.call(ctx, "license", "GET", "/v1/license", nil, &l)
	return l, err
}

// subjects lists the granted subjects (of tier when not ""), a page of 100
// a call.
func (a *api) subjects(ctx context.Context, tier string) ([]subject, error) {
	var out []subject
	q := url.Values{"limit": {"100"}}
	if tier != "" {
		q.Set("tier", tier)
	}
	for {
		var page struct {
			Items      []subject `json:"items"`
			HasMore    bool      `json:"hasMore"`
			NextCursor *string   `json:"nextCursor"`
		}
		if _, err := a.call(ctx, "subjects", "GET", "/v1/subjects?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if !page.HasMore || page.NextCursor == nil {
			return out, nil
		}
		q.Set("cursor", *page.NextCursor)
	}
}

// export exports sub as a zip link: one call, one export, a download per
// class.
func (a *api) export(ctx context.Context, sub subject) (exportLink, error) {
	var x exportLink
	_, err := a.call(ctx, "export", "GET", "/v1/exports/subjects/"+url.PathEscape(sub.Slug)+"?format=zip_url&tier="+url.QueryEscape(sub.Tier), nil, &x)
	if err == nil && x.URL == "" {
		err = errors.New("the export answered no url")
	}
	return x, err
}

// mint mints ids (at most 100): one call, a download and an hourly mint
// each. It returns the mints-hour remaining of the RateLimit field, or -1.
func (a *api) mint(ctx context.Context, ids []string) ([]minted, int64, error) {
	body, err := json.Marshal(map[string]any{"mediaIds": ids})
	if err != nil {
		return nil, 0, err
	}
	var res struct {
		Items []minted `json:"items"`
	}
	h, err := a.call(ctx, "mint", "POST", "/v1/media/urls", body, &res)
	left := int64(-1)
	if r, ok := rateLimit(h, "mints-hour"); ok {
		left = r
	}
	if err == nil && len(res.Items) != len(ids) {
		err = fmt.Errorf("a mint of %d ids answered %d urls", len(ids), len(res.Items))
	}
	return res.Items, left, err
}
