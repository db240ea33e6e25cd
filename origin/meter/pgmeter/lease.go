package pgmeter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

var _ meter.LeaseStore = (*Store)(nil)

// Leases (meter.LeaseStore) are rows of meter_leases written by the
// batches. Every batch that reads or writes an org's leases holds the
// org's alarm row lock first (Load), so a grant and a report are
// serialised with the ops of their org, from every origin, as ops are
// with each other; a batch reads the leases of its orgs after those locks
// (nothing is cached). A report names a lease, not its org: its batch
// first reads the lease, unlocked, for its org (which never changes), and
// reads it again under the org's lock.

// SQL of leases.
const (
	leaseColumns   = `id, org, epoch, calls, used, month, hour, expires, settle, revoke_url, closed, month_limit, hour_limit`
	readLeasesByID = `SELECT ` + leaseColumns + ` FROM meter_leases WHERE id = ANY($1::text[])`
	// readBatchLeases reads, under the batch's locks, the leases of its
	// orgs that may reserve and those its grants and reports name.
	readBatchLeases = `SELECT ` + leaseColumns + ` FROM meter_leases
		WHERE (org = ANY($1::text[]) AND NOT closed AND settle > $2) OR id = ANY($3::text[])`
	// addEpochs makes the epoch rows of the grants' orgs exist, and
	// lockEpochs reads them and the global one and holds them FOR SHARE
	// until the batch ends: a BumpEpoch (an upsert) waits for the batch.
	addEpochs = `INSERT INTO meter_lease_epochs (org, n)
		SELECT o, 0 FROM unnest($1::text[]) AS o ORDER BY o COLLATE "C" ON CONFLICT (org) DO NOTHING`
	lockEpochs = `SELECT org, n FROM meter_lease_epochs WHERE org = ANY($1::text[]) OR org = ''
		ORDER BY org COLLATE "C" FOR SHARE`
	addLeases = `INSERT INTO meter_leases (` + leaseColumns + `)
		SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::text[], $7::text[],
			$8::timestamptz[], $9::timestamptz[], $10::text[], $11::bool[], $12::int8[], $13::int8[])`
	writeLeases = `UPDATE meter_leases AS l SET used = v.used, closed = v.closed
		FROM unnest($1::text[], $2::int8[], $3::bool[]) AS v (id, used, closed) WHERE l.id = v.id`
	bumpEpoch = `INSERT INTO meter_lease_epochs (org, n) VALUES ($1, 1)
		ON CONFLICT (org) DO UPDATE SET n = meter_lease_epochs.n + 1`
	readEpoch     = `SELECT coalesce(sum(n), 0)::int8 FROM meter_lease_epochs WHERE org = $1 OR org = ''`
	openLeases    = `SELECT ` + leaseColumns + ` FROM meter_leases WHERE org = $1 AND NOT closed AND settle > $2 ORDER BY id`
	openLeasesAll = `SELECT ` + leaseColumns + ` FROM meter_leases WHERE NOT closed AND settle > $1 ORDER BY id`
)

// scanLease reads a row of leaseColumns.
func scanLease(row pgx.Row) (batch.Lease, error) {
	var l batch.Lease
	if err := row.Scan(&l.ID, &l.Org, &l.Epoch, &l.Calls, &l.Used, &l.Month, &l.Hour, &l.Expires, &l.Settle,
		&l.RevokeURL, &l.Closed, &l.MonthLimit, &l.HourLimit); err != nil {
		return l, err
	}
	l.Expires, l.Settle = l.Expires.UTC(), l.Settle.UTC()
	return l, nil
}

// eachLease returns a pgx batch callback that calls fn with every lease.
func eachLease(fn func(batch.Lease)) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			l, err := scanLease(rows)
			if err != nil {
				return err
			}
			fn(l)
		}
		return rows.Err()
	}
}

// Leases reads, before any lock, the leases the batch's reports name, for
// their orgs; Load reads them again under those orgs' locks.
func (t *tx) Leases(ctx context.Context, s *batch.State) error {
	ids := s.Reported()
	if len(ids) == 0 {
		return nil
	}
	b := t.batch()
	b.Queue(readLeasesByID, ids).Query(eachLease(s.AddLease))
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	return nil
}

// queueLeases queues, after Load's locks, the epochs' locks and reads and
// the reads of the batch's leases.
func queueLeases(b *pgx.Batch, s *batch.State) {
	if orgs := s.EpochOrgs(); len(orgs) > 0 {
		b.Queue(addEpochs, orgs)
		b.Queue(lockEpochs, orgs).Query(func(rows pgx.Rows) error {
			var org string
			var n int64
			_, err := pgx.ForEachRow(rows, []any{&org, &n}, func() error {
				s.SetEpoch(org, n)
				return nil
			})
			return err
		})
	}
	if orgs, ids := s.LeaseOrgs(), s.LeaseIDs(); len(orgs) > 0 || len(ids) > 0 {
		b.Queue(readBatchLeases, orgs, s.Floor(), ids).Query(eachLease(s.AddLease))
	}
}

