package server

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"sync"

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
// once; one more is 429 RATE_LIMITED with Retry-After: 1.

// DefaultDownloadsPerOrg bounds the downloads of one organisation in
// progress at once, on one origin, when Config.DownloadsPerOrg is 0.
const DefaultDownloadsPerOrg = 8

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
	effective.Status = Status(org, u)
	if e := licence.Check(&effective, s.cfg.Now()); e != nil {
		return nil, e
	}
	if e := licence.Entitled(org.Grants, tier, slug); e != nil {
		return nil, e
	}
	return org, nil
}

// startDownload is the start of a download of l, a link to the subject
// tier/slug: the organisation it was made for, checked (linkAccess), and
// one of its concurrent downloads taken (downloadSlot), which release
// gives back.
func (s *Server) startDownload(ctx context.Context, l link.Link, tier, slug string) (org *store.Org, release func(), err error) {
	if org, err = s.linkAccess(ctx, l, tier, slug); err != nil {
		return nil, nil, err
	}
	if release, err = s.downloadSlot(org); err != nil {
		return nil, nil, err
	}
	return org, release, nil
}

// downloads counts the downloads in progress per organisation (its meter
// key).
type downloads struct {
	mu     sync.Mutex
	active map[string]int
}

// downloadSlot takes one of org's concurrent downloads, or refuses with
// 429 RATE_LIMITED when all are taken; release gives it back.
func (s *Server) downloadSlot(org *store.Org) (release func(), err error) {
	max := s.cfg.DownloadsPerOrg
	if max <= 0 {
		max = DefaultDownloadsPerOrg
	}
	key := meter.Key(org)
	d := &s.downloads
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active[key] >= max {
		return nil, &apierr.Error{Code: apierr.RateLimited, RetryAfter: apierr.Int(1),
			Message: "The organisation has " + strconv.Itoa(max) + " downloads in progress, the most served at once; retry when one ends."}
	}
	if d.active == nil {
		d.active = map[string]int{}
	}
	d.active[key]++
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.active[key]--; d.active[key] <= 0 {
			delete(d.active, key)
		}
	}, nil
}

// attachment sets the Content-Disposition of a download saved as name
// (RFC 6266; mime quotes and escapes what needs it).
func attachment(h http.Header, name string) {
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
}
