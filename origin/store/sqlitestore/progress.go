package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lectern-api/lectern/origin/progress"
)

var _ progress.Store = (*Store)(nil)

// Progress implements progress.Store: a deep copy of ReadProgress's
// record, the caller's to change.
func (s *Store) Progress(ctx context.Context, orgID, learner string) (progress.Record, error) {
	r, err := s.ReadProgress(ctx, orgID, learner)
	if err != nil {
		return progress.Record{}, err
	}
	return r.Clone(), nil
}

// ReadProgress implements progress.Store. It answers from the Store's
// cache of records (progresscache.go) when it can, with the cached record
// itself (never modified: a save caches a new one), and otherwise reads
// the database and caches what it read. The document is read as a BLOB
// into sql.RawBytes and decoded before the rows close: the driver copies
// a BLOB once, a TEXT three times (to a []byte, a string, and Scan's
// []byte). modernc.org/sqlite prepares the statement on every query even
// through a *sql.Stmt (its stmt keeps the SQL text only), so a statement
// kept for the read would save nothing (decisions-progfast.md).
func (s *Store) ReadProgress(ctx context.Context, orgID, learner string) (*progress.Record, error) {
	r, gen := s.progress.get(orgID, learner)
	if r != nil {
		return r, nil
	}
	r, err := s.readProgress(ctx, orgID, learner)
	if err != nil {
		return nil, err
	}
	s.progress.fill(r, gen)
	return r, nil
}

// readProgress reads the record of learner in orgID from the database.
func (s *Store) readProgress(ctx context.Context, orgID, learner string) (*progress.Record, error) {
	r := &progress.Record{OrgID: orgID, Learner: learner}
	rows, err := s.rdb.QueryContext(ctx, `SELECT version, CAST(record AS BLOB) FROM progress WHERE org_id = ? AND learner = ?`,
		orgID, learner)
	if err != nil {
		return nil, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
	}
	defer rows.Close()
	var doc sql.RawBytes // valid until the next Next or Close
	if rows.Next() {
		if err := rows.Scan(&r.Version, &doc); err != nil {
			return nil, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
	}
	if err := progress.Decode(doc, r); err != nil {
		return nil, fmt.Errorf("read progress of %s/%s: %w", orgID, learner, err)
	}
	return r, nil
}

// SaveProgress implements progress.Store. The compare and swap is one
// statement on the write connection, committed (synchronous=FULL) before
// it returns: an INSERT that does nothing when a row exists at version 0,
// else an UPDATE of the row still at r.Version. A record of an
// organisation that does not exist is store.ErrNotFound (the foreign key).
// A saved record is cached as it will read back, decoded from the
// document just written; a save that fails drops the learner's cached
// record (on a conflict, another write has moved it).
func (s *Store) SaveProgress(ctx context.Context, r progress.Record) (v int64, err error) {
	doc, err := progress.Encode(&r)
	if err != nil {
		return 0, fmt.Errorf("save progress of %s/%s: %w", r.OrgID, r.Learner, err)
	}
	mark := s.progress.begin()
	defer func() {
		if err != nil {
			s.progress.drop(r.OrgID, r.Learner)
			return
		}
		c := progress.Record{OrgID: r.OrgID, Learner: r.Learner, Version: v}
		if progress.Decode(doc, &c) != nil {
			s.progress.drop(r.OrgID, r.Learner) // cannot happen: doc is Encode's
			return
		}
		s.progress.saved(&c, mark)
	}()
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
