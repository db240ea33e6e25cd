package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

// The deployment's corpus (issue #14; docs/operations.md, Corpus reload).
// The database records the directory the last reload loaded and the
// contentVersion it held (store.CorpusRecord). A reload through any
// origin's admin API records it; every origin reads the record every
// corpusSync and, when it names another version than its own, loads that
// directory itself. A restart serves the recorded corpus, and the first
// origin on a new database records its LECTERN_CORPUS, so origins on one
// database converge on one version whatever LECTERN_CORPUS each was given.

// corpusSync is how often an origin reads the record (config.CorpusSync):
// one single-row read, so that origins converge within seconds.
const corpusSync = 2 * time.Second

// corpusRetry is how long an origin waits before it tries again a record
// it could not load (a directory missing on its machine, or holding
// another version there): a full corpus takes seconds and a corpus's
// memory to load, so not on every read.
const corpusRetry = time.Minute

// recordTimeout bounds the write of a reload's record. It runs whether or
// not the admin client still waits: a reload that loaded completes.
const recordTimeout = 10 * time.Second

// reloadRetryAfter is the Retry-After of a reload refused because another
// runs: a full corpus loads and builds in seconds.
const reloadRetryAfter = 5

// corpusFailure is a record this origin failed to load, and when.
type corpusFailure struct {
	rec store.CorpusRecord
	at  time.Time
}

// is reports whether f is about rec.
func (f corpusFailure) is(rec *store.CorpusRecord) bool {
	return !f.at.IsZero() && f.rec.Dir == rec.Dir && f.rec.ContentVersion == rec.ContentVersion && f.rec.LoadedAt.Equal(rec.LoadedAt)
}

// openCorpus loads the corpus the origin starts with: the recorded one
// when there is a record and it loads here with its version, else the
// configured one (LECTERN_CORPUS, generated when missing). On a database
// with no record the configured one is recorded, unless another origin
// recorded its own first (followCorpus then converges on that).
func (st *stack) openCorpus(ctx context.Context, configured string, stdout io.Writer) error {
	rec, err := st.store.Corpus(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	var recErr error
	if rec != nil {
		ct, err := buildCorpus(rec.Dir, rec.ContentVersion)
		if err == nil {
			st.content.Store(ct)
			return nil
		}
		recErr = err
		st.failed = corpusFailure{*rec, time.Now()}
	}
	c, err := loadCorpus(configured, stdout)
	if err != nil {
		return err
	}
	ct, err := server.Build(c)
	if err != nil {
		return err
	}
	st.content.Store(ct)
	switch {
	case rec == nil:
		first := store.CorpusRecord{Dir: configured, ContentVersion: c.ContentVersion, LoadedAt: time.Now()}
		if err := st.store.RecordFirstCorpus(ctx, first); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	case c.ContentVersion == rec.ContentVersion:
		st.log.Warn("origin: the recorded corpus directory did not load here; LECTERN_CORPUS holds the same contentVersion",
			"dir", rec.Dir, "contentVersion", rec.ContentVersion, "err", recErr)
	default:
		st.log.Error("origin: the deployment's corpus did not load here; serving LECTERN_CORPUS until it does",
			"dir", rec.Dir, "contentVersion", rec.ContentVersion, "serving", c.ContentVersion, "err", recErr, "retryIn", corpusRetry)
	}
	return nil
}

// loadCorpus loads the corpus in dir, generating the deterministic one
// first when dir does not exist (make run on a fresh machine).
func loadCorpus(dir string, stdout io.Writer) (*corpus.Corpus, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stdout, "generating the corpus into %s ...\n", dir)
		sum, err := gen.Write(dir, gen.Options{Seed: 1})
		if err != nil {
			return nil, fmt.Errorf("generate corpus: %w", err)
		}
		fmt.Fprintf(stdout, "corpus %s: %d subjects, %d classes, %d media\n", sum.ContentVersion, sum.Subjects, sum.Classes, sum.Media)
	}
	c, err := corpus.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load corpus: %w", err)
	}
	return c, nil
}

// buildCorpus loads and builds the corpus in dir, which must hold
// contentVersion want unless want is "". Nothing is generated.
func buildCorpus(dir, want string) (*server.Content, error) {
	c, err := corpus.Load(dir)
	if err != nil {
		return nil, err
	}
	if want != "" && c.ContentVersion != want {
		return nil, fmt.Errorf("%s holds contentVersion %s here, not %s", dir, c.ContentVersion, want)
	}
	return server.Build(c)
}

