// Package batch is what the meter backends (sqlitemeter, pgmeter) share:
// the validation of ops, their evaluation against the counters, the
// records of lessons read and the enumeration alarms one transaction read
// (State), the transaction itself (Commit), which also hands each passing
// op the ids of the ledger rows it wrote, and the group committer that
// batches concurrent ops into it (Committer).
//
// A backend supplies only its dialect: a Backend that begins transactions
// and says which failures to retry, and a Tx that loads a State's rows,
// locking those its ops may change, and saves what they changed.
package batch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lectern-api/lectern/origin/meter"
)

// MaxLesson bounds the length of Read.Lesson: lesson ids are
// "<tier>/<slug>/<classNum>", a few dozen bytes.
const MaxLesson = 256

// Timeout bounds one batch transaction, lock waits and retries included.
// It is well above what a stalled peer may cost a batch on PostgreSQL
// (pgmeter: pgsession.IdleInTransaction + pgsession.LockTimeout, 7 s):
// that bound, not this one, is what the others wait at most; this one
// only stops a batch against a database that does not answer at all.
const Timeout = 30 * time.Second

// Validate rejects an op that no store could apply, before it is queued,
// so that one bad op never fails the batch it would have shared.
func Validate(op meter.Op) error {
	if op.Org == "" {
		return errors.New("meter op: empty org")
	}
	for _, stage := range op.Stages {
		for _, st := range stage {
			if int(st.Meter) >= numMeters {
				return fmt.Errorf("meter op: unknown meter %d", st.Meter)
			}
			if st.N < 0 {
				return fmt.Errorf("meter op: negative N %d on %s", st.N, st.Meter)
			}
			if st.Refund && (st.Limit != nil || st.Force || st.Shorten) {
				return fmt.Errorf("meter op: a refund of %s with a limit, Force or Shorten", st.Meter)
			}
		}
	}
	if r := op.Read; r != nil {
		if r.Lesson == "" || len(r.Lesson) > MaxLesson {
			return fmt.Errorf("meter op: lesson id of %d bytes, want 1 to %d", len(r.Lesson), MaxLesson)
		}
		if r.Granted < 0 {
			return fmt.Errorf("meter op: negative granted lessons %d", r.Granted)
		}
	}
	if op.Once != "" {
		if err := validText("once key", op.Once, meter.MaxOnce); err != nil {
			return fmt.Errorf("meter op: %w", err)
		}
	}
	if op.Unless != "" {
		if err := validText("unless key", op.Unless, meter.MaxOnce); err != nil {
			return fmt.Errorf("meter op: %w", err)
		}
	}
	if len(op.Ledger) > meter.MaxLedger {
		return fmt.Errorf("meter op: %d ledger rows, at most %d", len(op.Ledger), meter.MaxLedger)
	}
	for i, e := range op.Ledger {
		if err := validEntry(e); err != nil {
			return fmt.Errorf("meter op: ledger row %d: %w", i, err)
		}
	}
	return nil
}

// Bounds of a ledger entry's fields, in bytes. Every field is text a
// database stores as is: valid UTF-8 without NUL (PostgreSQL's text
// refuses NUL, and one bad row must not fail the batch it shares).
const (
	MaxTarget = 512 // a media id, or an export's "<tier>/<slug>[/<classNum>]"
	MaxField  = 128 // format, client, contentVersion, request id, key id, a scope
	MaxScopes = 16
)

