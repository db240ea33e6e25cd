// Package pgretry decides when a PostgreSQL statement that failed may be
// sent again on another connection: when its connection was lost (the
// backend was killed, the server restarted, the socket reset) and the
// statement cannot have been applied, because it only reads. A read is
// retried once, on a fresh connection: a pool holding several
// connections that a restart killed would otherwise answer one error
// (a 500) per connection.
package pgretry

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Lost reports whether err is the loss of its connection, and nothing
// else: the server's own FATAL errors, after which it closes the session
// (class 57P: admin_shutdown, crash_shutdown, cannot_connect_now; an idle
// transaction timed out, 25P03), the socket closed or reset under the
// statement, or a network failure. An error the server answered about
// the statement (a constraint, a lock timeout), no rows, a store's own
// error (not found), a decoding error or the caller's context ending is
// not.
func Lost(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Severity == "FATAL" || strings.HasPrefix(pe.Code, "57P")
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

// Read runs read, and once more when its first try lost its connection,
// after fresh has closed the pool's idle connections (what killed one
// backend, a restart, likely killed them all, and the retry must not take
// another dead one): read must only read (it is sent again whatever the
// first try did).
func Read[T any](ctx context.Context, fresh func(), read func() (T, error)) (T, error) {
	v, err := read()
	if Lost(ctx, err) {
		fresh()
		return read()
	}
	return v, err
}
