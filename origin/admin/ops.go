package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/internal/jsonbody"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/shared/apierr"
)

// health is GET /admin/v1/health: 200 {"status":"ok"} when the origin is
// ready. Before that it answers 503 with the error body, code INTERNAL
// and Retry-After: 1: 503 is what probes and `curl -f` expect of a
// service that is up but not ready, and INTERNAL is the only server-side
// code in the spec's vocabulary.
func (a *api) health(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.Ready != nil && !a.cfg.Ready() {
		w.Header().Set("Retry-After", "1")
		a.writeErrorStatus(w, r, apierr.New(apierr.Internal, "The origin is not ready yet; retry shortly."),
			http.StatusServiceUnavailable)
		return nil
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// reload is POST /admin/v1/corpus/reload with {dir}: load the corpus in
// dir and swap it in while serving; the origin records it as the
// deployment's corpus, which every origin on the database then loads
// (docs/operations.md, Corpus reload). A load failure is 400 naming dir,
// with the loader's message (it names the file and field at fault): the
// operator needs it, and this API is the operator's alone. An
// *apierr.Error from Reload is answered as is (409 while another reload
// runs, 500 when the corpus could not be recorded).
func (a *api) reload(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var dir string
	if _, err := decodeObject(body, map[string]jsonbody.Field{"dir": jsonbody.String(&dir)}); err != nil {
		return err
	}
	if strings.TrimSpace(dir) == "" {
		return badRequest("dir", "dir must name a corpus directory.")
	}
	version, err := a.cfg.Reload(r.Context(), dir)
	if err != nil {
		var ae *apierr.Error
		if errors.As(err, &ae) {
			return ae
		}
		return badRequest("dir", "The corpus in "+dir+" did not load: "+err.Error())
	}
	return writeJSON(w, http.StatusOK, map[string]string{"contentVersion": version})
}

// clockJSON is the test clock: its time (RFC 3339, UTC, to the second,
// like every timestamp of the API) and how far it runs ahead of the wall
// clock, in whole seconds.
type clockJSON struct {
	Now           string `json:"now"`
	OffsetSeconds int64  `json:"offsetSeconds"`
}

func (a *api) clockState() clockJSON {
	return clockJSON{Now: licence.Timestamp(a.clk.Now()), OffsetSeconds: int64(a.clk.Offset() / time.Second)}
}

// getClock is GET /admin/v1/clock (LECTERN_TEST_CLOCK=1 only).
func (a *api) getClock(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, a.clockState())
}

// maxAdvance bounds one advance, far below time.Duration's 292 years.
const maxAdvance = 100 * 366 * 24 * 3600

// setClock is POST /admin/v1/clock (LECTERN_TEST_CLOCK=1 only) with
// exactly one of {advanceSeconds} (a positive integer) or {now} (RFC 3339,
// not before the clock's time): the clock only moves forward, because
// meters, tokens and cursors assume it does.
func (a *api) setClock(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var advance int64
	var now string
	present, err := decodeObject(body, map[string]jsonbody.Field{"advanceSeconds": jsonbody.Int64(&advance), "now": jsonbody.String(&now)})
	if err != nil {
		return err
	}
	switch {
	case present["advanceSeconds"] == present["now"]:
		return &apierr.Error{Code: apierr.BadRequest, Parameter: "body", Allowed: []string{"advanceSeconds", "now"},
			Message: "Send exactly one of advanceSeconds (a positive integer) or now (RFC 3339)."}
	case present["advanceSeconds"]:
		if advance < 1 || advance > maxAdvance {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: "advanceSeconds",
				Min: apierr.Int(1), Max: apierr.Int(maxAdvance),
				Message: "advanceSeconds must be a positive integer of at most 100 years; the clock never moves backward."}
		}
		if err := a.clk.Advance(time.Duration(advance) * time.Second); err != nil {
			return err
		}
	default:
		t, err := time.Parse(time.RFC3339, now)
		if err != nil {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: "now", Received: now,
				Message: "now must be an RFC 3339 timestamp, such as 2030-01-01T00:00:00Z."}
		}
		if err := a.clk.Set(t); err != nil && !errors.Is(err, clock.ErrBackward) {
			return err
		} else if err != nil {
			return &apierr.Error{Code: apierr.BadRequest, Parameter: "now", Received: now,
				Message: "now is before the clock's time, " + licence.Timestamp(a.clk.Now()) + "; the clock never moves backward."}
		}
	}
	// A lease's validity was bounded on the clock as it was (the next
	// hour, month, licence expiry): a move may cross any of them.
	if a.cfg.Leases != nil {
		if err := a.cfg.Leases.RevokeAll(r.Context()); err != nil {
			return fmt.Errorf("revoke the leases after a clock move: %w", err)
		}
	}
	return writeJSON(w, http.StatusOK, a.clockState())
}