// queueSaveLeases queues the insertion of the leases granted and the
// writing of what reports changed.
func queueSaveLeases(w *pgx.Batch, s *batch.State) {
	if ls := s.NewLeases(); len(ls) > 0 {
		n := len(ls)
		ids, orgs, months, hours, urls := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		epochs, calls, used := make([]int64, n), make([]int64, n), make([]int64, n)
		expires, settle := make([]time.Time, n), make([]time.Time, n)
		closed := make([]bool, n)
		ml, hl := make([]*int64, n), make([]*int64, n)
		for i, l := range ls {
			ids[i], orgs[i], months[i], hours[i], urls[i] = l.ID, l.Org, l.Month, l.Hour, l.RevokeURL
			epochs[i], calls[i], used[i] = l.Epoch, l.Calls, l.Used
			expires[i], settle[i], closed[i], ml[i], hl[i] = l.Expires, l.Settle, l.Closed, l.MonthLimit, l.HourLimit
		}
		w.Queue(addLeases, ids, orgs, epochs, calls, used, months, hours, expires, settle, urls, closed, ml, hl)
	}
	if ls := s.ChangedLeases(); len(ls) > 0 {
		ids, used, closed := make([]string, len(ls)), make([]int64, len(ls)), make([]bool, len(ls))
		for i, l := range ls {
			ids[i], used[i], closed[i] = l.ID, l.Used, l.Closed
		}
		w.Queue(writeLeases, ids, used, closed)
	}
}

// Epoch is org's lease epoch: its own plus the global one.
func (s *Store) Epoch(ctx context.Context, org string) (int64, error) {
	conn, err := s.pool.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("lease epoch: %w", err)
	}
	defer s.pool.put(conn)
	var n int64
	if err := conn.QueryRow(ctx, readEpoch, org).Scan(&n); err != nil {
		return 0, fmt.Errorf("lease epoch: %w", err)
	}
	return n, nil
}

// BumpEpoch moves org's epoch ("": every org's). It waits for the batches
// with grants holding the row (FOR SHARE), so once it returns every grant
// either saw the new epoch or committed its lease before it.
func (s *Store) BumpEpoch(ctx context.Context, org string) error {
	conn, err := s.pool.get(ctx)
	if err != nil {
		return fmt.Errorf("bump lease epoch: %w", err)
	}
	defer s.pool.put(conn)
	if _, err := conn.Exec(ctx, bumpEpoch, org); err != nil {
		return fmt.Errorf("bump lease epoch: %w", err)
	}
	return nil
}

// GrantLease reserves a block of calls for a new lease, in a batch.
func (s *Store) GrantLease(ctx context.Context, g meter.LeaseGrant) (meter.Granted, error) {
	return s.front.GrantLease(ctx, g)
}

// ReportLeases applies cumulative reports, in a batch: committed when it
// returns.
func (s *Store) ReportLeases(ctx context.Context, now time.Time, rs []meter.Report) error {
	return s.front.ReportLeases(ctx, now, rs)
}

// OpenLeases lists the leases of org (every org's when "") not closed
// whose Settle is after now.
func (s *Store) OpenLeases(ctx context.Context, org string, now time.Time) ([]meter.Lease, error) {
	conn, err := s.pool.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("open leases: %w", err)
	}
	defer s.pool.put(conn)
	var rows pgx.Rows
	if org == "" {
		rows, err = conn.Query(ctx, openLeasesAll, now)
	} else {
		rows, err = conn.Query(ctx, openLeases, org, now)
	}
	if err != nil {
		return nil, fmt.Errorf("open leases: %w", err)
	}
	var out []meter.Lease
	if err := eachLease(func(l batch.Lease) { out = append(out, l.Lease) })(rows); err != nil {
		return nil, fmt.Errorf("open leases: %w", err)
	}
	return out, nil
}

// PruneLeases deletes the leases that ended before before. A batch that
// reads one of them waits for the delete or the delete for it (row
// locks); either way a report after it is ignored.
func (s *Store) PruneLeases(ctx context.Context, before time.Time) (int64, error) {
	conn, err := s.pool.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune leases: %w", err)
	}
	defer s.pool.put(conn)
	tag, err := conn.Exec(ctx, `DELETE FROM meter_leases WHERE (closed AND expires < $1) OR settle < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("prune leases: %w", err)
	}
	return tag.RowsAffected(), nil
}
