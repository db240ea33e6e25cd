package sqlitestore

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/webhook"
)

// The webhooks' endpoints and outbox (migration 0008), for origin/webhook.
// Every write goes through the one write connection, so claims are
// serialised: two delivery loops on one database never claim a row
// together.

var _ webhook.Store = (*Store)(nil)

// optStamp is a time.Time stored as timeLayout text, the zero time as
// NULL.
type optStamp struct{ t *time.Time }

func (o optStamp) Value() (driver.Value, error) {
	if o.t == nil || o.t.IsZero() {
		return nil, nil
	}
	return stamp(*o.t).Value()
}

func (o optStamp) Scan(src any) error {
	if src == nil {
		*o.t = time.Time{}
		return nil
	}
	return (*stamp)(o.t).Scan(src)
}

const endpointColumns = `id, org_id, url, events, secret, previous_secret, previous_until,
	disabled_at, disabled_reason, created_at`

func scanEndpoint(row scanner) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	err := row.Scan(&e.ID, &e.Org, &e.URL, (*list)(&e.Events), &e.Secret, &e.Previous, optStamp{&e.PreviousUntil},
		optStamp{&e.Disabled}, &e.DisabledReason, (*stamp)(&e.Created))
	if err != nil {
		return e, mapErr(err)
	}
	return e, nil
}

// CreateEndpoint implements webhook.Store; the transaction begins
// IMMEDIATE, so the count and the insert hold the write lock together.
func (s *Store) CreateEndpoint(ctx context.Context, e webhook.Endpoint, max int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create webhook endpoint: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM webhook_endpoints WHERE org_id = o.id)
		FROM orgs o WHERE o.id = ?`, e.Org).Scan(&n); err != nil {
		return fmt.Errorf("create webhook endpoint of org %s: %w", e.Org, mapErr(err))
	}
	if n >= max {
		return fmt.Errorf("create webhook endpoint of org %s: %w", e.Org, webhook.ErrTooMany)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_endpoints (id, org_id, url, events, secret, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, e.ID, e.Org, e.URL, list(e.Events), e.Secret, stamp(e.Created)); err != nil {
		return fmt.Errorf("create webhook endpoint of org %s: %w", e.Org, mapErr(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create webhook endpoint of org %s: %w", e.Org, err)
	}
	return nil
}

// Endpoints implements webhook.Store.
func (s *Store) Endpoints(ctx context.Context, org string) ([]webhook.Endpoint, error) {
	es, err := s.endpoints(ctx, `WHERE org_id = ? ORDER BY created_at, id`, org)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints of org %s: %w", org, err)
	}
	return es, nil
}

// endpoints reads the endpoints the query's WHERE clause (and order)
// selects.
func (s *Store) endpoints(ctx context.Context, where string, args ...any) ([]webhook.Endpoint, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var es []webhook.Endpoint
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, rows.Err()
}

// DeleteEndpoint implements webhook.Store; its deliveries go with it
// (ON DELETE CASCADE).
func (s *Store) DeleteEndpoint(ctx context.Context, org, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE org_id = ? AND id = ?`, org, id)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// RotateSecret implements webhook.Store.
func (s *Store) RotateSecret(ctx context.Context, org, id string, secret []byte, until time.Time) (webhook.Endpoint, error) {
	e, err := scanEndpoint(s.db.QueryRowContext(ctx, `UPDATE webhook_endpoints
		SET previous_secret = secret, previous_until = ?, secret = ?
		WHERE org_id = ? AND id = ? RETURNING `+endpointColumns, stamp(until), secret, org, id))
	if err != nil {
		return e, fmt.Errorf("rotate the secret of webhook endpoint %s: %w", id, err)
	}
	return e, nil
}

