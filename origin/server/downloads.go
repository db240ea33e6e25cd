package server

import (
	"context"
	"errors"
	"math"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/link"
)

// A download link (files.go, exports.go) is a capability of the
// organisation it was made for, while that organisation may read what it
// gives: at every download the origin reads the organisation the link
// names and refuses, in the API's error body, a link whose organisation
// no longer exists or is another generation of its id (404 NOT_FOUND,
// as a link that was never valid), whose plan is not active, the
// enumeration alarm's suspension included (403 ORG_SUSPENDED), whose
// licence expired or awaits a newer agreement (403 LICENSE_EXPIRED,
// LICENSE_REQUIRED), or whose grants no longer cover the subject (403
// TIER_NOT_LICENSED, CONTENT_NOT_GRANTED). Downloads stay unmetered. At
// most DefaultDownloadsPerOrg downloads of one organisation are served at
// once, and they start at most DefaultDownloadRate a second (in bursts of
// twice that); one more is 429 RATE_LIMITED with Retry-After. Both are
// decided from the link alone, before the organisation is read, so a
// flood of downloads costs the origin no database read.

// DefaultDownloadsPerOrg bounds the downloads of one organisation in
// progress at once, on one origin, when Config.DownloadsPerOrg is 0.
const DefaultDownloadsPerOrg = 8

// DefaultDownloadRate is how many downloads of one organisation may start
// a second, on one origin, when Config.DownloadRate is 0: a sync client's
// media at a few workers stays well under it; a loop over one link does
// not.
const DefaultDownloadRate = 50

// linkAccess is the organisation l was made for, as it is now, when it
// may still download the subject tier/slug.
func (s *Server) linkAccess(ctx context.Context, l link.Link, tier, slug string) (*store.Org, error) {
	org, err := s.cfg.Store.GetOrg(ctx, l.Org)
	if errors.Is(err, store.ErrNotFound) {
		return nil, link.Refusal(nil)
	}
	if err != nil {
		return nil, err
	}
	if org.Generation != l.Gen {
		return nil, link.Refusal(nil)
	}
	u, err := s.cfg.Meters.Usage(ctx, meter.Key(org), s.cfg.Now())
	if err != nil {
		return nil, err
	}
	effective := *org
	effective.Status = licence.Status(org, u)
	if e := licence.Check(&effective, s.cfg.Now()); e != nil {
		return nil, e
	}
	if e := licence.Entitled(org.Grants, tier, slug); e != nil {
		return nil, e
	}
	return org, nil
}

// startDownload is the start of a download of l, a link to the subject
// tier/slug: one of its organisation's downloads taken (downloadSlot,
// decided from the link alone, before anything is read), then the
// organisation checked (linkAccess). release gives the download back.
func (s *Server) startDownload(ctx context.Context, l link.Link, tier, slug string) (org *store.Org, release func(), err error) {
	if release, err = s.downloadSlot(meter.KeyOf(l.Org, l.Gen)); err != nil {
		return nil, nil, err
	}
	if org, err = s.linkAccess(ctx, l, tier, slug); err != nil {
		release()
		return nil, nil, err
	}
	return org, release, nil
}

// downloads are the downloads of each organisation (by meter key): how
// many are in progress, and a token bucket of their starts.
type downloads struct {
	mu   sync.Mutex
	orgs map[string]*orgDownloads
}

type orgDownloads struct {
	active int
	tokens float64   // download starts that may begin now
	at     time.Time // when tokens was reckoned
}

// maxDownloadOrgs bounds the organisations downloads keeps: past it, those
// with nothing in progress and a full bucket are forgotten (they are as
// new).
const maxDownloadOrgs = 10000

// downloadSlot takes one of the downloads of the organisation key, or
// refuses with 429 RATE_LIMITED when all those it may have at once are in
// progress, or when it has started more than its rate allows (a bucket of
// twice the rate, refilled at the rate); release gives it back.
func (s *Server) downloadSlot(key string) (release func(), err error) {
	most, rate := s.cfg.DownloadsPerOrg, s.cfg.DownloadRate
	if most <= 0 {
		most = DefaultDownloadsPerOrg
	}
	if rate <= 0 {
		rate = DefaultDownloadRate
	}
	burst := 2 * rate
	now := s.cfg.Now()
	d := &s.downloads
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.orgs == nil {
		d.orgs = map[string]*orgDownloads{}
	}
	o := d.orgs[key]
	if o == nil {
		if len(d.orgs) >= maxDownloadOrgs {
			d.pruneLocked(now, rate, burst)
		}
		o = &orgDownloads{tokens: burst, at: now}
		d.orgs[key] = o
	}
	o.refill(now, rate, burst)
	switch {
	case o.active >= most:
		return nil, &apierr.Error{Code: apierr.RateLimited, RetryAfter: apierr.Int(1),
			Message: "The organisation has " + strconv.Itoa(most) + " downloads in progress, the most served at once; retry when one ends."}
	case o.tokens < 1:
		wait := int64(math.Ceil((1 - o.tokens) / rate))
		return nil, &apierr.Error{Code: apierr.RateLimited, RetryAfter: apierr.Int(max(wait, 1)),
			Message: "The organisation's downloads start faster than " + strconv.FormatFloat(rate, 'f', -1, 64) + " a second, the most served; retry after Retry-After seconds."}
	}
	o.tokens--
	o.active++
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		o.active--
	}, nil
}

// refill adds what the rate gave since o was last reckoned, up to burst.
func (o *orgDownloads) refill(now time.Time, rate, burst float64) {
	if dt := now.Sub(o.at).Seconds(); dt > 0 {
		o.tokens = min(burst, o.tokens+dt*rate)
		o.at = now
	}
}

// pruneLocked forgets the organisations with nothing in progress and a
// full bucket.
func (d *downloads) pruneLocked(now time.Time, rate, burst float64) {
	for k, o := range d.orgs {
		o.refill(now, rate, burst)
		if o.active == 0 && o.tokens >= burst {
			delete(d.orgs, k)
		}
	}
}

// attachment sets the Content-Disposition of a download saved as name
// (RFC 6266; mime quotes and escapes what needs it).
func attachment(h http.Header, name string) {
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
}
