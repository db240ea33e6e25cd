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

var _ meter.OnceStore = (*Store)(nil)

// loadOnce reads the records of the batch's Op.Once keys (the database's
// one writer holds the write lock: nothing else adds one meanwhile).
func loadOnce(ctx context.Context, tx *sql.Tx, s *batch.State) error {
	if len(s.OnceKeys()) > 0 {
		s.SetClock(time.Now()) // the database is this process's
	}
	for _, k := range s.OnceKeys() {
		o := batch.Once{OnceKey: k}
		var created int64
		err := tx.QueryRowContext(ctx, `SELECT created, refused_stage, refused_step, granted, ledger_first, ledger_n, shape
			FROM meter_once WHERE org = ? AND key = ?`, k.Org, k.Key).
			Scan(&created, &o.RefusedStage, &o.RefusedStep, &o.Granted, &o.LedgerFirst, &o.LedgerN, &o.Shape)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return fmt.Errorf("read billed requests: %w", err)
		}
		o.Created = time.UnixMicro(created).UTC()
		s.SetOnce(o)
	}
	return nil
}

// saveOnce inserts the records of the keys the batch applied first, after
// saveLedger numbered the ledger rows they name.
func saveOnce(ctx context.Context, tx *sql.Tx, s *batch.State) error {
	rows := s.Ledger()
	for _, o := range s.NewOnce() {
		first := int64(0)
		if o.LedgerN > 0 {
			first = rows[o.LedgerOffset].ID
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO meter_once (org, key, created, refused_stage, refused_step, granted, ledger_first, ledger_n, shape)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, o.Org, o.Key, o.Created.UnixMicro(), o.RefusedStage, o.RefusedStep, o.Granted, first, o.LedgerN, o.Shape); err != nil {
			return fmt.Errorf("write billed requests: %w", err)
		}
	}
	return nil
}

// PruneOnce deletes the records of the keys applied before before.
func (s *Store) PruneOnce(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	for { // meter.LedgerChunk rows a statement, between the batches
		res, err := s.db.ExecContext(ctx, `DELETE FROM meter_once WHERE (org, key) IN
			(SELECT org, key FROM meter_once WHERE created < ? LIMIT ?)`, before.UnixMicro(), meter.LedgerChunk)
		if err != nil {
			return n, fmt.Errorf("prune billed requests: %w", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, fmt.Errorf("prune billed requests: %w", err)
		}
		n += k
		if k < meter.LedgerChunk {
			return n, nil
		}
	}
}
