package sqlitemeter

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

var _ meter.LeaseStore = (*Store)(nil)

// Leases (meter.LeaseStore) are rows of meter_leases written by the
// batches, so a grant and a report are serialised with the ops as ops are
// with each other (the one write connection). The memo keeps, per org, its
// leases that may reserve: an op of an org with none reads nothing more.

// leaseColumns are the columns scanLease reads, in its order.
const leaseColumns = `id, org, epoch, calls, used, month, hour, expires, settle, revoke_url, closed, month_limit, hour_limit`

// scanLease reads a row of leaseColumns.
func scanLease(sc interface{ Scan(...any) error }) (batch.Lease, error) {
	var l batch.Lease
	var expires, settle int64
	var ml, hl sql.NullInt64
	if err := sc.Scan(&l.ID, &l.Org, &l.Epoch, &l.Calls, &l.Used, &l.Month, &l.Hour, &expires, &settle,
		&l.RevokeURL, &l.Closed, &ml, &hl); err != nil {
		return l, err
	}
	l.Expires, l.Settle = time.UnixMicro(expires).UTC(), time.UnixMicro(settle).UTC()
	if ml.Valid {
		l.MonthLimit = &ml.Int64
	}
	if hl.Valid {
		l.HourLimit = &hl.Int64
	}
	return l, nil
}

// queryLeases calls fn with each lease a query of leaseColumns returns.
func queryLeases(ctx context.Context, db q, fn func(batch.Lease), query string, args ...any) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return fmt.Errorf("read leases: %w", err)
		}
		fn(l)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read leases: %w", err)
	}
	return nil
}

// Leases reads the leases the batch's grants and reports name.
func (t *tx) Leases(ctx context.Context, s *batch.State) error {
	for _, id := range s.LeaseIDs() {
		if err := queryLeases(ctx, t.tx, s.AddLease, `SELECT `+leaseColumns+` FROM meter_leases WHERE id = ?`, id); err != nil {
			return err
		}
	}
	return nil
}

// loadLeases reads the leases of s.LeaseOrgs() that may reserve, from the
// memo where it has them, and the epochs of s.EpochOrgs().
func (t *tx) loadLeases(ctx context.Context, s *batch.State) error {
	for _, org := range s.LeaseOrgs() {
		if ls, ok := t.memo.leases(org, s.Earliest()); ok {
			for _, l := range ls {
				s.AddLease(l)
			}
			continue
		}
		if err := queryLeases(ctx, t.tx, s.AddLease, `SELECT `+leaseColumns+` FROM meter_leases WHERE org = ? AND closed = 0 AND settle > ?`,
			org, s.Floor().UnixMicro()); err != nil {
			return err
		}
	}
	if orgs := s.EpochOrgs(); len(orgs) > 0 {
		for _, org := range append([]string{""}, orgs...) {
			n, err := readEpoch(ctx, t.tx, org)
			if err != nil {
				return err
			}
			s.SetEpoch(org, n)
		}
	}
	return nil
}

// readEpoch reads the stored epoch of org ("" the global one); no row is 0.
func readEpoch(ctx context.Context, db q, org string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT n FROM meter_lease_epochs WHERE org = ?`, org).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read lease epoch: %w", err)
	}
	return n, nil
}

// saveLeases inserts the leases granted and writes what reports changed.
func (t *tx) saveLeases(ctx context.Context, s *batch.State) error {
	for _, l := range s.NewLeases() {
		if _, err := t.tx.ExecContext(ctx, `INSERT INTO meter_leases (`+leaseColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			l.ID, l.Org, l.Epoch, l.Calls, l.Used, l.Month, l.Hour, l.Expires.UnixMicro(), l.Settle.UnixMicro(),
			l.RevokeURL, l.Closed, l.MonthLimit, l.HourLimit); err != nil {
			return fmt.Errorf("write lease: %w", err)
		}
	}
	for _, l := range s.ChangedLeases() {
		if _, err := t.tx.ExecContext(ctx, `UPDATE meter_leases SET used = ?, closed = ? WHERE id = ?`, l.Used, l.Closed, l.ID); err != nil {
			return fmt.Errorf("write lease: %w", err)
		}
	}
	return nil
}

// Epoch is org's lease epoch: its own plus the global one.
func (s *Store) Epoch(ctx context.Context, org string) (int64, error) {
	var n int64
	err := s.rdb.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0) FROM meter_lease_epochs WHERE org IN (?, '')`, org).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("lease epoch: %w", err)
	}
	return n, nil
}

// BumpEpoch moves org's epoch ("": every org's). It runs on the write
// connection, so it commits between two batches: a grant's batch either
// read the epoch it leaves or committed its lease before it.
func (s *Store) BumpEpoch(ctx context.Context, org string) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO meter_lease_epochs (org, n) VALUES (?, 1)
		ON CONFLICT (org) DO UPDATE SET n = n + 1`, org); err != nil {
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
// whose Settle is after now, committed ones only.
func (s *Store) OpenLeases(ctx context.Context, org string, now time.Time) ([]meter.Lease, error) {
	query, args := `SELECT `+leaseColumns+` FROM meter_leases WHERE org = ? AND closed = 0 AND settle > ? ORDER BY id`, []any{org, now.UnixMicro()}
	if org == "" {
		query, args = `SELECT `+leaseColumns+` FROM meter_leases WHERE closed = 0 AND settle > ? ORDER BY id`, args[1:]
	}
	var out []meter.Lease
	err := queryLeases(ctx, s.rdb, func(l batch.Lease) { out = append(out, l.Lease) }, query, args...)
	if err != nil {
		return nil, fmt.Errorf("open leases: %w", err)
	}
	return out, nil
}

// PruneLeases deletes the leases that ended before before. It runs on
// the write connection, between two batches.
func (s *Store) PruneLeases(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM meter_leases WHERE (closed = 1 AND expires < ?) OR settle < ?`,
		before.UnixMicro(), before.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("prune leases: %w", err)
	}
	return res.RowsAffected()
}
