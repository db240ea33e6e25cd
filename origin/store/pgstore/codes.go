package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lectern-api/lectern/origin/store"
)

// sqlitestore/codes.go is this file's twin, in SQLite's dialect over
// database/sql: the package comment says why they stay two.

// SaveAuthCode implements store.Store.
func (s *Store) SaveAuthCode(ctx context.Context, c store.AuthCode) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO auth_codes
		(code_hash, client_id, redirect_uri, scope, challenge, learner, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		c.CodeHash, c.ClientID, c.RedirectURI, c.Scope, c.Challenge, c.Learner, c.ExpiresAt)
	if err != nil {
		return fmt.Errorf("save auth code: %w", mapErr(err))
	}
	return nil
}

// TakeAuthCode implements store.Store. The code is deleted by the same
// statement that reads it, so of concurrent takers exactly one gets it
// (RFC 6749 §4.1.2: a code is used once). A code is valid while now is
// before ExpiresAt; the transaction also sweeps the codes expired at now.
func (s *Store) TakeAuthCode(ctx context.Context, codeHash string, now time.Time) (*store.AuthCode, error) {
	var c store.AuthCode
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `DELETE FROM auth_codes WHERE code_hash = $1
			RETURNING code_hash, client_id, redirect_uri, scope, challenge, learner, expires_at`, codeHash).
			Scan(&c.CodeHash, &c.ClientID, &c.RedirectURI, &c.Scope, &c.Challenge, &c.Learner, &c.ExpiresAt)
		if err != nil {
			return mapErr(err)
		}
		_, err = tx.Exec(ctx, `DELETE FROM auth_codes WHERE expires_at <= $1`, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("take auth code: %w", err)
	}
	if !now.Before(c.ExpiresAt) {
		return nil, fmt.Errorf("take auth code: expired: %w", store.ErrNotFound)
	}
	return &c, nil
}

// PruneAuthCodes implements store.Store. Of concurrent prunes and saves
// for one client, each prune sees the codes committed before it: the
// bound may be passed by the saves in flight, and the next prune
// restores it.
func (s *Store) PruneAuthCodes(ctx context.Context, clientID string, now time.Time, keep int) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM auth_codes WHERE expires_at <= $1`, now); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM auth_codes WHERE code_hash IN (
			SELECT code_hash FROM auth_codes WHERE client_id = $1
			ORDER BY expires_at DESC, code_hash OFFSET $2)`, clientID, max(keep, 0))
		return err
	})
	if err != nil {
		return fmt.Errorf("prune auth codes: %w", err)
	}
	return nil
}
