package pgstore

import (
	"context"
	"fmt"
	"github.com/lectern-api/lectern/origin/internal/pgretry"

	"github.com/jackc/pgx/v5"
	"github.com/lectern-api/lectern/origin/store"
)

// sqlitestore/orgs.go is this file's twin, in SQLite's dialect over
// database/sql: the package comment says why they stay two.

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

// orgPlaceholders follow $1, which is the id.
const orgPlaceholders = `$2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18`

func orgArgs(o *store.Org) []any {
	return []any{o.ID,
		o.Name, o.Tier, o.Status, list(o.Grants),
		o.Quota.Calls, o.Quota.Downloads, o.Quota.Exports, o.Quota.TestprepItems,
		o.RateLimits.CallsPerHour, o.RateLimits.LessonReadsPerHour, o.RateLimits.URLMintsPerHour,
		o.EclaVersion, o.RequiredEclaVersion, o.RenewsAt, o.LongURLs,
		o.CreatedAt, o.UpdatedAt,
	}
}

func scanOrg(row pgx.Row) (*store.Org, error) {
	var o store.Org
	err := row.Scan(&o.ID,
		&o.Name, &o.Tier, &o.Status, &o.Grants,
		&o.Quota.Calls, &o.Quota.Downloads, &o.Quota.Exports, &o.Quota.TestprepItems,
		&o.RateLimits.CallsPerHour, &o.RateLimits.LessonReadsPerHour, &o.RateLimits.URLMintsPerHour,
		&o.EclaVersion, &o.RequiredEclaVersion, &o.RenewsAt, &o.LongURLs,
		&o.CreatedAt, &o.UpdatedAt, &o.Generation)
	if err != nil {
		return nil, mapErr(err)
	}
	return &o, nil
}

// CreateOrg implements store.Store.
func (s *Store) CreateOrg(ctx context.Context, o *store.Org) error {
	gen := store.NewGeneration()
	q := `INSERT INTO orgs (` + orgColumns + `) VALUES ($1, ` + orgPlaceholders + `, $19)`
	if _, err := s.pool.Exec(ctx, q, append(orgArgs(o), gen)...); err != nil {
		return fmt.Errorf("create org %s: %w", o.ID, mapErr(err))
	}
	o.Generation = gen
	return nil
}

// GetOrg implements store.Store.
func (s *Store) GetOrg(ctx context.Context, id string) (*store.Org, error) {
	o, err := pgretry.Read(ctx, s.pool.Reset, func() (*store.Org, error) {
		return scanOrg(s.pool.QueryRow(ctx, `SELECT `+orgColumns+` FROM orgs WHERE id = $1`, id))
	})
	if err != nil {
		return nil, fmt.Errorf("get org %s: %w", id, err)
	}
	return o, nil
}

// OrgIDs implements store.Store. COLLATE "C" orders by bytes, whatever
// the database's collation.
func (s *Store) OrgIDs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM orgs ORDER BY id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	return ids, nil
}

// UpdateOrg implements store.Store. SELECT ... FOR UPDATE holds the row
// from the read to the commit, so no concurrent update is lost. fn's
// error is returned as is, unwrapped; fn cannot rename the organisation
// (a changed ID is ignored).
func (s *Store) UpdateOrg(ctx context.Context, id string, fn func(*store.Org) error) (*store.Org, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("update org %s: %w", id, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	o, err := scanOrg(tx.QueryRow(ctx, `SELECT `+orgColumns+` FROM orgs WHERE id = $1 FOR UPDATE`, id))
	if err != nil {
		return nil, fmt.Errorf("update org %s: %w", id, err)
	}
	if err := fn(o); err != nil {
		return nil, err
	}
	o.ID = id
	// RETURNING gives back what was stored (UTC, microseconds), the same
	// as a GetOrg after it.
	q := `UPDATE orgs SET (` + orgFields + `) = (` + orgPlaceholders + `) WHERE id = $1
		RETURNING ` + orgColumns
	if o, err = scanOrg(tx.QueryRow(ctx, q, orgArgs(o)...)); err != nil {
		return nil, fmt.Errorf("update org %s: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("update org %s: %w", id, err)
	}
	return o, nil
}

// DeleteOrg implements store.Store. Its clients and its learners'
// progress records go with it in the same statement (ON DELETE CASCADE).
func (s *Store) DeleteOrg(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM orgs WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete org %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete org %s: %w", id, store.ErrNotFound)
	}
	return nil
}
