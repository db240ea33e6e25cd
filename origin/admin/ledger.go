package admin

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/internal/jsonbody"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/route"
)

// Paging of the ledger: limit defaults to DefaultLedgerLimit and is at
// most MaxLedgerLimit; after is a row id, 0 (the default) for the first
// page.
const (
	DefaultLedgerLimit = 100
	MaxLedgerLimit     = 1000
	// maxAfter is the largest after: param's integers have at most 18
	// digits, and ids never come near it.
	maxAfter = 999_999_999_999_999_999
)

// ledgerQuery is the ledger route's query, validated by the public API's
// own parser (param.Parse): an unknown or repeated parameter, or a value
// that is not an integer in range, is 400 naming it, never clamped.
var ledgerQuery = &route.Route{Params: []route.Param{
	{Name: "after", In: route.Query, Kind: route.Int, Default: "0", Min: 0, Max: maxAfter},
	{Name: "limit", In: route.Query, Kind: route.Int, Default: strconv.Itoa(DefaultLedgerLimit), Min: 1, Max: MaxLedgerLimit},
}}

// ledgerRow is a ledger row as the admin API shows it. Times are RFC 3339
// UTC to the second, like every timestamp of the API; expiresAt and keyId
// are null when no link was issued (an inline export).
type ledgerRow struct {
	ID             int64    `json:"id"`
	Kind           string   `json:"kind"`
	Target         string   `json:"target"`
	Format         string   `json:"format"`
	ClientID       string   `json:"clientId"`
	Scopes         []string `json:"scopes"`
	ContentVersion string   `json:"contentVersion"`
	RequestID      string   `json:"requestId"`
	CreatedAt      string   `json:"createdAt"`
	ExpiresAt      *string  `json:"expiresAt"`
	KeyID          *string  `json:"keyId"`
}

// ledgerPage is a page of the ledger: nextAfter is the after of the next
// page, null when this page is the last.
type ledgerPage struct {
	Items     []ledgerRow `json:"items"`
	NextAfter *int64      `json:"nextAfter"`
}

func toLedgerRow(r meter.Row) ledgerRow {
	j := ledgerRow{ID: r.ID, Kind: r.Kind, Target: r.Target, Format: r.Format, ClientID: r.Client,
		Scopes: r.Scopes, ContentVersion: r.ContentVersion, RequestID: r.RequestID, CreatedAt: licence.Timestamp(r.Created)}
	if j.Scopes == nil {
		j.Scopes = []string{}
	}
	if !r.Expires.IsZero() {
		at := licence.Timestamp(r.Expires)
		j.ExpiresAt = &at
	}
	if r.KeyID != "" {
		j.KeyID = &r.KeyID
	}
	return j
}

// ledger is GET /admin/v1/orgs/{orgId}/ledger?after=&limit=: the export
// ledger of the organisation, every minted URL and shipped export, in
// commit order (by id), a page at a time. The query is validated before
// the org is looked up (validation before existence); an unknown org is
// 404. The rows are those of the organisation as it is now (its meter
// key): one deleted and created again under its id starts a new ledger.
func (a *api) ledger(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("orgId")
	q, e := param.Parse(ledgerQuery, r.URL.RawQuery)
	if e != nil {
		return e
	}
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	o, err := a.cfg.Store.GetOrg(r.Context(), id)
	if err != nil {
		return storeErr(err, id, "get")
	}
	// One row more than the page tells whether another page follows.
	rows, err := a.cfg.Meters.Ledger(r.Context(), meter.Key(o), after, limit+1)
	if err != nil {
		return fmt.Errorf("list ledger of org %s: %w", id, err)
	}
	page := ledgerPage{Items: make([]ledgerRow, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			next := rows[i-1].ID
			page.NextAfter = &next
			break
		}
		page.Items = append(page.Items, toLedgerRow(row))
	}
	return writeJSON(w, http.StatusOK, page)
}

// The ledger's retention (docs/operations.md, "The export ledger's
// retention"): rows are kept until trimmed. GET /admin/v1/ledger/archive
// streams every row created before a time, POST /admin/v1/ledger/trim
// deletes them.

// TrimFloor is how far back before must be, at least, for an archive or
// a trim: far beyond the longest life of a link (15 minutes, an hour
// with the long-URL override), so no row of a link that may still work
// is trimmed, and a trim never races the ops still committing rows
// created before its time.
const TrimFloor = 24 * time.Hour

// ArchivePage is the rows the archive reads from the store at a time.
const ArchivePage = 1000

