package pgstore

import (
	"context"
	"fmt"
	"github.com/lectern-api/lectern/origin/internal/pgretry"

	"github.com/lectern-api/lectern/origin/store"
)

// sqlitestore/clients.go is this file's twin, in SQLite's dialect over
// database/sql: the package comment says why they stay two.

// CreateClient implements store.Store. The foreign key on org_id makes a
// client of a missing organisation ErrNotFound; the foreign key's lock
// holds the organisation row until the commit, so the generation read
// after the insert is its organisation's.
func (s *Store) CreateClient(ctx context.Context, c *store.Client) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	_, err = tx.Exec(ctx, `INSERT INTO clients
		(id, org_id, secret_hash, scopes, grant_types, redirect_uris, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.ID, c.OrgID, c.SecretHash, list(c.Scopes), list(c.GrantTypes), list(c.RedirectURIs), c.CreatedAt)
	if err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, mapErr(err))
	}
	var gen string
	if err := tx.QueryRow(ctx, `SELECT generation FROM orgs WHERE id = $1`, c.OrgID).Scan(&gen); err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, mapErr(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, err)
	}
	c.OrgGeneration = gen
	return nil
}

// GetClient implements store.Store. The client and its organisation's
// generation are read in one statement (one snapshot).
func (s *Store) GetClient(ctx context.Context, id string) (*store.Client, error) {
	var c store.Client
	_, err := pgretry.Read(ctx, s.pool.Reset, func() (struct{}, error) {
		return struct{}{}, s.pool.QueryRow(ctx, `SELECT
		c.id, c.org_id, c.secret_hash, c.scopes, c.grant_types, c.redirect_uris, c.created_at, o.generation
		FROM clients c JOIN orgs o ON o.id = c.org_id WHERE c.id = $1`, id).
			Scan(&c.ID, &c.OrgID, &c.SecretHash, &c.Scopes, &c.GrantTypes, &c.RedirectURIs, &c.CreatedAt, &c.OrgGeneration)
	})
	if err != nil {
		return nil, fmt.Errorf("get client %s: %w", id, mapErr(err))
	}
	return &c, nil
}

// ReplaceClientSecretHash replaces the stored secret hash of client id
// with newHash, only while it is still oldHash (the identity provider's
// upgrade of a hash at a successful check, origin/idp): when the client
// is gone or its hash has changed since it was read (another origin
// upgraded it first), nothing is written and the error is
// store.ErrNotFound.
func (s *Store) ReplaceClientSecretHash(ctx context.Context, id string, oldHash, newHash []byte) error {
	tag, err := s.pool.Exec(ctx, `UPDATE clients SET secret_hash = $1 WHERE id = $2 AND secret_hash = $3`,
		newHash, id, oldHash)
	if err != nil {
		return fmt.Errorf("replace secret hash of client %s: %w", id, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("replace secret hash of client %s: %w", id, store.ErrNotFound)
	}
	return nil
}
