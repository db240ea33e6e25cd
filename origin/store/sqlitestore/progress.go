package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/lectern-api/lectern/origin/progress"
)

var _ progress.Store = (*Store)(nil)

// Progress implements progress.Store. It reads the database every time,
// never a cache: other learner-facing apps save records through the
// store too.
func (s *Store) Progress(ctx context.Context, orgID, learner string) (progress.Record, error) {
	r := progress.Record{OrgID: orgID, Learner: learner}
	var doc []byte
	err := s.rdb.QueryRowContext(ctx, `SELECT version, record FROM progress WHERE org_id = ? AND learner = ?`,
		orgID, learner).Scan(&r.Version, &doc)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return progress.Record{}, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
	}
	if err := progress.Decode(doc, &r); err != nil {
		return progress.Record{}, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
	}
	return r, nil
}

// SaveProgress implements progress.Store. The compare and swap is one
// statement on the write connection, committed (synchronous=FULL) before
// it returns: an INSERT that does nothing when a row exists at version 0,
// else an UPDATE of the row still at r.Version. A record of an
// organisation that does not exist is store.ErrNotFound (the foreign key).
func (s *Store) SaveProgress(ctx context.Context, r progress.Record) (int64, error) {
	doc, err := progress.Encode(&r)
	if err != nil {
		return 0, fmt.Errorf("save progress of %s/%s: %w", r.OrgID, r.Learner, err)
	}
	var res sql.Result
	if r.Version == 0 {
		res, err = s.db.ExecContext(ctx, `INSERT INTO progress (org_id, learner, version, record) VALUES (?, ?, 1, ?)
			ON CONFLICT (org_id, learner) DO NOTHING`, r.OrgID, r.Learner, string(doc))
	} else {
		res, err = s.db.ExecContext(ctx, `UPDATE progress SET version = version + 1, record = ?
			WHERE org_id = ? AND learner = ? AND version = ?`, string(doc), r.OrgID, r.Learner, r.Version)
	}
	if err != nil {
		return 0, fmt.Errorf("save progress of %s/%s: %w", r.OrgID, r.Learner, mapErr(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return 0, fmt.Errorf("save progress of %s/%s: %w", r.OrgID, r.Learner, err)
	} else if n == 0 {
		return 0, progress.ErrConflict
	}
	return r.Version + 1, nil
}
