package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lectern-api/lectern/origin/internal/pgretry"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/webhook"
)

// The webhooks' endpoints and outbox (migration 0008), for origin/webhook.

var _ webhook.Store = (*Store)(nil)

const endpointColumns = `id, org_id, url, events, secret, previous_secret, previous_until,
	disabled_at, disabled_reason, created_at`

func scanEndpoint(row pgx.Row) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	var prevUntil, disabled *time.Time
	err := row.Scan(&e.ID, &e.Org, &e.URL, &e.Events, &e.Secret, &e.Previous, &prevUntil,
		&disabled, &e.DisabledReason, &e.Created)
	if err != nil {
		return e, mapErr(err)
	}
	if prevUntil != nil {
		e.PreviousUntil = *prevUntil
	}
	if disabled != nil {
		e.Disabled = *disabled
	}
	return e, nil
}

// CreateEndpoint implements webhook.Store: the organisation's row is
// locked (FOR SHARE would let two creations count together) before the
// count, so two origins adding endpoints at once cannot pass max.
func (s *Store) CreateEndpoint(ctx context.Context, e webhook.Endpoint, max int) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("create webhook endpoint: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var n int
	if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_endpoints WHERE org_id = o.id)
		FROM orgs o WHERE o.id = $1 FOR UPDATE`, e.Org).Scan(&n); err != nil {
		return fmt.Errorf("create webhook endpoint of org %s: %w", e.Org, mapErr(err))
	}
	if n >= max {
		return fmt.Errorf("create webhook endpoint of org %s: %w", e.Org, webhook.ErrTooMany)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO webhook_endpoints (id, org_id, url, events, secret, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, e.ID, e.Org, e.URL, list(e.Events), e.Secret, e.Created); err != nil {
		return fmt.Errorf("create webhook endpoint of org %s: %w", e.Org, mapErr(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("create webhook endpoint of org %s: %w", e.Org, err)
	}
	return nil
}

// Endpoints implements webhook.Store.
func (s *Store) Endpoints(ctx context.Context, org string) ([]webhook.Endpoint, error) {
	es, err := s.endpoints(ctx, `WHERE org_id = $1 ORDER BY created_at, id`, org)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints of org %s: %w", org, err)
	}
	return es, nil
}

// endpoints reads the endpoints the query's WHERE clause (and order)
// selects.
func (s *Store) endpoints(ctx context.Context, where string, args ...any) ([]webhook.Endpoint, error) {
	return pgretry.Read(ctx, s.pool.Reset, func() ([]webhook.Endpoint, error) {
		rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints `+where, args...)
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
	})
}

// DeleteEndpoint implements webhook.Store; its deliveries go with it
// (ON DELETE CASCADE).
func (s *Store) DeleteEndpoint(ctx context.Context, org, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE org_id = $1 AND id = $2`, org, id)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// RotateSecret implements webhook.Store.
func (s *Store) RotateSecret(ctx context.Context, org, id string, secret []byte, until time.Time) (webhook.Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints
		SET previous_secret = secret, previous_until = $3, secret = $4
		WHERE org_id = $1 AND id = $2 RETURNING `+endpointColumns, org, id, until, secret))
	if err != nil {
		return e, fmt.Errorf("rotate the secret of webhook endpoint %s: %w", id, err)
	}
	return e, nil
}

