package pgmeter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

var _ meter.OnceStore = (*Store)(nil)

const (
	// readOnce runs after lockAlarms in the same round trip: every batch
	// that applies an op of an org holds the org's alarm row, so a key
	// committed by any origin before is seen here.
	readOnce = `SELECT o.org, o.key, o.created, o.refused_stage, o.refused_step, o.granted, o.ledger_first, o.ledger_n, o.shape
		FROM meter_once o JOIN unnest($1::text[], $2::text[]) AS k (org, key) ON o.org = k.org AND o.key = k.key`
	// addOnce runs after addLedger in the same round trip: the batch's
	// ledger rows are the $9 ids up to meter_ledger_seq.last (which this
	// transaction holds), in their order, so a record's first row is
	// last - $9 + its offset + 1.
	addOnce = `INSERT INTO meter_once (org, key, created, refused_stage, refused_step, granted, ledger_first, ledger_n, shape)
		SELECT v.org, v.key, v.created, v.rs, v.rst, v.g,
			CASE WHEN v.n > 0 THEN (SELECT last FROM meter_ledger_seq) - $9 + v.off + 1 ELSE 0 END, v.n, v.shape
		FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::int4[], $5::int4[], $6::int8[], $7::int4[], $8::int4[], $10::int8[])
			AS v (org, key, created, rs, rst, g, off, n, shape)`
	// pruneOnce deletes at most $2 rows, skipping those a peer origin's
	// prune holds (every origin prunes): PruneOnce repeats it until fewer
	// go, so no statement is long however many keys an hour made.
	pruneOnce = `DELETE FROM meter_once WHERE ctid IN
		(SELECT ctid FROM meter_once WHERE created < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`
)

// queueLoadOnce queues the reading of the records of the batch's keys.
func queueLoadOnce(b *pgx.Batch, s *batch.State) {
	ks := s.OnceKeys()
	if len(ks) == 0 {
		return
	}
	orgs, keys := make([]string, len(ks)), make([]string, len(ks))
	for i, k := range ks {
		orgs[i], keys[i] = k.Org, k.Key
	}
	b.Queue(`SELECT clock_timestamp()`).QueryRow(func(row pgx.Row) error {
		var now time.Time
		if err := row.Scan(&now); err != nil {
			return err
		}
		s.SetClock(now)
		return nil
	})
	b.Queue(readOnce, orgs, keys).Query(func(rows pgx.Rows) error {
		var o batch.Once
		_, err := pgx.ForEachRow(rows, []any{&o.Org, &o.Key, &o.Created, &o.RefusedStage, &o.RefusedStep, &o.Granted, &o.LedgerFirst, &o.LedgerN, &o.Shape}, func() error {
			s.SetOnce(o)
			return nil
		})
		return err
	})
}

// queueSaveOnce queues the insertion of the records of the keys the batch
// applied first.
func queueSaveOnce(w *pgx.Batch, s *batch.State) {
	recs := s.NewOnce()
	if len(recs) == 0 {
		return
	}
	var orgs, keys []string
	var created []time.Time
	var rs, rst, off, n []int32
	var granted, shapes []int64
	for _, o := range recs {
		orgs, keys, created = append(orgs, o.Org), append(keys, o.Key), append(created, o.Created)
		rs, rst, granted = append(rs, int32(o.RefusedStage)), append(rst, int32(o.RefusedStep)), append(granted, o.Granted)
		off, n, shapes = append(off, int32(o.LedgerOffset)), append(n, int32(o.LedgerN)), append(shapes, o.Shape)
	}
	w.Queue(addOnce, orgs, keys, created, rs, rst, granted, off, n, int64(len(s.Ledger())), shapes)
}

// PruneOnce deletes the records of the keys applied before before.
func (s *Store) PruneOnce(ctx context.Context, before time.Time) (int64, error) {
	conn, err := s.pool.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune billed requests: %w", err)
	}
	defer s.pool.put(conn)
	var n int64
	for {
		tag, err := conn.Exec(ctx, pruneOnce, before, meter.LedgerChunk)
		if err != nil {
			return n, fmt.Errorf("prune billed requests: %w", err)
		}
		n += tag.RowsAffected()
		if tag.RowsAffected() < meter.LedgerChunk {
			return n, nil
		}
	}
}
