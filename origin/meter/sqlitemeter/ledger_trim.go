package sqlitemeter

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// The ledger's retention (docs/operations.md, "The export ledger's
// retention"): LedgerBefore lists the rows created before a time, to
// archive them, and TrimLedger deletes them.
//
// created is RFC 3339 text with the fraction's trailing zeros cut
// (timeText), which does not sort as time does ("…:00.5Z" < "…:00Z"):
// createdKey rewrites it with nine fractional digits, which does, and
// keyText writes a time the same way. There is no index on created: the
// ledger's inserts (every mint) do not pay for a monthly job. So both
// walk the ledger by id, a window of at most meter.LedgerChunk rows a
// statement (windowEnd), and no statement reads more than that whatever
// the ledger's size; the rows newer than the time are read once, at the
// end of a walk, as a backup reads them.
const (
	createdKey = `substr(created, 1, 19) || '.' || substr(ltrim(rtrim(substr(created, 20), 'Z'), '.') || '000000000', 1, 9)`
	keyLayout  = "2006-01-02T15:04:05.000000000"
	// windowEnd is the id of the last of the next rows (at most its
	// limit) above an id; NULL when there are none.
	windowEnd = `SELECT max(id) FROM (SELECT id FROM meter_ledger WHERE id > ? ORDER BY id LIMIT ?)`
)

// keyText is t as createdKey writes a row's time, rounded up to the
// microsecond a row's time is kept to: a row is created before t exactly
// when its key is below keyText(t).
func keyText(t time.Time) string {
	t = t.UTC()
	if u := t.Truncate(time.Microsecond); !u.Equal(t) {
		t = u.Add(time.Microsecond)
	}
	return t.Format(keyLayout)
}

// nextWindow returns the id of the last row of the window of rows above
// after, and false when there are none.
func nextWindow(ctx context.Context, db *sql.DB, after int64) (int64, bool, error) {
	var end sql.NullInt64
	if err := db.QueryRowContext(ctx, windowEnd, after, meter.LedgerChunk).Scan(&end); err != nil {
		return 0, false, err
	}
	return end.Int64, end.Valid, nil
}

// LedgerBefore lists the ledger rows of every org created before before
// with an id above after, in id order, at most limit of them.
func (s *Store) LedgerBefore(ctx context.Context, before time.Time, after int64, limit int) ([]meter.Row, error) {
	if limit < 1 {
		return nil, fmt.Errorf("meter ledger before: limit %d, want at least 1", limit)
	}
	key := keyText(before)
	var out []meter.Row
	for len(out) < limit {
		end, ok, err := nextWindow(ctx, s.rdb, after)
		if err != nil {
			return nil, fmt.Errorf("meter ledger before: %w", err)
		}
		if !ok {
			break
		}
		rows, err := s.rdb.QueryContext(ctx, `SELECT `+ledgerColumns+` FROM meter_ledger
			WHERE id > ? AND id <= ? AND `+createdKey+` < ? ORDER BY id LIMIT ?`, after, end, key, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("meter ledger before: %w", err)
		}
		for rows.Next() {
			r, err := scanRow(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("meter ledger before: %w", err)
			}
			out = append(out, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("meter ledger before: %w", err)
		}
		after = end
	}
	return out, nil
}

// TrimLedger deletes the ledger rows of every org created before before,
// a window of at most meter.LedgerChunk rows a statement, each its own
// transaction on the write connection: the committer's batches run
// between them. A window's ids are fixed when it is read, and a row
// written meanwhile is numbered above them (AUTOINCREMENT), so the
// delete and the write never meet.
func (s *Store) TrimLedger(ctx context.Context, before time.Time) (int64, error) {
	key := keyText(before)
	var n, after int64
	for {
		end, ok, err := nextWindow(ctx, s.rdb, after)
		if err != nil {
			return n, fmt.Errorf("trim ledger: %w", err)
		}
		if !ok {
			return n, nil
		}
		res, err := s.db.ExecContext(ctx, `DELETE FROM meter_ledger WHERE id > ? AND id <= ? AND `+createdKey+` < ?`, after, end, key)
		if err != nil {
			return n, fmt.Errorf("trim ledger: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, fmt.Errorf("trim ledger: %w", err)
		}
		n += k
		after = end
	}
}
