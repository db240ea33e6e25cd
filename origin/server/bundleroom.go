package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/ratelimit"
)

// BundleRetryAfter is the Retry-After, in seconds, of an export the
// bundle store had no room for: space comes back as the downloads still
// reading evicted bundles end, or as an operator frees some.
const BundleRetryAfter = 10

// bundleFailed is the error an export answers when the bundle store
// failed it. No room (bundles.ErrNoSpace, after the store evicted what
// it could) is temporary: 503 with Retry-After, in the error body with
// code INTERNAL, the spec's one server-side code ("safe to retry"; the
// admin API's not-ready answer is the same), logged here once with its
// cause, since writeError logs only the 500s it makes. Anything else is
// err, a 500 writeError logs.
func (s *Server) bundleFailed(id string, err error) error {
	if !errors.Is(err, bundles.ErrNoSpace) {
		return err
	}
	s.cfg.Logger.Error("export bundle: no room to keep it; answered 503", "requestId", id, "err", err)
	return &statusError{status: http.StatusServiceUnavailable, e: &apierr.Error{Code: apierr.Internal,
		Message:    "The export's bundle cannot be built now: this server is short of disk space. Retry after Retry-After seconds.",
		RetryAfter: apierr.Int(BundleRetryAfter)}}
}

// buildsLimited is the answer to a bundle build the store did not admit:
// the organisation has started its builds of the hour on this origin
// (bundles.Store.Admit, issue #36 point 2). It is 429 RATE_LIMITED, the
// spec's code for an hourly cap, with Retry-After to the top of the hour
// (at most 3600 s), decided before any work and billing nothing, as the
// downloads' bounds are (downloads.go); like theirs, it carries no
// RateLimit fields, which name the meters a request bills. Any other
// error is err.
func buildsLimited(err error) error {
	var le *bundles.LimitError
	if !errors.As(err, &le) {
		return err
	}
	wait := ratelimit.Seconds(le.RetryAfter)
	return &apierr.Error{Code: apierr.RateLimited, RetryAfter: apierr.Int(wait),
		Message: "The organisation has had " + strconv.Itoa(le.Limit) + " export bundles built this hour, the most this server builds for one; " +
			"bundles already built are still served. Retry after Retry-After seconds."}
}
