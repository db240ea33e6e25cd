package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/lectern-api/lectern/origin/store"
)

// pgstore/orgs.go is this file's twin, in PostgreSQL's dialect over
// pgx: pgstore's package comment says why they stay two.

// orgFields are the columns of orgs after id, in the order of orgArgs and
// scanOrg.
const orgFields = `name, tier, status, grants,
	quota_calls, quota_downloads, quota_exports, quota_testprep_items,
	calls_per_hour, lesson_reads_per_hour, url_mints_per_hour,
	ecla_version, required_ecla_version, renews_at, long_urls,
	created_at, updated_at`

// orgColumns are the columns scanOrg reads: id, orgFields, and the
// generation, which is written once, by CreateOrg.
const orgColumns = `id, ` + orgFields + `, generation`

const orgPlaceholders = `?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`

func orgArgs(o *store.Org) []any {
	return []any{
		o.Name, o.Tier, o.Status, list(o.Grants),
		o.Quota.Calls, o.Quota.Downloads, o.Quota.Exports, o.Quota.TestprepItems,
		o.RateLimits.CallsPerHour, o.RateLimits.LessonReadsPerHour, o.RateLimits.URLMintsPerHour,
		o.EclaVersion, o.RequiredEclaVersion, stamp(o.RenewsAt), o.LongURLs,
		stamp(o.CreatedAt), stamp(o.UpdatedAt),
	}
}

func scanOrg(row scanner) (*store.Org, error) {
	var o store.Org
	err := row.Scan(&o.ID,
		&o.Name, &o.Tier, &o.Status, (*list)(&o.Grants),
		&o.Quota.Calls, &o.Quota.Downloads, &o.Quota.Exports, &o.Quota.TestprepItems,
		&o.RateLimits.CallsPerHour, &o.RateLimits.LessonReadsPerHour, &o.RateLimits.URLMintsPerHour,
		&o.EclaVersion, &o.RequiredEclaVersion, (*stamp)(&o.RenewsAt), &o.LongURLs,
		(*stamp)(&o.CreatedAt), (*stamp)(&o.UpdatedAt), &o.Generation)
	if err != nil {
		return nil, mapErr(err)
	}
	return &o, nil
}

// CreateOrg implements store.Store.
func (s *Store) CreateOrg(ctx context.Context, o *store.Org) error {
	defer s.orgs.invalidate(o.ID)
	gen := store.NewGeneration()
	q := `INSERT INTO orgs (` + orgColumns + `) VALUES (?, ` + orgPlaceholders + `, ?)`
	args := append(append([]any{o.ID}, orgArgs(o)...), gen)
	if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("create org %s: %w", o.ID, mapErr(err))
	}
	o.Generation = gen
	return nil
}

// GetOrg implements store.Store. It answers from the Store's cache when
// it can (cache.go): every write of the organisation through this Store,
// the only writer of its file, has invalidated it.
func (s *Store) GetOrg(ctx context.Context, id string) (*store.Org, error) {
	o, gen := s.orgs.get(id)
	if o != nil {
		return o, nil
	}
	o, err := getOrg(ctx, s.rdb, id)
	if err != nil {
		return nil, fmt.Errorf("get org %s: %w", id, err)
	}
	s.orgs.put(o, gen)
	return o, nil
}

// OrgIDs implements store.Store.
func (s *Store) OrgIDs(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id FROM orgs ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list orgs: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	return ids, nil
}

// querier is a *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getOrg(ctx context.Context, q querier, id string) (*store.Org, error) {
	return scanOrg(q.QueryRowContext(ctx, `SELECT `+orgColumns+` FROM orgs WHERE id = ?`, id))
}

// UpdateOrg implements store.Store. The transaction begins IMMEDIATE, so
// it holds the write lock from its read to its commit and no concurrent
// update is lost. fn's error is returned as is, unwrapped; fn cannot
// rename the organisation (a changed ID is ignored).
func (s *Store) UpdateOrg(ctx context.Context, id string, fn func(*store.Org) error) (*store.Org, error) {
	defer s.orgs.invalidate(id)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("update org %s: %w", id, err)
	}
	defer tx.Rollback()
	o, err := getOrg(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("update org %s: %w", id, err)
	}
	if err := fn(o); err != nil {
		return nil, err
	}
	// RETURNING gives back what was stored (UTC, microseconds), the same
	// as a GetOrg after it.
	q := `UPDATE orgs SET (` + orgFields + `) = (` + orgPlaceholders + `) WHERE id = ?
		RETURNING ` + orgColumns
	o, err = scanOrg(tx.QueryRowContext(ctx, q, append(orgArgs(o), id)...))
	if err != nil {
		return nil, fmt.Errorf("update org %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("update org %s: %w", id, err)
	}
	return o, nil
}

// DeleteOrg implements store.Store. Its clients and its learners'
// progress records go with it in the same statement (ON DELETE CASCADE).
func (s *Store) DeleteOrg(ctx context.Context, id string) error {
	defer s.orgs.invalidate(id)
	defer s.progress.dropOrg(id)
	res, err := s.db.ExecContext(ctx, `DELETE FROM orgs WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete org %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete org %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("delete org %s: %w", id, store.ErrNotFound)
	}
	return nil
}