// AllEndpoints implements webhook.Store.
func (s *Store) AllEndpoints(ctx context.Context, after string, limit int) ([]webhook.Endpoint, error) {
	es, err := s.endpoints(ctx, `WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return es, nil
}

// Reseal implements webhook.Store: one statement compares and swaps.
func (s *Store) Reseal(ctx context.Context, id string, old, sealed []byte) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE webhook_endpoints
		SET secret = CASE WHEN secret = ?2 THEN ?3 ELSE secret END,
			previous_secret = CASE WHEN previous_secret = ?2 THEN ?3 ELSE previous_secret END
		WHERE id = ?1 AND (secret = ?2 OR previous_secret = ?2)`, id, old, sealed)
	if err != nil {
		return false, fmt.Errorf("reseal the secret of webhook endpoint %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("reseal the secret of webhook endpoint %s: %w", id, err)
	}
	return n == 1, nil
}

// subscribed is the SQL condition of an endpoint (p) of org ? enabled and
// taking events of type ?.
const subscribed = `p.org_id = ? AND p.disabled_at IS NULL AND EXISTS (SELECT 1 FROM json_each(p.events) WHERE value = ?)`

// Enqueue implements webhook.Store.
func (s *Store) Enqueue(ctx context.Context, ev webhook.Event) (int, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM webhook_endpoints p WHERE `+subscribed,
		ev.Org, ev.Type).Scan(&n); err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	if n == 0 {
		return 0, nil
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO webhook_events (id, org_id, type, payload, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`, ev.ID, ev.Org, ev.Type, ev.Payload, stamp(ev.Created))
	if err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	if k, err := res.RowsAffected(); err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	} else if k == 0 {
		return 0, nil // emitted before (EmitOnce)
	}
	res, err = tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, state, next_at, created_at)
		SELECT ?, p.id, 'pending', ?, ? FROM webhook_endpoints p WHERE `+subscribed,
		ev.ID, stamp(ev.Created), stamp(ev.Created), ev.Org, ev.Type)
	if err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	return int(k), nil
}

// Claim implements webhook.Store: one IMMEDIATE transaction, so claims
// are serialised by SQLite's one writer. busy goes in as a JSON object
// (endpoint ids are "wh_" and hex).
func (s *Store) Claim(ctx context.Context, now, until time.Time, claim string, limit, perEndpoint int, busy map[string]int) ([]webhook.Delivery, error) {
	if busy == nil {
		busy = map[string]int{}
	}
	inFlight, err := json.Marshal(busy)
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET next_at = ?, claim = ?, attempts = attempts + 1
		WHERE id IN (SELECT id FROM (
				SELECT id, next_at, endpoint_id,
					row_number() OVER (PARTITION BY endpoint_id ORDER BY next_at, id) AS n
				FROM webhook_deliveries WHERE state = 'pending' AND next_at <= ?)
			WHERE n <= ? - coalesce((SELECT value FROM json_each(?) WHERE key = endpoint_id), 0)
			ORDER BY next_at, id LIMIT ?)`, stamp(until), claim, stamp(now), perEndpoint, string(inFlight), limit)
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT d.id, d.attempts, d.created_at, e.id, e.org_id, e.type, e.payload,
			e.created_at, p.id, p.org_id, p.url, p.secret, p.previous_secret, p.previous_until
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
			JOIN webhook_endpoints p ON p.id = d.endpoint_id
		WHERE d.claim = ? AND d.state = 'pending' ORDER BY d.id`, claim)
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	defer rows.Close()
	var ds []webhook.Delivery
	for rows.Next() {
		d := webhook.Delivery{Claim: claim, State: webhook.Pending}
		if err := rows.Scan(&d.ID, &d.Attempts, (*stamp)(&d.Created), &d.Event.ID, &d.Event.Org, &d.Event.Type,
			&d.Event.Payload, (*stamp)(&d.Event.Created), &d.Endpoint.ID, &d.Endpoint.Org, &d.Endpoint.URL,
			&d.Endpoint.Secret, &d.Endpoint.Previous, optStamp{&d.Endpoint.PreviousUntil}); err != nil {
			return nil, fmt.Errorf("claim webhook deliveries: %w", err)
		}
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	rows.Close()
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	return ds, nil
}

// Complete implements webhook.Store.
func (s *Store) Complete(ctx context.Context, o webhook.Outcome) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("record webhook delivery %d: %w", o.ID, err)
	}
	defer tx.Rollback()
	next, finished := o.At, o.At
	if o.State == webhook.Pending {
		next, finished = o.Next, time.Time{}
	}
	// A success counts whoever holds the claim now; a failure only under
	// its own claim (another loop may be trying the row again).
	res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET state = ?, next_at = ?, last_status = ?,
		last_error = ?, last_at = ?, finished_at = ?
		WHERE id = ? AND state = 'pending' AND (claim = ? OR ? = 'delivered')`,
		o.State, stamp(next), o.Status, o.Error, stamp(o.At), optStamp{&finished}, o.ID, o.Claim, o.State)
	if err != nil {
		return false, fmt.Errorf("record webhook delivery %d: %w", o.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("record webhook delivery %d: %w", o.ID, err)
	} else if n == 0 {
		return false, nil
	}
	if o.Disable {
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET disabled_at = ?, disabled_reason = ?
			WHERE id = ? AND disabled_at IS NULL`, stamp(o.At), "answered 410 Gone", o.Endpoint); err != nil {
			return false, fmt.Errorf("disable webhook endpoint %s: %w", o.Endpoint, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET state = 'cancelled', finished_at = ?,
			last_error = 'the endpoint was disabled (410 Gone)'
			WHERE endpoint_id = ? AND state = 'pending'`, stamp(o.At), o.Endpoint); err != nil {
			return false, fmt.Errorf("disable webhook endpoint %s: %w", o.Endpoint, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("record webhook delivery %d: %w", o.ID, err)
	}
	return true, nil
}

// Deliveries implements webhook.Store.
func (s *Store) Deliveries(ctx context.Context, org, id string, before int64, limit int) ([]webhook.Delivery, error) {
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM webhook_endpoints WHERE org_id = ? AND id = ?`,
		org, id).Scan(&n); err != nil {
		return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, store.ErrNotFound)
	}
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT d.id, d.state, d.attempts, d.next_at, d.last_status, d.last_error,
			d.last_at, d.finished_at, d.created_at, e.id, e.type, e.created_at
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
		WHERE d.endpoint_id = ? AND d.id < ? ORDER BY d.id DESC LIMIT ?`, id, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, err)
	}
	defer rows.Close()
	var ds []webhook.Delivery
	for rows.Next() {
		d := webhook.Delivery{Endpoint: webhook.Endpoint{ID: id, Org: org}}
		if err := rows.Scan(&d.ID, &d.State, &d.Attempts, (*stamp)(&d.Next), &d.Status, &d.Error,
			optStamp{&d.LastTry}, optStamp{&d.Finished}, (*stamp)(&d.Created), &d.Event.ID, &d.Event.Type,
			(*stamp)(&d.Event.Created)); err != nil {
			return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, err)
		}
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, err)
	}
	return ds, nil
}

// Queue implements webhook.Store.
func (s *Store) Queue(ctx context.Context) (int64, time.Time, error) {
	var n int64
	var oldest time.Time
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*), min(created_at) FROM webhook_deliveries WHERE state = 'pending'`).
		Scan(&n, optStamp{&oldest}); err != nil {
		return 0, time.Time{}, fmt.Errorf("read the webhook queue: %w", err)
	}
	return n, oldest, nil
}

// pruneChunk bounds the events one transaction of Prune deletes, so
// that it never holds the one writer long.
const pruneChunk = 1000

// Prune implements webhook.Store, pruneChunk events a transaction. An
// event finishes after it is created, so created_at < before narrows
// the search (webhook_events_created_at) without changing its answer.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, `DELETE FROM webhook_events WHERE id IN (
			SELECT e.id FROM webhook_events e WHERE e.created_at < ?1 AND NOT EXISTS (
				SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id
					AND (d.state = 'pending' OR d.finished_at >= ?1))
			LIMIT ?2)`, stamp(before), pruneChunk)
		if err != nil {
			return total, fmt.Errorf("prune webhook events: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("prune webhook events: %w", err)
		}
		total += n
		if n < pruneChunk {
			return total, nil
		}
	}
}