// AllEndpoints implements webhook.Store.
func (s *Store) AllEndpoints(ctx context.Context, after string, limit int) ([]webhook.Endpoint, error) {
	es, err := s.endpoints(ctx, `WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return es, nil
}

// Reseal implements webhook.Store: one statement compares and swaps.
func (s *Store) Reseal(ctx context.Context, id string, old, sealed []byte) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_endpoints
		SET secret = CASE WHEN secret = $2 THEN $3 ELSE secret END,
			previous_secret = CASE WHEN previous_secret = $2 THEN $3 ELSE previous_secret END
		WHERE id = $1 AND (secret = $2 OR previous_secret = $2)`, id, old, sealed)
	if err != nil {
		return false, fmt.Errorf("reseal the secret of webhook endpoint %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Enqueue implements webhook.Store: the deliveries are inserted from the
// endpoints' rows by the same statement that checks the event is new.
func (s *Store) Enqueue(ctx context.Context, ev webhook.Event) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var subscribed bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_endpoints
		WHERE org_id = $1 AND disabled_at IS NULL AND $2 = ANY (events))`, ev.Org, ev.Type).Scan(&subscribed); err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	if !subscribed {
		return 0, nil
	}
	tag, err := tx.Exec(ctx, `INSERT INTO webhook_events (id, org_id, type, payload, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`, ev.ID, ev.Org, ev.Type, ev.Payload, ev.Created)
	if err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return 0, nil // emitted before (EmitOnce)
	}
	tag, err = tx.Exec(ctx, `INSERT INTO webhook_deliveries (event_id, endpoint_id, state, next_at, created_at)
		SELECT $1, id, 'pending', $4, $4 FROM webhook_endpoints
		WHERE org_id = $2 AND disabled_at IS NULL AND $3 = ANY (events)`, ev.ID, ev.Org, ev.Type, ev.Created)
	if err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("queue event %s: %w", ev.ID, err)
	}
	return int(tag.RowsAffected()), nil
}

// Claim implements webhook.Store with SELECT … FOR UPDATE SKIP LOCKED:
// origins claiming at once take disjoint rows and never wait on each
// other. The candidates, the due rows within each endpoint's allowance
// (a window function, which FOR UPDATE does not take), are a few times
// limit, so that rows another origin locks first leave others to take;
// ARRAY(…) runs the locking select once.
func (s *Store) Claim(ctx context.Context, now, until time.Time, claim string, limit, perEndpoint int, busy map[string]int) ([]webhook.Delivery, error) {
	busyIDs, busyN := make([]string, 0, len(busy)), make([]int32, 0, len(busy))
	for id, n := range busy {
		busyIDs, busyN = append(busyIDs, id), append(busyN, int32(n))
	}
	rows, err := s.pool.Query(ctx, `WITH w AS (
			SELECT d.id, d.next_at, row_number() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_at, d.id) AS n,
				coalesce(b.n, 0) AS busy
			FROM webhook_deliveries d LEFT JOIN unnest($5::text[], $6::int[]) AS b (endpoint_id, n)
				ON b.endpoint_id = d.endpoint_id
			WHERE d.state = 'pending' AND d.next_at <= $1),
		cand AS (SELECT id FROM w WHERE n <= $7 - busy ORDER BY next_at, id LIMIT $4 * 4),
		c AS (
			UPDATE webhook_deliveries SET next_at = $2, claim = $3, attempts = attempts + 1
			WHERE id = ANY (ARRAY (SELECT id FROM webhook_deliveries
				WHERE id IN (SELECT id FROM cand) AND state = 'pending' AND next_at <= $1
				ORDER BY next_at, id LIMIT $4 FOR UPDATE SKIP LOCKED))
			RETURNING id, event_id, endpoint_id, attempts, created_at)
		SELECT c.id, c.attempts, c.created_at, e.id, e.org_id, e.type, e.payload, e.created_at,
			p.id, p.org_id, p.url, p.secret, p.previous_secret, p.previous_until
		FROM c JOIN webhook_events e ON e.id = c.event_id JOIN webhook_endpoints p ON p.id = c.endpoint_id
		ORDER BY c.id`, now, until, claim, limit, busyIDs, busyN, perEndpoint)
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	defer rows.Close()
	var ds []webhook.Delivery
	for rows.Next() {
		d := webhook.Delivery{Claim: claim, State: webhook.Pending}
		var prevUntil *time.Time
		if err := rows.Scan(&d.ID, &d.Attempts, &d.Created, &d.Event.ID, &d.Event.Org, &d.Event.Type, &d.Event.Payload,
			&d.Event.Created, &d.Endpoint.ID, &d.Endpoint.Org, &d.Endpoint.URL, &d.Endpoint.Secret,
			&d.Endpoint.Previous, &prevUntil); err != nil {
			return nil, fmt.Errorf("claim webhook deliveries: %w", err)
		}
		if prevUntil != nil {
			d.Endpoint.PreviousUntil = *prevUntil
		}
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	return ds, nil
}

// Complete implements webhook.Store.
func (s *Store) Complete(ctx context.Context, o webhook.Outcome) (bool, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("record webhook delivery %d: %w", o.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var finished *time.Time
	next := o.At
	if o.State == webhook.Pending {
		next = o.Next
	} else {
		finished = &o.At
	}
	// A success counts whoever holds the claim now; a failure only under
	// its own claim (another origin may be trying the row again).
	tag, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET state = $3, next_at = $4, last_status = $5,
		last_error = $6, last_at = $7, finished_at = $8
		WHERE id = $1 AND state = 'pending' AND (claim = $2 OR $3 = 'delivered')`,
		o.ID, o.Claim, o.State, next, o.Status, o.Error, o.At, finished)
	if err != nil {
		return false, fmt.Errorf("record webhook delivery %d: %w", o.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if o.Disable {
		if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET disabled_at = $2, disabled_reason = $3
			WHERE id = $1 AND disabled_at IS NULL`, o.Endpoint, o.At, "answered 410 Gone"); err != nil {
			return false, fmt.Errorf("disable webhook endpoint %s: %w", o.Endpoint, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET state = 'cancelled', finished_at = $2,
			last_error = 'the endpoint was disabled (410 Gone)'
			WHERE endpoint_id = $1 AND state = 'pending'`, o.Endpoint, o.At); err != nil {
			return false, fmt.Errorf("disable webhook endpoint %s: %w", o.Endpoint, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("record webhook delivery %d: %w", o.ID, err)
	}
	return true, nil
}

// Deliveries implements webhook.Store.
func (s *Store) Deliveries(ctx context.Context, org, id string, before int64, limit int) ([]webhook.Delivery, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE org_id = $1 AND id = $2)`,
		org, id).Scan(&exists); err != nil {
		return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, err)
	}
	if !exists {
		return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, store.ErrNotFound)
	}
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := s.pool.Query(ctx, `SELECT d.id, d.state, d.attempts, d.next_at, d.last_status, d.last_error,
			d.last_at, d.finished_at, d.created_at, e.id, e.type, e.created_at
		FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
		WHERE d.endpoint_id = $1 AND d.id < $2 ORDER BY d.id DESC LIMIT $3`, id, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, err)
	}
	defer rows.Close()
	var ds []webhook.Delivery
	for rows.Next() {
		d := webhook.Delivery{Endpoint: webhook.Endpoint{ID: id, Org: org}}
		var last, finished *time.Time
		if err := rows.Scan(&d.ID, &d.State, &d.Attempts, &d.Next, &d.Status, &d.Error, &last, &finished,
			&d.Created, &d.Event.ID, &d.Event.Type, &d.Event.Created); err != nil {
			return nil, fmt.Errorf("list deliveries of webhook endpoint %s: %w", id, err)
		}
		if last != nil {
			d.LastTry = *last
		}
		if finished != nil {
			d.Finished = *finished
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
	var oldest *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM webhook_deliveries WHERE state = 'pending'`).
		Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("read the webhook queue: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

// pruneChunk bounds the events one statement of Prune deletes.
const pruneChunk = 1000

// Prune implements webhook.Store, pruneChunk events a statement. An
// event finishes after it is created, so created_at < before narrows
// the search (webhook_events_created_at) without changing its answer.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_events WHERE id = ANY (ARRAY (
			SELECT e.id FROM webhook_events e WHERE e.created_at < $1 AND NOT EXISTS (
				SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id
					AND (d.state = 'pending' OR d.finished_at >= $1))
			LIMIT $2))`, before, pruneChunk)
		if err != nil {
			return total, fmt.Errorf("prune webhook events: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneChunk {
			return total, nil
		}
	}
}
