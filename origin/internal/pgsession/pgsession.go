// Package pgsession holds the session settings every PostgreSQL
// connection of an origin runs with, so that one stalled origin costs the
// others on the same database a short, stated delay and no more (issue
// #14): a peer paused (SIGSTOP) or cut off inside a transaction holds its
// row locks until PostgreSQL ends its session, and without these settings
// that is when TCP keepalive gives up, minutes later.
package pgsession

import (
	"strconv"
	"time"
)

// The bounds, as PostgreSQL settings. A DSN may set one itself as a
// parameter of its own (lock_timeout=5s); these apply where it does not.
// A DSN's options=-c ... does not override them: pgx sends the runtime
// parameters after options.
const (
	// LockTimeout bounds a wait for a lock another session holds; the
	// waiting statement fails (SQLSTATE 55P03) and its transaction is
	// retried or reported.
	LockTimeout = 2 * time.Second
	// IdleInTransaction ends a session that sits inside a transaction
	// without sending anything for this long: a stopped or partitioned
	// peer's locks are released after it.
	IdleInTransaction = 5 * time.Second
	// StatementTimeout bounds one statement.
	StatementTimeout = 10 * time.Second
)

// The meters' connections are bounded tighter (pgmeter): a meter batch's
// statements follow each other at once, so its transaction is idle only
// while its own process is (a pause, SIGSTOP), and a peer's batches wait
// on its row locks. PostgreSQL ends such a session MeterIdleInTransaction
// after its last statement, releasing its locks; a batch waiting on them
// gives up after MeterLockTimeout and is tried again (issue #28: a paused
// origin costs its peers' meter writes well under a second, not 7 s).
const (
	MeterIdleInTransaction = 500 * time.Millisecond
	MeterLockTimeout       = 250 * time.Millisecond
)

// ApplyMeter is Apply with the meters' tighter bounds, keeping any the
// DSN set.
func ApplyMeter(params map[string]string) {
	for k, v := range map[string]string{
		"lock_timeout":                        ms(MeterLockTimeout),
		"idle_in_transaction_session_timeout": ms(MeterIdleInTransaction),
	} {
		if _, ok := params[k]; !ok {
			params[k] = v
		}
	}
	Apply(params)
}

// Params are LockTimeout, IdleInTransaction and StatementTimeout as
// connection runtime parameters (pgconn.Config.RuntimeParams).
func Params() map[string]string {
	return map[string]string{
		"lock_timeout":                        ms(LockTimeout),
		"idle_in_transaction_session_timeout": ms(IdleInTransaction),
		"statement_timeout":                   ms(StatementTimeout),
	}
}

// Apply adds Params to params, keeping any the DSN set.
func Apply(params map[string]string) {
	for k, v := range Params() {
		if _, ok := params[k]; !ok {
			params[k] = v
		}
	}
}

func ms(d time.Duration) string { return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms" }
