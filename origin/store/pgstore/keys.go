package pgstore

import (
	"context"
	"fmt"
	"github.com/lectern-api/lectern/origin/internal/pgretry"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lectern-api/lectern/origin/internal/pgmig"
	"github.com/lectern-api/lectern/origin/store"
)

// sqlitestore/keys.go is this file's twin, in SQLite's dialect over
// database/sql: the package comment says why they stay two.

// SigningKeys implements store.Store. Keys created in the same
// microsecond come out in kid order, descending.
func (s *Store) SigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	keys, err := pgretry.Read(ctx, s.pool.Reset, func() ([]store.SigningKey, error) {
		rows, _ := s.pool.Query(ctx, `SELECT kid, alg, private, created_at
		FROM signing_keys ORDER BY created_at DESC, kid DESC`)
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SigningKey, error) {
			var k store.SigningKey
			err := row.Scan(&k.KID, &k.Alg, &k.Private, &k.CreatedAt)
			return k, err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list signing keys: %w", err)
	}
	return keys, nil
}

// AddSigningKey implements store.Store.
func (s *Store) AddSigningKey(ctx context.Context, k store.SigningKey) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO signing_keys (kid, alg, private, created_at)
		VALUES ($1, $2, $3, $4)`, k.KID, k.Alg, k.Private, k.CreatedAt)
	if err != nil {
		return fmt.Errorf("add signing key %s: %w", k.KID, mapErr(err))
	}
	return nil
}

// ResealSigningKey implements store.Store.
func (s *Store) ResealSigningKey(ctx context.Context, kid string, old, sealed []byte) error {
	tag, err := s.pool.Exec(ctx, `UPDATE signing_keys SET private = $1 WHERE kid = $2 AND private = $3`,
		sealed, kid, old)
	if err != nil {
		return fmt.Errorf("reseal signing key %s: %w", kid, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("reseal signing key %s: %w", kid, store.ErrNotFound)
	}
	return nil
}

// AddSigningKeyUnlessNewer implements store.Store. The table lock (SHARE
// ROW EXCLUSIVE conflicts with itself and with writes, not with reads)
// makes concurrent calls take turns; each then reads with a snapshot taken
// after the previous one committed. A table lock rather than an advisory
// one: it is confined to this schema's table, as the store is.
func (s *Store) AddSigningKeyUnlessNewer(ctx context.Context, k store.SigningKey, since time.Time) (bool, error) {
	added := false
	// A peer holding the lock longer than lock_timeout (adding its own
	// key, or stopped inside that transaction until
	// idle_in_transaction_session_timeout ends it) is waited for, logged
	// and bounded (pgmig.Retry), not an error.
	err := pgmig.Retry(ctx, "the signing-key table", func() error {
		added = false
		return s.addKeyOnce(ctx, k, since, &added)
	})
	if err != nil {
		return false, fmt.Errorf("add signing key %s: %w", k.KID, mapErr(err))
	}
	return added, nil
}

func (s *Store) addKeyOnce(ctx context.Context, k store.SigningKey, since time.Time, added *bool) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE signing_keys IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var newer bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM signing_keys WHERE created_at > $1)`,
			since).Scan(&newer); err != nil {
			return err
		}
		if newer {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO signing_keys (kid, alg, private, created_at)
			VALUES ($1, $2, $3, $4)`, k.KID, k.Alg, k.Private, k.CreatedAt); err != nil {
			return err
		}
		*added = true
		return nil
	})
}
