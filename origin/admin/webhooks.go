package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/lectern-api/lectern/origin/internal/jsonbody"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/webhook"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/route"
)

// The webhooks of an organisation (docs/operations.md, "Webhooks";
// origin/webhook): its endpoints, made, listed, deleted and given a new
// secret, and each endpoint's delivery log. Served when Config.Webhooks
// is set.

func (a *api) handleWebhooks() {
	a.handle("POST /admin/v1/orgs/{orgId}/webhooks", a.createWebhook)
	a.handle("GET /admin/v1/orgs/{orgId}/webhooks", a.listWebhooks)
	a.handle("DELETE /admin/v1/orgs/{orgId}/webhooks/{webhookId}", a.deleteWebhook)
	a.handle("POST /admin/v1/orgs/{orgId}/webhooks/{webhookId}/rotate", a.rotateWebhook)
	a.handle("GET /admin/v1/orgs/{orgId}/webhooks/{webhookId}/deliveries", a.webhookDeliveries)
}

// webhookJSON is an endpoint as the admin API shows it; its secret only
// in the answers to a creation and a rotation.
type webhookJSON struct {
	ID     string   `json:"id"`
	OrgID  string   `json:"orgId"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	Secret string   `json:"secret,omitempty"`
	// PreviousSecretExpiresAt is when the secret a rotation replaced
	// stops signing; null when none does.
	PreviousSecretExpiresAt *string `json:"previousSecretExpiresAt"`
	// DisabledAt is when it was disabled (it answered 410 Gone); null
	// while it is enabled.
	DisabledAt     *string `json:"disabledAt"`
	DisabledReason string  `json:"disabledReason,omitempty"`
	CreatedAt      string  `json:"createdAt"`
}

func (a *api) toWebhookJSON(e webhook.Endpoint, secret string) webhookJSON {
	j := webhookJSON{ID: e.ID, OrgID: e.Org, URL: e.URL, Events: e.Events, Secret: secret,
		DisabledReason: e.DisabledReason, CreatedAt: licence.Timestamp(e.Created)}
	if j.Events == nil {
		j.Events = []string{}
	}
	if e.Previous != nil && a.clk.Now().Before(e.PreviousUntil) {
		at := licence.Timestamp(e.PreviousUntil)
		j.PreviousSecretExpiresAt = &at
	}
	if !e.Disabled.IsZero() {
		at := licence.Timestamp(e.Disabled)
		j.DisabledAt = &at
	}
	return j
}

// webhookErr translates the outbox's errors for org and endpoint id ("":
// none named).
func webhookErr(err error, org, id string) error {
	var bad *webhook.BadEndpoint
	switch {
	case errors.As(err, &bad):
		allowed := []string(nil)
		if bad.Member == "events" {
			allowed = webhook.Types
		}
		return &apierr.Error{Code: apierr.BadRequest, Parameter: bad.Member, Allowed: allowed,
			Message: "Webhook " + bad.Error() + "."}
	case errors.Is(err, webhook.ErrTooMany):
		return apierr.New(apierr.WriteConflict, "The organisation "+org+" has the most webhook endpoints allowed; delete one first. Nothing was saved.")
	case errors.Is(err, store.ErrNotFound) && id != "":
		return apierr.New(apierr.NotFound, "The organisation "+org+" has no webhook endpoint "+id+".")
	}
	return storeErr(err, org, "webhooks of")
}

// createWebhook is POST /admin/v1/orgs/{orgId}/webhooks with {url,
// events}: 201 with the endpoint and its secret, shown this once. The
// body is validated before the org is looked up.
func (a *api) createWebhook(w http.ResponseWriter, r *http.Request) error {
	org := r.PathValue("orgId")
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var url string
	var events []string
	present, err := decodeObject(body, map[string]jsonbody.Field{
		"url": jsonbody.String(&url), "events": jsonbody.Strings(&events)})
	if err != nil {
		return err
	}
	for _, k := range []string{"url", "events"} {
		if !present[k] {
			return badRequest(k, k+" is required.")
		}
	}
	ep, err := a.cfg.Webhooks.AddEndpoint(r.Context(), org, url, events)
	if err != nil {
		return webhookErr(err, org, "")
	}
	w.Header().Set("Location", orgPath(org)+"/webhooks/"+ep.ID)
	return writeJSON(w, http.StatusCreated, a.toWebhookJSON(ep.Endpoint, ep.SecretText))
}

// listWebhooks is GET /admin/v1/orgs/{orgId}/webhooks: the endpoints,
// without their secrets.
func (a *api) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	org := r.PathValue("orgId")
	if _, err := a.cfg.Store.GetOrg(r.Context(), org); err != nil {
		return storeErr(err, org, "get")
	}
	es, err := a.cfg.Webhooks.Endpoints(r.Context(), org)
	if err != nil {
		return webhookErr(err, org, "")
	}
	items := make([]webhookJSON, 0, len(es))
	for _, e := range es {
		items = append(items, a.toWebhookJSON(e, ""))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

// deleteWebhook is DELETE /admin/v1/orgs/{orgId}/webhooks/{webhookId}:
// 204; its pending deliveries go with it.
func (a *api) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	org, id := r.PathValue("orgId"), r.PathValue("webhookId")
	if err := a.cfg.Webhooks.DeleteEndpoint(r.Context(), org, id); err != nil {
		return webhookErr(err, org, id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rotateWebhook is POST /admin/v1/orgs/{orgId}/webhooks/{webhookId}/rotate:
// a new secret, shown this once; the previous one signs too until
// previousSecretExpiresAt (webhook.Overlap).
func (a *api) rotateWebhook(w http.ResponseWriter, r *http.Request) error {
	org, id := r.PathValue("orgId"), r.PathValue("webhookId")
	if _, err := readBody(w, r); err != nil {
		return err
	}
	ep, err := a.cfg.Webhooks.Rotate(r.Context(), org, id)
	if err != nil {
		return webhookErr(err, org, id)
	}
	return writeJSON(w, http.StatusOK, a.toWebhookJSON(ep.Endpoint, ep.SecretText))
}

// Paging of the delivery log, newest first: before is a delivery id, 0
// (the default) for the newest page.
const (
	DefaultDeliveryLimit = 50
	MaxDeliveryLimit     = 200
)

var deliveriesQuery = &route.Route{Params: []route.Param{
	{Name: "before", In: route.Query, Kind: route.Int, Default: "0", Min: 0, Max: maxAfter},
	{Name: "limit", In: route.Query, Kind: route.Int, Default: strconv.Itoa(DefaultDeliveryLimit), Min: 1, Max: MaxDeliveryLimit},
}}

// deliveryJSON is one event's delivery to the endpoint: its state, the
// attempts made, the last one's answer (responseStatus, null when there
// was none) or error, and when.
type deliveryJSON struct {
	ID             int64   `json:"id"`
	EventID        string  `json:"eventId"`
	Type           string  `json:"type"`
	State          string  `json:"state"`
	Attempts       int     `json:"attempts"`
	ResponseStatus *int    `json:"responseStatus"`
	Error          string  `json:"error,omitempty"`
	CreatedAt      string  `json:"createdAt"`
	LastAttemptAt  *string `json:"lastAttemptAt"`
	NextAttemptAt  *string `json:"nextAttemptAt"`
	FinishedAt     *string `json:"finishedAt"`
}

func stampOf(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := licence.Timestamp(t)
	return &s
}

// webhookDeliveries is GET /admin/v1/orgs/{orgId}/webhooks/{webhookId}/deliveries?before=&limit=:
// the delivery log, newest first; nextBefore is the next page's before,
// null on the last page.
func (a *api) webhookDeliveries(w http.ResponseWriter, r *http.Request) error {
	org, id := r.PathValue("orgId"), r.PathValue("webhookId")
	q, e := param.Parse(deliveriesQuery, r.URL.RawQuery)
	if e != nil {
		return e
	}
	before, _ := strconv.ParseInt(q.Get("before"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	ds, err := a.cfg.Webhooks.Deliveries(r.Context(), org, id, before, limit+1)
	if err != nil {
		return webhookErr(err, org, id)
	}
	page := struct {
		Items      []deliveryJSON `json:"items"`
		NextBefore *int64         `json:"nextBefore"`
	}{Items: make([]deliveryJSON, 0, min(len(ds), limit))}
	for i, d := range ds {
		if i == limit {
			next := ds[i-1].ID
			page.NextBefore = &next
			break
		}
		j := deliveryJSON{ID: d.ID, EventID: d.Event.ID, Type: d.Event.Type, State: d.State, Attempts: d.Attempts,
			Error: d.Error, CreatedAt: licence.Timestamp(d.Created), LastAttemptAt: stampOf(d.LastTry),
			FinishedAt: stampOf(d.Finished)}
		if d.Status != 0 {
			j.ResponseStatus = &d.Status
		}
		if d.State == webhook.Pending {
			j.NextAttemptAt = stampOf(d.Next)
		}
		page.Items = append(page.Items, j)
	}
	return writeJSON(w, http.StatusOK, page)
}

// orgChanged emits the events of a PATCH that changed o from before
// (statuses are effective ones, the enumeration alarm's included):
// license.changed when its status, tier, grants, expiry or agreement
// versions changed, and org.suspended when an operator suspended it. The
// change is committed: a failure to emit is logged, not answered.
func (a *api) orgChanged(ctx context.Context, before *store.Org, beforeStatus string, o *store.Org, status string) {
	if a.cfg.Webhooks == nil || before == nil {
		return
	}
	var changed []string
	if beforeStatus != status {
		changed = append(changed, "status")
	}
	if before.Tier != o.Tier {
		changed = append(changed, "tier")
	}
	if !slices.Equal(before.Grants, o.Grants) {
		changed = append(changed, "contentGrants")
	}
	if !before.RenewsAt.Equal(o.RenewsAt) {
		changed = append(changed, "renewsAt")
	}
	if before.EclaVersion != o.EclaVersion {
		changed = append(changed, "eclaVersion")
	}
	if before.RequiredEclaVersion != o.RequiredEclaVersion {
		changed = append(changed, "requiredEclaVersion")
	}
	if len(changed) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	grants := o.Grants
	if grants == nil {
		grants = []string{}
	}
	if _, err := a.cfg.Webhooks.Emit(ctx, o.ID, webhook.LicenseChanged, webhook.LicenseChange{
		OrgID: o.ID, Status: status, Tier: o.Tier, ContentGrants: grants, RenewsAt: licence.Timestamp(o.RenewsAt),
		EclaVersion: o.EclaVersion, RequiredEclaVersion: o.RequiredEclaVersion, Changed: changed}); err != nil {
		a.log.Error("webhook: license.changed not queued", "org", o.ID, "err", err)
	}
	if beforeStatus != licence.StatusSuspended && status == licence.StatusSuspended {
		if _, err := a.cfg.Webhooks.Emit(ctx, o.ID, webhook.OrgSuspended, webhook.Suspension{
			OrgID: o.ID, Reason: webhook.ReasonOperator, At: licence.Timestamp(a.clk.Now())}); err != nil {
			a.log.Error("webhook: org.suspended not queued", "org", o.ID, "err", err)
		}
	}
}

// beforePatch is org id as stored and its effective status before a PATCH,
// for orgChanged; nothing when there are no webhooks.
func (a *api) beforePatch(ctx context.Context, id string) (*store.Org, string, error) {
	if a.cfg.Webhooks == nil {
		return nil, "", nil
	}
	o, err := a.cfg.Store.GetOrg(ctx, id)
	if err != nil {
		return nil, "", storeErr(err, id, "get")
	}
	status, err := a.statusOf(ctx, o)
	if err != nil {
		return nil, "", err
	}
	return o, status, nil
}

// statusOf is o's effective status: the enumeration alarm's suspension
// included when the origin says (Orgs), else the stored one.
func (a *api) statusOf(ctx context.Context, o *store.Org) (string, error) {
	if a.cfg.Orgs == nil {
		return o.Status, nil
	}
	s, _, err := a.cfg.Orgs.OrgExtras(ctx, o)
	if err != nil {
		return "", fmt.Errorf("read the status of org %s: %w", o.ID, err)
	}
	return s, nil
}
