package pgstore

import (
	"context"
	"fmt"

	"github.com/lectern-api/lectern/origin/store"
)

// CreateClient implements store.Store. The foreign key on org_id makes a
// client of a missing organisation ErrNotFound.
func (s *Store) CreateClient(ctx context.Context, c *store.Client) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO clients
		(id, org_id, secret_hash, scopes, grant_types, redirect_uris, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.ID, c.OrgID, c.SecretHash, list(c.Scopes), list(c.GrantTypes), list(c.RedirectURIs), c.CreatedAt)
	if err != nil {
		return fmt.Errorf("create client %s: %w", c.ID, mapErr(err))
	}
	return nil
}

// GetClient implements store.Store.
func (s *Store) GetClient(ctx context.Context, id string) (*store.Client, error) {
	var c store.Client
	err := s.pool.QueryRow(ctx, `SELECT
		id, org_id, secret_hash, scopes, grant_types, redirect_uris, created_at
		FROM clients WHERE id = $1`, id).
		Scan(&c.ID, &c.OrgID, &c.SecretHash, &c.Scopes, &c.GrantTypes, &c.RedirectURIs, &c.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("get client %s: %w", id, mapErr(err))
	}
	return &c, nil
}
