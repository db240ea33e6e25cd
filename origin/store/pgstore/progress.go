package pgstore

import (
	"context"
	"fmt"
	"github.com/lectern-api/lectern/origin/internal/pgretry"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lectern-api/lectern/origin/progress"
)

var _ progress.Store = (*Store)(nil)

// Progress implements progress.Store. pgx keeps the statement prepared
// per connection (its default statement cache); the document is decoded
// from the row's raw bytes before the rows close, not copied first.
func (s *Store) Progress(ctx context.Context, orgID, learner string) (progress.Record, error) {
	return pgretry.Read(ctx, s.pool.Reset, func() (progress.Record, error) { return s.progress(ctx, orgID, learner) })
}

func (s *Store) progress(ctx context.Context, orgID, learner string) (progress.Record, error) {
	r := progress.Record{OrgID: orgID, Learner: learner}
	rows, err := s.pool.Query(ctx, `SELECT version, record FROM progress WHERE org_id = $1 AND learner = $2`, orgID, learner)
	if err != nil {
		return progress.Record{}, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
	}
	defer rows.Close()
	var doc []byte // the row's bytes, valid until the next Next or Close
	if rows.Next() {
		if err := rows.Scan(&r.Version, nil); err != nil {
			return progress.Record{}, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
		}
		doc = rows.RawValues()[1]
	}
	if err := rows.Err(); err != nil {
		return progress.Record{}, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
	}
	if err := progress.Decode(doc, &r); err != nil {
		return progress.Record{}, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
	}
	return r, nil
}

// ReadProgress implements progress.Store: Progress, since pgstore keeps
// no records to share (several origins write through PostgreSQL).
func (s *Store) ReadProgress(ctx context.Context, orgID, learner string) (*progress.Record, error) {
	r, err := s.Progress(ctx, orgID, learner)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// SaveProgress implements progress.Store. The compare and swap is one
// statement in its own transaction, committed before it returns: an
// INSERT that does nothing when a row exists at version 0, else an
// UPDATE of the row still at r.Version (a concurrent UPDATE waits for the
// first to commit, then finds the version moved and updates nothing). A
// record of an organisation that does not exist is store.ErrNotFound (the
// foreign key, which also holds the organisation's row against a
// concurrent DeleteOrg until the save commits).
func (s *Store) SaveProgress(ctx context.Context, r progress.Record) (int64, error) {
	doc, err := progress.Encode(&r)
	if err != nil {
		return 0, fmt.Errorf("save progress of %s/%s: %w", r.OrgID, r.Learner, err)
	}
	var tag pgconn.CommandTag
	if r.Version == 0 {
		tag, err = s.pool.Exec(ctx, `INSERT INTO progress (org_id, learner, version, record) VALUES ($1, $2, 1, $3)
			ON CONFLICT (org_id, learner) DO NOTHING`, r.OrgID, r.Learner, string(doc))
	} else {
		tag, err = s.pool.Exec(ctx, `UPDATE progress SET version = version + 1, record = $3
			WHERE org_id = $1 AND learner = $2 AND version = $4`, r.OrgID, r.Learner, string(doc), r.Version)
	}
	if err != nil {
		return 0, fmt.Errorf("save progress of %s/%s: %w", r.OrgID, r.Learner, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return 0, progress.ErrConflict
	}
	return r.Version + 1, nil
}
