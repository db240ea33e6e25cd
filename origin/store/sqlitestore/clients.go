package sqlitestore

import (
	"context"
	"fmt"

	"github.com/lectern-api/lectern/origin/store"
)

// pgstore/clients.go is this file's twin, in PostgreSQL's dialect over
// pgx: pgstore's package comment says why they stay two.

// CreateClient implements store.Store. The foreign key on org_id makes a
// client of a missing organisation ErrNotFound; the organisation's
// generation is read in the same transaction.
func (s *Store) CreateClient(ctx context.Context, c *store.Client) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `INSERT INTO clients
		(id, org_id, secret_hash, scopes, grant_types, redirect_uris, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.OrgID, c.SecretHash, list(c.Scopes), list(c.GrantTypes), list(c.RedirectURIs), stamp(c.CreatedAt))
	if err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, mapErr(err))
	}
	var gen string
	if err := tx.QueryRowContext(ctx, `SELECT generation FROM orgs WHERE id = ?`, c.OrgID).Scan(&gen); err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, mapErr(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, err)
	}
	c.OrgGeneration = gen
	return nil
}

// GetClient implements store.Store. The client and its organisation's
// generation are read in one statement, so they are of one instant: a
// client read together with a later organisation of the same id cannot
// be.
func (s *Store) GetClient(ctx context.Context, id string) (*store.Client, error) {
	var c store.Client
	err := s.rdb.QueryRowContext(ctx, `SELECT
		c.id, c.org_id, c.secret_hash, c.scopes, c.grant_types, c.redirect_uris, c.created_at, o.generation
		FROM clients c JOIN orgs o ON o.id = c.org_id WHERE c.id = ?`, id).
		Scan(&c.ID, &c.OrgID, &c.SecretHash, (*list)(&c.Scopes), (*list)(&c.GrantTypes), (*list)(&c.RedirectURIs), (*stamp)(&c.CreatedAt), &c.OrgGeneration)
	if err != nil {
		return nil, fmt.Errorf("get client %s: %w", id, mapErr(err))
	}
	return &c, nil
}

// ReplaceClientSecretHash replaces the stored secret hash of client id
// with newHash, only while it is still oldHash (the identity provider's
// upgrade of a hash at a successful check, origin/idp): when the client
// is gone or its hash has changed since it was read, nothing is written
// and the error is store.ErrNotFound.
func (s *Store) ReplaceClientSecretHash(ctx context.Context, id string, oldHash, newHash []byte) error {
	res, err := s.db.ExecContext(ctx, `UPDATE clients SET secret_hash = ? WHERE id = ? AND secret_hash = ?`,
		newHash, id, oldHash)
	if err != nil {
		return fmt.Errorf("replace secret hash of client %s: %w", id, mapErr(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("replace secret hash of client %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("replace secret hash of client %s: %w", id, store.ErrNotFound)
	}
	return nil
}
