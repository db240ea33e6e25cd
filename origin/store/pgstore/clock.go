package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlitestore/clock.go is this file's twin, in SQLite's dialect over
// database/sql: the package comment says why they stay two.

// TestClockOffset implements store.Store.
func (s *Store) TestClockOffset(ctx context.Context) (time.Duration, error) {
	var ns int64
	err := s.pool.QueryRow(ctx, `SELECT offset_ns FROM test_clock WHERE id = 1`).Scan(&ns)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read test clock: %w", err)
	}
	return time.Duration(ns), nil
}

// MoveTestClock implements store.Store. The row lock of the upsert
// serialises concurrent moves, so two origins' advances add up.
func (s *Store) MoveTestClock(ctx context.Context, add, atLeast time.Duration) (time.Duration, error) {
	if add < 0 || atLeast < 0 {
		return 0, fmt.Errorf("move test clock: negative move (%v, %v)", add, atLeast)
	}
	var ns int64
	err := s.pool.QueryRow(ctx, `INSERT INTO test_clock (id, offset_ns) VALUES (1, GREATEST($1::bigint, $2::bigint))
		ON CONFLICT (id) DO UPDATE SET offset_ns = GREATEST(test_clock.offset_ns + $1::bigint, $2::bigint)
		RETURNING offset_ns`, int64(add), int64(atLeast)).Scan(&ns)
	if err != nil {
		return 0, fmt.Errorf("move test clock: %w", err)
	}
	return time.Duration(ns), nil
}
