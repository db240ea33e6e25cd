package admin

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

// createOrg is POST /admin/v1/orgs: plan defaults, then the body's
// members; an omitted orgId is generated. A taken id is 409
// WRITE_CONFLICT: the spec's only 409, and like it nothing is saved.
func (a *api) createOrg(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	o := licence.NewOrg(a.clk.Now())
	if e := applyOrg(o, body, true); e != nil {
		return e
	}
	if o.ID == "" {
		o.ID = newOrgID()
	}
	if err := a.cfg.Store.CreateOrg(r.Context(), o); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return &apierr.Error{Code: apierr.WriteConflict, Parameter: "orgId", Received: o.ID,
				Message: "An organisation with id " + o.ID + " already exists; nothing was saved."}
		}
		return fmt.Errorf("create org: %w", err)
	}
	w.Header().Set("Location", orgPath(o.ID))
	return writeJSON(w, http.StatusCreated, toJSON(o))
}

// newOrgID is "org_" and 12 random lowercase hex digits.
func newOrgID() string {
	var b [6]byte
	rand.Read(b[:])
	return "org_" + hex.EncodeToString(b[:])
}

func orgPath(id string) string { return "/admin/v1/orgs/" + url.PathEscape(id) }

func orgNotFound(id string) *apierr.Error {
	return apierr.New(apierr.NotFound, "No organisation with id "+id+".")
}

// storeErr translates the store's sentinels for org id; other errors are
// server faults.
func storeErr(err error, id, op string) error {
	var ae *apierr.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, store.ErrNotFound):
		return orgNotFound(id)
	}
	return fmt.Errorf("%s org %s: %w", op, id, err)
}

// getOrg is GET /admin/v1/orgs/{orgId}: the org with its effective
// status, plus Orgs' members.
func (a *api) getOrg(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("orgId")
	o, err := a.cfg.Store.GetOrg(r.Context(), id)
	if err != nil {
		return storeErr(err, id, "get")
	}
	if a.cfg.Orgs == nil {
		return writeJSON(w, http.StatusOK, toJSON(o))
	}
	status, extras, err := a.cfg.Orgs.OrgExtras(r.Context(), o)
	if err != nil {
		return storeErr(err, id, "read extras of")
	}
	j := toJSON(o)
	j.Status = status
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode org: %w", err)
	}
	if b, err = merge(b, extras); err != nil {
		return err
	}
	return writeRaw(w, http.StatusOK, b)
}

// merge appends extras' members, in name order, to the JSON object obj,
// keeping obj's member order. A name obj already has is a wiring fault.
func merge(obj []byte, extras map[string]any) ([]byte, error) {
	if len(extras) == 0 {
		return obj, nil
	}
	var own map[string]json.RawMessage
	if err := json.Unmarshal(obj, &own); err != nil {
		return nil, fmt.Errorf("merge org extras: %w", err)
	}
	names := make([]string, 0, len(extras))
	for k := range extras {
		if _, dup := own[k]; dup {
			return nil, fmt.Errorf("merge org extras: member %q collides with an org member", k)
		}
		names = append(names, k)
	}
	slices.Sort(names)
	out := bytes.TrimSuffix(bytes.TrimSpace(obj), []byte("}"))
	for _, k := range names {
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(extras[k])
		if err != nil {
			return nil, fmt.Errorf("merge org extras: member %q: %w", k, err)
		}
		out = append(append(append(append(out, ','), kb...), ':'), vb...)
	}
	return append(out, '}'), nil
}

// patchOrg is PATCH /admin/v1/orgs/{orgId}: the body's members replace the
// org's in one store transaction (null lifts a cap). Status "active"
// reinstates a suspended org: the enumeration alarm is lifted first, so
// that once the status is stored, nothing suspends it still (a failure
// in between leaves the stored status as it was). The body is validated
// before the org is looked up, so a bad body is 400 whether or not the
// org exists (the spec's pipeline: validation before existence). The
// answer shows the effective status.
func (a *api) patchOrg(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("orgId")
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	now := a.clk.Now()
	probe := licence.NewOrg(now)
	probe.Status = ""
	if e := applyOrg(probe, body, false); e != nil {
		return e
	}
	before, beforeStatus, err := a.beforePatch(r.Context(), id)
	if err != nil {
		return err
	}
	if a.cfg.Orgs != nil && probe.Status == licence.StatusActive {
		o, err := a.cfg.Store.GetOrg(r.Context(), id)
		if err != nil {
			return storeErr(err, id, "get")
		}
		if err := a.cfg.Orgs.Reinstate(r.Context(), o); err != nil {
			return fmt.Errorf("reinstate org %s: %w", id, err)
		}
	}
	o, err := a.cfg.Store.UpdateOrg(r.Context(), id, func(o *store.Org) error {
		if e := applyOrg(o, body, false); e != nil {
			return e
		}
		o.UpdatedAt = now
		return nil
	})
	if err != nil {
		return storeErr(err, id, "update")
	}
	if err := a.revoke(r.Context(), o); err != nil {
		return err
	}
	j := toJSON(o)
	if a.cfg.Orgs != nil {
		if j.Status, _, err = a.cfg.Orgs.OrgExtras(r.Context(), o); err != nil {
			return storeErr(err, id, "read extras of")
		}
	}
	a.orgChanged(r.Context(), before, beforeStatus, o, j.Status)
	return writeJSON(w, http.StatusOK, j)
}

// deleteOrg is DELETE /admin/v1/orgs/{orgId}: the org and its clients go;
// their tokens then get 403 NO_ORGANIZATION, also once an org is created
// again under the id: that one has another generation, which the licence
// gate compares (licence.Issued) and its meters are keyed by (meter.Key).
// It is read first for that key, whose leases are revoked once it is gone.
func (a *api) deleteOrg(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("orgId")
	o, err := a.cfg.Store.GetOrg(r.Context(), id)
	if err != nil {
		return storeErr(err, id, "get")
	}
	if err := a.cfg.Store.DeleteOrg(r.Context(), id); err != nil {
		return storeErr(err, id, "delete")
	}
	if err := a.revoke(r.Context(), o); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
