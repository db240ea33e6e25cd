package pgretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestLost(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"nil", context.Background(), nil, false},
		{"no rows", context.Background(), fmt.Errorf("get org: %w", pgx.ErrNoRows), false},
		{"a store's not found", context.Background(), fmt.Errorf("get org: %w", errors.New("store: not found")), false},
		{"a decoding error", context.Background(), errors.New("can't scan into dest[0]"), false},
		{"reset", context.Background(), fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"network", context.Background(), &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{"unique violation", context.Background(), &pgconn.PgError{Severity: "ERROR", Code: "23505"}, false},
		{"lock timeout", context.Background(), &pgconn.PgError{Severity: "ERROR", Code: "55P03"}, false},
		{"admin shutdown", context.Background(), fmt.Errorf("get org: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}), true},
		{"idle in transaction timeout", context.Background(), &pgconn.PgError{Severity: "FATAL", Code: "25P03"}, true},
		{"socket", context.Background(), fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"caller gone", cancelled, io.ErrUnexpectedEOF, false},
		{"deadline", context.Background(), context.DeadlineExceeded, false},
	} {
		if got := Lost(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: Lost = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Read tries again once, after fresh, and only on a lost connection.
func TestRead(t *testing.T) {
	ctx := context.Background()
	tries, freshened := 0, 0
	fresh := func() { freshened++ }
	v, err := Read(ctx, fresh, func() (int, error) {
		tries++
		if tries == 1 {
			return 0, io.ErrUnexpectedEOF
		}
		return 7, nil
	})
	if v != 7 || err != nil || tries != 2 || freshened != 1 {
		t.Errorf("a lost connection: %d, %v after %d tries, %d fresh; want 7 after 2, 1", v, err, tries, freshened)
	}
	tries = 0
	_, err = Read(ctx, fresh, func() (int, error) { tries++; return 0, io.ErrUnexpectedEOF })
	if tries != 2 || err == nil {
		t.Errorf("lost twice: %d tries, %v; want 2 and the error", tries, err)
	}
	tries = 0
	if _, err := Read(ctx, fresh, func() (int, error) { tries++; return 0, errors.New("store: not found") }); err == nil || tries != 1 {
		t.Errorf("not found: %v after %d tries, want once", err, tries)
	}
	tries = 0
	if _, err := Read(ctx, fresh, func() (int, error) { tries++; return 0, pgx.ErrNoRows }); !errors.Is(err, pgx.ErrNoRows) || tries != 1 {
		t.Errorf("no rows: %v after %d tries, want once", err, tries)
	}
}
