package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// pgstore/keys.go is this file's twin, in PostgreSQL's dialect over
// pgx: pgstore's package comment says why they stay two.

// SigningKeys implements store.Store. Keys created in the same
// microsecond come out in kid order, descending.
func (s *Store) SigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT kid, alg, private, created_at
		FROM signing_keys ORDER BY created_at DESC, kid DESC`)
	if err != nil {
		return nil, fmt.Errorf("list signing keys: %w", err)
	}
	defer rows.Close()
	var keys []store.SigningKey
	for rows.Next() {
		var k store.SigningKey
		if err := rows.Scan(&k.KID, &k.Alg, &k.Private, (*stamp)(&k.CreatedAt)); err != nil {
			return nil, fmt.Errorf("list signing keys: %w", err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list signing keys: %w", err)
	}
	return keys, nil
}

// AddSigningKey implements store.Store.
func (s *Store) AddSigningKey(ctx context.Context, k store.SigningKey) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO signing_keys (kid, alg, private, created_at)
		VALUES (?, ?, ?, ?)`, k.KID, k.Alg, k.Private, stamp(k.CreatedAt))
	if err != nil {
		return fmt.Errorf("add signing key %s: %w", k.KID, mapErr(err))
	}
	return nil
}

// ResealSigningKey implements store.Store.
func (s *Store) ResealSigningKey(ctx context.Context, kid string, old, sealed []byte) error {
	res, err := s.db.ExecContext(ctx, `UPDATE signing_keys SET private = ? WHERE kid = ? AND private = ?`,
		sealed, kid, old)
	if err != nil {
		return fmt.Errorf("reseal signing key %s: %w", kid, mapErr(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("reseal signing key %s: %w", kid, err)
	} else if n == 0 {
		return fmt.Errorf("reseal signing key %s: %w", kid, store.ErrNotFound)
	}
	return nil
}

// AddSigningKeyUnlessNewer implements store.Store: one IMMEDIATE
// transaction on the one write connection, so calls take turns.
func (s *Store) AddSigningKeyUnlessNewer(ctx context.Context, k store.SigningKey, since time.Time) (bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("add signing key %s: %w", k.KID, err)
	}
	defer tx.Rollback()
	var newer bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM signing_keys WHERE created_at > ?)`,
		stamp(since)).Scan(&newer); err != nil {
		return false, fmt.Errorf("add signing key %s: %w", k.KID, err)
	}
	if newer {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO signing_keys (kid, alg, private, created_at)
		VALUES (?, ?, ?, ?)`, k.KID, k.Alg, k.Private, stamp(k.CreatedAt)); err != nil {
		return false, fmt.Errorf("add signing key %s: %w", k.KID, mapErr(err))
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("add signing key %s: %w", k.KID, err)
	}
	return true, nil
}
