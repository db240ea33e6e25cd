package pgmeter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lectern-api/lectern/origin/meter"
)

// The ledger's retention (docs/operations.md, "The export ledger's
// retention"): LedgerBefore lists the rows created before a time, to
// archive them, and TrimLedger deletes them.
//
// There is no index on created: the ledger's inserts (every mint) do not
// pay for a monthly job. So both walk the ledger by id (its primary
// key), a window of at most meter.LedgerChunk rows a statement, and no
// statement reads more than that whatever the ledger's size (each
// session's statement_timeout is 10 s, pgsession); the rows newer than
// the time are read once, at the end of a walk, as pg_dump reads them.
const (
	// windowEnd is the id of the last of the next $2 rows above $1; NULL
	// when there are none.
	windowEnd = `SELECT max(id) FROM (SELECT id FROM meter_ledger WHERE id > $1 ORDER BY id LIMIT $2) AS w`
	// readLedgerBefore lists a window's rows created before $3.
	readLedgerBefore = `SELECT ` + ledgerColumns + ` FROM meter_ledger
		WHERE id > $1 AND id <= $2 AND created < $3 ORDER BY id LIMIT $4`
	// trimLedger deletes, in one statement and so one transaction, the
	// rows created before $3 of the window of the next $2 rows above $1,
	// and returns the window's last id (NULL: no rows above $1) and how
	// many it deleted. A row written meanwhile is numbered above the
	// window (meter_ledger_seq): the delete and the write never meet.
	trimLedger = `WITH w AS (SELECT id FROM meter_ledger WHERE id > $1 ORDER BY id LIMIT $2),
		d AS (DELETE FROM meter_ledger AS l USING w WHERE l.id = w.id AND l.created < $3 RETURNING l.id)
		SELECT (SELECT max(id) FROM w), (SELECT count(*) FROM d)`
)

// micro is t rounded up to the microsecond, a timestamptz's precision
// (pgx would cut it down): a row, kept to the microsecond, is created
// before t exactly when it is created before micro(t).
func micro(t time.Time) time.Time {
	t = t.UTC()
	if u := t.Truncate(time.Microsecond); !u.Equal(t) {
		return u.Add(time.Microsecond)
	}
	return t
}

// LedgerBefore lists the ledger rows of every org created before before
// with an id above after, in id order, at most limit of them.
func (s *Store) LedgerBefore(ctx context.Context, before time.Time, after int64, limit int) ([]meter.Row, error) {
	if limit < 1 {
		return nil, fmt.Errorf("meter ledger before: limit %d, want at least 1", limit)
	}
	conn, err := s.pool.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("meter ledger before: %w", err)
	}
	defer s.pool.put(conn)
	before = micro(before)
	var out []meter.Row
	for len(out) < limit {
		var end *int64
		if err := conn.QueryRow(ctx, windowEnd, after, meter.LedgerChunk).Scan(&end); err != nil {
			return nil, fmt.Errorf("meter ledger before: %w", err)
		}
		if end == nil {
			break
		}
		rows, err := conn.Query(ctx, readLedgerBefore, after, *end, before, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("meter ledger before: %w", err)
		}
		page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (meter.Row, error) { return scanRow(row) })
		if err != nil {
			return nil, fmt.Errorf("meter ledger before: %w", err)
		}
		out = append(out, page...)
		after = *end
	}
	return out, nil
}

// TrimLedger deletes the ledger rows of every org created before before,
// a window of at most meter.LedgerChunk rows a statement, each statement
// its own transaction. Another origin's trim may run at once: a row
// either deletes is counted by one of them.
func (s *Store) TrimLedger(ctx context.Context, before time.Time) (int64, error) {
	conn, err := s.pool.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("trim ledger: %w", err)
	}
	defer s.pool.put(conn)
	before = micro(before)
	var n, after int64
	for {
		var end *int64
		var k int64
		if err := conn.QueryRow(ctx, trimLedger, after, meter.LedgerChunk, before).Scan(&end, &k); err != nil {
			return n, fmt.Errorf("trim ledger: %w", err)
		}
		n += k
		if end == nil {
			return n, nil
		}
		after = *end
	}
}
