package admin

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
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
