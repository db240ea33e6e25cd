package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// pgstore/codes.go is this file's twin, in PostgreSQL's dialect over
// pgx: pgstore's package comment says why they stay two.

// SaveAuthCode implements store.Store.
func (s *Store) SaveAuthCode(ctx context.Context, c store.AuthCode) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO auth_codes
		(code_hash, client_id, redirect_uri, scope, challenge, learner, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.CodeHash, c.ClientID, c.RedirectURI, c.Scope, c.Challenge, c.Learner, stamp(c.ExpiresAt))
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
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("take auth code: %w", err)
	}
	defer tx.Rollback()
	var c store.AuthCode
	err = tx.QueryRowContext(ctx, `DELETE FROM auth_codes WHERE code_hash = ?
		RETURNING code_hash, client_id, redirect_uri, scope, challenge, learner, expires_at`, codeHash).
		Scan(&c.CodeHash, &c.ClientID, &c.RedirectURI, &c.Scope, &c.Challenge, &c.Learner, (*stamp)(&c.ExpiresAt))
	if err != nil {
		return nil, fmt.Errorf("take auth code: %w", mapErr(err))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM auth_codes WHERE expires_at <= ?`, stamp(now)); err != nil {
		return nil, fmt.Errorf("take auth code: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("take auth code: %w", err)
	}
	if !now.Before(c.ExpiresAt) {
		return nil, fmt.Errorf("take auth code: expired: %w", store.ErrNotFound)
	}
	return &c, nil
}

// PruneAuthCodes implements store.Store.
func (s *Store) PruneAuthCodes(ctx context.Context, clientID string, now time.Time, keep int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("prune auth codes: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM auth_codes WHERE expires_at <= ?`, stamp(now)); err != nil {
		return fmt.Errorf("prune auth codes: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM auth_codes WHERE code_hash IN (
		SELECT code_hash FROM auth_codes WHERE client_id = ?
		ORDER BY expires_at DESC, code_hash LIMIT -1 OFFSET ?)`, clientID, max(keep, 0)); err != nil {
		return fmt.Errorf("prune auth codes: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("prune auth codes: %w", err)
	}
	return nil
}