// archiveQuery is the archive route's query: before, required.
var archiveQuery = &route.Route{Params: []route.Param{
	{Name: "before", In: route.Query, Kind: route.Text, Required: true, MaxLen: 64},
}}

// noQuery is the query of a route that takes none.
var noQuery = &route.Route{}

// archiveRow is a row of the archive: a ledger row as the ledger route
// shows it, and the organisation's id (its meter key's id, as forensics
// names it).
type archiveRow struct {
	OrgID string `json:"orgId"`
	ledgerRow
}

// before reads an archive's or trim's before: an RFC 3339 time at least
// TrimFloor before now.
func (a *api) before(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, &apierr.Error{Code: apierr.BadRequest, Parameter: "before", Received: s,
			Message: "before must be an RFC 3339 timestamp, such as 2026-01-01T00:00:00Z."}
	}
	floor := a.clk.Now().Add(-TrimFloor)
	if t.After(floor) {
		return time.Time{}, &apierr.Error{Code: apierr.BadRequest, Parameter: "before", Received: s,
			Message: "before must be at least 24 hours ago (at or before " + licence.Timestamp(floor) +
				"): the ledger rows of links that may still work are never archived away or trimmed."}
	}
	return t, nil
}

// archive is GET /admin/v1/ledger/archive?before=: every ledger row of
// every organisation created before before, in id order, as NDJSON (one
// JSON object a line, application/x-ndjson), read from the store
// ArchivePage rows at a time. A failure before the first page is the
// API's error body; after it, the answer is cut short (the connection
// is closed without the chunked body's end), so a client never takes a
// partial archive for a whole one.
func (a *api) archive(w http.ResponseWriter, r *http.Request) error {
	q, e := param.Parse(archiveQuery, r.URL.RawQuery)
	if e != nil {
		return e
	}
	before, err := a.before(q.Get("before"))
	if err != nil {
		return err
	}
	rows, err := a.cfg.Meters.LedgerBefore(r.Context(), before, 0, ArchivePage)
	if err != nil {
		return fmt.Errorf("archive the ledger: %w", err)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		for _, row := range rows {
			org, _, _ := strings.Cut(row.Org, "/") // meter.Key: the id, then the generation
			if err := enc.Encode(archiveRow{OrgID: org, ledgerRow: toLedgerRow(row)}); err != nil {
				a.abort(r, fmt.Errorf("write the archive: %w", err))
			}
		}
		if len(rows) < ArchivePage {
			break
		}
		if rows, err = a.cfg.Meters.LedgerBefore(r.Context(), before, rows[len(rows)-1].ID, ArchivePage); err != nil {
			a.abort(r, fmt.Errorf("archive the ledger: %w", err))
		}
	}
	if err := out.Flush(); err != nil {
		a.abort(r, fmt.Errorf("write the archive: %w", err))
	}
	return nil
}

// abort logs why an answer already begun cannot be finished, and cuts
// it short.
func (a *api) abort(r *http.Request, err error) {
	a.log.Error("admin answer cut short", "requestId", requestID(r.Context()), "method", r.Method, "path", r.URL.Path, "err", err)
	panic(http.ErrAbortHandler)
}

// trim is POST /admin/v1/ledger/trim with {before}: delete every ledger
// row of every organisation created before before, and answer
// {"deleted": N}. The store deletes meter.LedgerChunk rows a
// transaction; an error after some chunks leaves them deleted, and
// trimming again finishes the job.
func (a *api) trim(w http.ResponseWriter, r *http.Request) error {
	if _, e := param.Parse(noQuery, r.URL.RawQuery); e != nil {
		return e
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var raw string
	present, err := decodeObject(body, map[string]jsonbody.Field{"before": jsonbody.String(&raw)})
	if err != nil {
		return err
	}
	if !present["before"] {
		return badRequest("before", "before is required: the RFC 3339 time before which ledger rows are deleted.")
	}
	before, err := a.before(raw)
	if err != nil {
		return err
	}
	n, err := a.cfg.Meters.TrimLedger(r.Context(), before)
	if err != nil {
		return fmt.Errorf("trim the ledger before %s (%d rows deleted): %w", before.Format(time.RFC3339Nano), n, err)
	}
	a.log.Info("ledger trimmed", "requestId", requestID(r.Context()), "before", before.Format(time.RFC3339Nano), "deleted", n)
	return writeJSON(w, http.StatusOK, map[string]int64{"deleted": n})
}
