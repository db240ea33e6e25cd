package server

import (
	"errors"
	"net/http"

	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/shared/apierr"
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