func validEntry(e meter.Entry) error {
	if e.Kind != meter.KindMedia && e.Kind != meter.KindExport {
		return fmt.Errorf("kind %q, want %q or %q", e.Kind, meter.KindMedia, meter.KindExport)
	}
	if e.Target == "" {
		return errors.New("empty target")
	}
	fields := []struct {
		name, v string
		max     int
	}{
		{"target", e.Target, MaxTarget}, {"format", e.Format, MaxField}, {"client", e.Client, MaxField},
		{"contentVersion", e.ContentVersion, MaxField}, {"request id", e.RequestID, MaxField}, {"key id", e.KeyID, MaxField},
	}
	for _, f := range fields {
		if err := validText(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	if len(e.Scopes) > MaxScopes {
		return fmt.Errorf("%d scopes, at most %d", len(e.Scopes), MaxScopes)
	}
	for _, sc := range e.Scopes {
		if sc == "" || strings.ContainsFunc(sc, unicode.IsSpace) {
			return fmt.Errorf("scope %q: empty or holds white space", sc)
		}
		if err := validText("scope", sc, MaxField); err != nil {
			return err
		}
	}
	return nil
}

func validText(name, v string, max int) error {
	switch {
	case len(v) > max:
		return fmt.Errorf("%s of %d bytes, at most %d", name, len(v), max)
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		return fmt.Errorf("%s is not UTF-8 text without NUL", name)
	}
	return nil
}

// Job is one entry of a batch: an op to apply; with Reinstate, the
// lifting of the enumeration alarm of Op.Org (Op has nothing else then);
// with Grant, a lease to grant (Op is empty); with Reports, lease reports
// to apply at Op.Now (Op has nothing else). A Reinstate job's Result has
// Suspended set when an alarm was in force.
type Job struct {
	Op        meter.Op
	Reinstate bool
	Grant     *meter.LeaseGrant
	Reports   []meter.Report // non-nil for a report job
}

func (j Job) isOp() bool { return !j.Reinstate && j.Grant == nil && j.Reports == nil }

// Outcome is what a job did: an op's (or a Reinstate's) Result, a grant's
// Granted, and Err, a job's own refusal (a grant of an id already
// recorded), which applied nothing of it but not of the other jobs.
type Outcome struct {
	Result  meter.Result
	Granted meter.Granted
	Err     error
}

// Results are the Results of outs.
func Results(outs []Outcome) []meter.Result {
	res := make([]meter.Result, len(outs))
	for i, o := range outs {
		res[i] = o.Result
	}
	return res
}

// Backend is a database a batch runs in.
type Backend interface {
	// Begin begins a read-write transaction.
	Begin(ctx context.Context) (Tx, error)
	// Retry reports whether a batch whose attempt-th try (from 1) failed
	// with err is tried again in a new transaction. It must not retry a
	// failure DuringCommit.
	Retry(err error, attempt int) bool
}

// Tx is one batch transaction.
type Tx interface {
	// Leases reads, first, the leases named by s.LeaseIDs() (AddLease):
	// what they name joins the batch (the orgs, and the periods of the
	// leases its reports name), so Load locks and reads them. It needs
	// no lock: a lease's org and periods never change, and Load reads
	// again what may have (pgmeter), or nothing else writes (sqlitemeter).
	// It may read only s.Reported() when Load reads the others.
	Leases(ctx context.Context, s *State) error
	// Load reads into s what its jobs see, and holds until the
	// transaction ends the locks on what they may change, so that
	// evaluating them against what it read is exact: the enumeration
	// alarm of every org in s.Orgs (SetAlarm), the counters of every
	// period in s.Periods (Set; locked: s.Stepped), and for every day in
	// s.Days its count of lessons read (SetDayCount; locked) and which of
	// s.Lessons are in its record (SetRead). The alarms are read once
	// their locks are held, so a batch sees every alarm a batch committed
	// before it. Rows not stored need not be set. Then, under those
	// locks, the leases of every org of s.LeaseOrgs() not closed whose
	// Settle is after s.Floor() (AddLease; and of s.LeaseIDs() again if
	// Leases read them before the locks), and the epochs of
	// s.EpochOrgs() and the global one (SetEpoch), which a BumpEpoch
	// must not change before the transaction ends (pgmeter: FOR SHARE).
	// Under the alarms' locks too, the records of the s.OnceKeys()
	// already applied (SetOnce): an op of a key is only ever applied
	// while its org's alarm row is locked, so no two batches both miss it.
	Load(ctx context.Context, s *State) error
	// Save writes back what the jobs changed (s.Changed, s.ChangedDays,
	// s.ChangedAlarms), and inserts the ledger rows of the passing ops
	// (s.Ledger), in their order, setting each row's ID: ascending in
	// that order, and above every row of a transaction that committed
	// before this one (so ids follow commit order across every Store of
	// the database); and it inserts s.NewLeases() and writes the Used and
	// Closed of s.ChangedLeases(); and it inserts s.NewOnce(), after the
	// ledger rows, whose ids they name (Once.Ledger).
	Save(ctx context.Context, s *State) error
	Commit(ctx context.Context) error
	// Rollback ends the transaction if Commit has not; it is deferred
	// after Begin, so it is also called after Commit.
	Rollback(ctx context.Context) error
}

// SaveCommitter is a Tx whose writes and COMMIT go to the database
// together (pgmeter: one round trip instead of two). Commit then uses
// SaveCommit in place of Save and Commit.
type SaveCommitter interface {
	// SaveCommit does what Save does, then commits. An error that may
	// have come once COMMIT was sent (so the transaction may be
	// applied) is marked by InCommit; any other error means the database
	// applied nothing of the transaction.
	SaveCommit(ctx context.Context, s *State) error
}

// InCommit marks err as a failure during COMMIT (DuringCommit): the
// transaction's outcome is unknown, and it is not tried again.
func InCommit(err error) error { return &commitError{err} }

// commitError marks a failure of COMMIT itself, whose outcome may be
// unknown.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// DuringCommit reports whether err is a failure of COMMIT itself: the
// transaction may have been applied, so a Backend must not retry it. Any
// other failure of a batch came before COMMIT was sent, and the database
// applied nothing of it.
func DuringCommit(err error) bool {
	var ce *commitError
	return errors.As(err, &ce)
}

// Commit applies jobs, in order, in one transaction of b, and commits it;
// on a failure that b retries it starts over in a new transaction, until
// ctx is done. On error nothing was applied (but see pgmeter on a lost
// connection during COMMIT).
func Commit(ctx context.Context, b Backend, jobs []Job) ([]Outcome, error) {
	for attempt := 1; ; attempt++ {
		res, err := commitOnce(ctx, b, jobs)
		if err != nil && ctx.Err() == nil && b.Retry(err, attempt) {
			continue
		}
		return res, err
	}
}

func commitOnce(ctx context.Context, b Backend, jobs []Job) ([]Outcome, error) {
	tx, err := b.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	defer tx.Rollback(ctx)
	s := newState(jobs)
	if len(s.LeaseIDs()) > 0 {
		if err := tx.Leases(ctx, s); err != nil {
			return nil, fmt.Errorf("meter batch: %w", err)
		}
		s.joinReported()
	}
	if err := tx.Load(ctx, s); err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	results := make([]Outcome, len(jobs))
	for i, j := range jobs {
		results[i] = s.apply(j)
		if !j.isOp() || results[i].Err != nil {
			continue
		}
		if r := results[i].Result; r.Refused == nil && !r.Suspended && !r.Duplicate && !r.Excluded && len(j.Op.Ledger) > 0 {
			s.addLedger(i, j.Op)
		}
		s.recordOnce(j.Op, results[i].Result)
	}
	sc, committed := tx.(SaveCommitter)
	if committed {
		// Marked by the backend when it may have come during COMMIT.
		if err := sc.SaveCommit(ctx, s); err != nil {
			return nil, fmt.Errorf("meter batch: %w", err)
		}
	} else if err := tx.Save(ctx, s); err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	for _, r := range s.ledger {
		if r.ID <= 0 {
			err := errors.New("a ledger row was not numbered")
			if committed {
				// Too late to roll back: the ops are applied, but
				// their answers cannot be told.
				err = &commitError{err}
			}
			return nil, fmt.Errorf("meter batch: %w", err)
		}
		results[r.job].Result.LedgerIDs = append(results[r.job].Result.LedgerIDs, r.ID)
	}
	s.numberDuplicates(results)
	if committed {
		return results, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("meter batch: %w", &commitError{err})
	}
	return results, nil
}