// reload swaps in the corpus of dir and records it as the deployment's,
// so that every origin on the database follows; requests in flight finish
// on the corpus they began with. While one reload runs (or an origin
// follows the record), another is refused with 409 WRITE_CONFLICT and
// Retry-After (docs/decisions/admin-api-and-the-licence-envelope.md): it is not queued, so a
// client that gives up leaves nothing waiting.
//
// The record is written before the swap: a reload that cannot record
// changes nothing, where a swap without a record would be undone by this
// origin's next read of the record.
func (st *stack) reload(ctx context.Context, dir string) (string, error) {
	if !st.reloading.TryLock() {
		return "", &apierr.Error{Code: apierr.WriteConflict, RetryAfter: apierr.Int(reloadRetryAfter),
			Message: "A corpus reload is already running; nothing was changed. Retry once it has ended."}
	}
	defer st.reloading.Unlock()
	st.liftMemoryLimit()
	ct, err := buildCorpus(dir, "")
	if err != nil {
		st.settleMemory()
		return "", err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	rec := store.CorpusRecord{Dir: dir, ContentVersion: ct.ContentVersion, LoadedAt: time.Now()}
	if err := st.store.RecordCorpus(rctx, rec); err != nil {
		ct = nil // garbage, for settleMemory
		st.settleMemory()
		st.log.Error("origin: a reloaded corpus could not be recorded; nothing changed", "dir", dir,
			"contentVersion", rec.ContentVersion, "err", err)
		return "", apierr.New(apierr.Internal, "The corpus in "+dir+" loaded (contentVersion "+rec.ContentVersion+
			") but could not be recorded in the database, so nothing changed; the cause is in the origin's log. Retry.")
	}
	st.failed = corpusFailure{}
	st.content.Store(ct)
	st.swapped()
	if err := st.revokeAll(ctx); err != nil {
		return "", apierr.New(apierr.Internal, "The corpus in "+dir+" (contentVersion "+rec.ContentVersion+
			") is served and recorded, but the edge's leases on the previous one could not be revoked; they end within "+
			st.leases.TTL().String()+". The cause is in the origin's log.")
	}
	return ct.ContentVersion, nil
}

// revokeAll takes back every edge lease once a corpus is swapped in:
// each names the content version it was granted under, and the edge
// must not answer a 304 of the previous version after the reload is
// acknowledged (docs/edge.md, Leases).
func (st *stack) revokeAll(ctx context.Context) error {
	if st.leases == nil {
		return nil
	}
	err := st.leases.RevokeAll(context.WithoutCancel(ctx))
	if err != nil {
		st.log.Error("origin: the edge's leases were not revoked after a corpus swap", "err", err)
	}
	return err
}

// followCorpus reads the deployment's corpus record every interval (zero:
// corpusSync) until Close.
func (st *stack) followCorpus(every time.Duration) {
	if every <= 0 {
		every = corpusSync
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				st.syncCorpus(ctx)
			}
		}
	}()
	st.stopFollow = func() { cancel(); <-done }
}

// syncCorpus loads the recorded corpus when it is not the one served. The
// record is read without the reload lock, so that following never refuses
// an operator's reload for a mere read; the lock is taken to load, and
// the record read again under it, since a reload of this origin may have
// ended in between. It skips its turn while a reload runs, and a record
// that failed to load here until corpusRetry has passed; a failure is
// logged and the origin keeps serving its corpus.
func (st *stack) syncCorpus(ctx context.Context) {
	if rec := st.corpusRecord(ctx); rec == nil || rec.ContentVersion == st.content.Load().ContentVersion {
		return
	}
	if !st.reloading.TryLock() {
		return
	}
	defer st.reloading.Unlock()
	rec := st.corpusRecord(ctx)
	if rec == nil {
		return
	}
	serving := st.content.Load().ContentVersion
	if rec.ContentVersion == serving || st.failed.is(rec) && time.Since(st.failed.at) < corpusRetry {
		return
	}
	st.liftMemoryLimit()
	ct, err := buildCorpus(rec.Dir, rec.ContentVersion)
	if err != nil {
		st.settleMemory()
		st.failed = corpusFailure{*rec, time.Now()}
		st.log.Error("origin: the deployment's corpus did not load here; still serving the current one",
			"dir", rec.Dir, "contentVersion", rec.ContentVersion, "serving", serving, "err", err, "retryIn", corpusRetry)
		return
	}
	st.failed = corpusFailure{}
	st.content.Store(ct)
	st.swapped()
	st.revokeAll(ctx)
	st.log.Info("origin: now serving the deployment's corpus", "dir", rec.Dir, "contentVersion", rec.ContentVersion,
		"was", serving, "recordedAt", rec.LoadedAt)
}

// corpusRecord reads the deployment's corpus record; nil when there is
// none or it could not be read (logged, unless ctx is done).
func (st *stack) corpusRecord(ctx context.Context) *store.CorpusRecord {
	rctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	rec, err := st.store.Corpus(rctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
		st.log.Warn("origin: read the deployment's corpus record", "err", err)
	}
	if err != nil {
		return nil
	}
	return rec
}
