package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// pgstore/clock.go is this file's twin, in PostgreSQL's dialect over
// pgx: pgstore's package comment says why they stay two.

// TestClockOffset implements store.Store.
func (s *Store) TestClockOffset(ctx context.Context) (time.Duration, error) {
	var ns int64
	err := s.rdb.QueryRowContext(ctx, `SELECT offset_ns FROM test_clock WHERE id = 1`).Scan(&ns)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read test clock: %w", err)
	}
	return time.Duration(ns), nil
}

// MoveTestClock implements store.Store.
func (s *Store) MoveTestClock(ctx context.Context, add, atLeast time.Duration) (time.Duration, error) {
	if add < 0 || atLeast < 0 {
		return 0, fmt.Errorf("move test clock: negative move (%v, %v)", add, atLeast)
	}
	var ns int64
	err := s.db.QueryRowContext(ctx, `INSERT INTO test_clock (id, offset_ns) VALUES (1, max(?1, ?2))
		ON CONFLICT (id) DO UPDATE SET offset_ns = max(test_clock.offset_ns + ?1, ?2)
		RETURNING offset_ns`, int64(add), int64(atLeast)).Scan(&ns)
	if err != nil {
		return 0, fmt.Errorf("move test clock: %w", err)
	}
	return time.Duration(ns), nil
}
