// Package follow keeps the corpus an origin serves, the deployment's
// (issue #14; docs/operations.md, Corpus reload). The database records the
// directory the last reload loaded and the contentVersion it held
// (store.CorpusRecord). A reload through any origin's admin API records
// it; every origin reads the record every SyncEvery and, when it names
// another version than its own, loads that directory itself. A restart
// serves the recorded corpus, and the first origin on a new database
// records its LECTERN_CORPUS, so origins on one database converge on one
// version whatever LECTERN_CORPUS each was given.
//
// Reloads run one at a time (issue #13: four at once took the origin from
// 0.8 to 2.8 GB, each holding a whole corpus and its indexes), and a swap
// takes back the edge's leases, which name the version they were granted
// under. origin/wiring opens one for each origin.
package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/origin/changes"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

// SyncEvery is how often an origin reads the record by default
// (Config.Every): one single-row read, so that origins converge within
// seconds.
const SyncEvery = 2 * time.Second

// Retry is how long an origin waits before it tries again a record it
// could not load (a directory missing on its machine, or holding another
// version there): a full corpus takes seconds and a corpus's memory to
// load, so not on every read.
const Retry = time.Minute

// recordTimeout bounds the write of a reload's record. It runs whether or
// not the admin client still waits: a reload that loaded completes.
const recordTimeout = 10 * time.Second

// ReloadRetryAfter is the Retry-After (seconds) of a reload refused
// because another runs: a full corpus loads and builds in seconds.
const ReloadRetryAfter = 5

// settleAgain is when Config.Settle runs again after a swap: requests
// that began on the old corpus (a zip download streams for seconds) hold
// it until they end, and the memory limit must not count it.
const settleAgain = 30 * time.Second

// Config is what a Corpus follows and with what.
type Config struct {
	Store store.Store // holds the deployment's corpus record
	// Dir is the configured corpus (LECTERN_CORPUS): served when there is
	// no record or the recorded one does not load here, and generated
	// first when it does not exist.
	Dir    string
	Every  time.Duration // how often the record is read; zero: SyncEvery
	Log    *slog.Logger
	Stdout io.Writer // told of a corpus being generated; nil: nothing
	// The origin's memory between corpora (origin/wiring, memory.go):
	// Lift before a corpus is built beside the served one, Settle once
	// it is swapped in (and again settleAgain later) or the build failed.
	// Nil: nothing.
	Lift, Settle func()
}

// Corpus is the corpus an origin serves, following the deployment's
// record. Its methods are safe for concurrent use.
type Corpus struct {
	cfg     Config
	content atomic.Pointer[server.Content]
	leases  *lease.Manager // set by Start; nil: none

	// reloading is held by the reload (or the following) in progress:
	// one at a time.
	reloading sync.Mutex
	failed    failure     // the record last failed to load here (under reloading)
	resettle  *time.Timer // the Settle after a swap (under reloading)

	stop func() // stops the loop Start began; nil before

	// onChange is told of each change of the deployment's corpus not
	// announced yet (OnChange); nil: nothing is announced.
	onChange func(ctx context.Context, ch Change) error
	// announcing holds the announcements a reload started (Close waits).
	announcing sync.WaitGroup
}

// Change is a change of the deployment's corpus to announce: from the
// version last announced to the one recorded, which this origin serves.
type Change struct {
	From      string           // the version announced before
	FromParts *changes.Version // its parts (the database's record of them)
	To        *server.Content  // the corpus recorded, served here
	// Key names this change, the same on every origin: the two versions
	// and the record's time, so that going back to an earlier version is
	// a change of its own.
	Key string
}

// announceTimeout bounds an announcement.
const announceTimeout = time.Minute

// OnChange sets fn, told of each change of the deployment's corpus that
// is not announced yet, by whatever origin (or release) recorded it: once
// this origin serves the recorded version, after its swap and at each
// read of the record (Config.Every), until fn returns nil and the record
// is marked announced in the database (store.MarkCorpusAnnounced). A
// change is so announced at least once, whatever origin is killed when;
// several origins may tell it at once, so fn must be idempotent by
// Change.Key (webhook.Outbox.EmitOnce). The webhooks' content.changed is
// sent from it (origin/wiring). Call it before Start.
func (c *Corpus) OnChange(fn func(ctx context.Context, ch Change) error) { c.onChange = fn }

// announce tells onChange of rec's change when it is not announced yet
// and this origin serves it, then marks it announced. The first record
// of a database (nothing announced before) and a record of the version
// announced are marked without a word.
func (c *Corpus) announce(ctx context.Context, rec *store.CorpusRecord) {
	if c.onChange == nil || rec == nil || rec.AnnouncedFor.Equal(rec.LoadedAt) {
		return
	}
	ct := c.Content()
	if ct.ContentVersion != rec.ContentVersion {
		return // not served here yet
	}
	ctx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	if rec.Announced != "" && rec.Announced != rec.ContentVersion {
		ch := Change{From: rec.Announced, To: ct,
			Key: rec.Announced + ".." + rec.ContentVersion + "@" + rec.LoadedAt.UTC().Format(time.RFC3339Nano)}
		raw, err := c.cfg.Store.CorpusVersionParts(ctx, rec.Announced)
		if err == nil {
			ch.FromParts, err = changes.Decode(raw)
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			c.cfg.Log.Warn("origin: a corpus change is not announced: the previous version is past the change feed's history",
				"from", rec.Announced, "to", rec.ContentVersion)
		case err != nil:
			c.cfg.Log.Error("origin: a corpus change is not announced yet; retried", "to", rec.ContentVersion, "err", err)
			return
		default:
			if err := c.onChange(ctx, ch); err != nil {
				c.cfg.Log.Error("origin: a corpus change is not announced yet; retried", "to", rec.ContentVersion, "err", err)
				return
			}
		}
	}
	if err := c.cfg.Store.MarkCorpusAnnounced(ctx, rec.LoadedAt, rec.ContentVersion); err != nil {
		c.cfg.Log.Error("origin: a corpus change was announced but not marked; it is told again", "err", err)
	}
}

// failure is a record this origin failed to load, and when.
type failure struct {
	rec store.CorpusRecord
	at  time.Time
}

// is reports whether f is about rec.
func (f failure) is(rec *store.CorpusRecord) bool {
	return !f.at.IsZero() && f.rec.Dir == rec.Dir && f.rec.ContentVersion == rec.ContentVersion && f.rec.LoadedAt.Equal(rec.LoadedAt)
}

// Open loads the corpus the origin starts with: the recorded one when
// there is a record and it loads here with its version, else the
// configured one (cfg.Dir, generated when missing). On a database with no
// record the configured one is recorded, unless another origin recorded
// its own first (following then converges on that).
func Open(ctx context.Context, cfg Config) (*Corpus, error) {
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	c := &Corpus{cfg: cfg}
	rec, err := cfg.Store.Corpus(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	var recErr error
	if rec != nil {
		ct, err := build(rec.Dir, rec.ContentVersion)
		if err == nil {
			err = c.pin(ctx, rec.Dir, ct)
		}
		if err == nil {
			c.content.Store(ct)
			return c, nil
		}
		if isStoreError(err) {
			return nil, err
		}
		recErr = err
		c.failed = failure{*rec, time.Now()}
	}
	loaded, err := load(cfg.Dir, cfg.Stdout)
	if err != nil {
		return nil, err
	}
	ct, err := server.Build(loaded)
	if err != nil {
		return nil, err
	}
	if err := c.pin(ctx, cfg.Dir, ct); err != nil {
		return nil, err
	}
	c.content.Store(ct)
	switch {
	case rec == nil:
		first := store.CorpusRecord{Dir: cfg.Dir, ContentVersion: loaded.ContentVersion, LoadedAt: time.Now()}
		if err := cfg.Store.RecordFirstCorpus(ctx, first); err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, err
		}
	case loaded.ContentVersion == rec.ContentVersion:
		cfg.Log.Warn("origin: the recorded corpus directory did not load here; LECTERN_CORPUS holds the same contentVersion",
			"dir", rec.Dir, "contentVersion", rec.ContentVersion, "err", recErr)
	default:
		cfg.Log.Error("origin: the deployment's corpus did not load here; serving LECTERN_CORPUS until it does",
			"dir", rec.Dir, "contentVersion", rec.ContentVersion, "serving", loaded.ContentVersion, "err", recErr, "retryIn", Retry)
	}
	return c, nil
}

// load loads the corpus in dir, generating the deterministic one first
// when dir does not exist (make run on a fresh machine).
func load(dir string, stdout io.Writer) (*corpus.Corpus, error) {
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

// build loads and builds the corpus in dir, which must hold
// contentVersion want unless want is "". Nothing is generated.
func build(dir, want string) (*server.Content, error) {
	c, err := corpus.Load(dir)
	if err != nil {
		return nil, err
	}
	if want != "" && c.ContentVersion != want {
		return nil, fmt.Errorf("%s holds contentVersion %s here, not %s", dir, c.ContentVersion, want)
	}
	return server.Build(c)
}

// Content is the corpus being served (server.Config.Content): never nil
// once Open returned.
func (c *Corpus) Content() *server.Content { return c.content.Load() }

// Reload swaps in the corpus of dir and records it as the deployment's,
// so that every origin on the database follows (admin.Config.Reload);
// requests in flight finish on the corpus they began with. While one
// reload runs (or the origin follows the record), another is refused
// with 409 WRITE_CONFLICT and Retry-After
// (docs/decisions/admin-api-and-the-licence-envelope.md): it is not
// queued, so a client that gives up leaves nothing waiting.
//
// The record is written before the swap: a reload that cannot record
// changes nothing, where a swap without a record would be undone by this
// origin's next read of the record.
func (c *Corpus) Reload(ctx context.Context, dir string) (string, error) {
	if !c.reloading.TryLock() {
		return "", &apierr.Error{Code: apierr.WriteConflict, RetryAfter: apierr.Int(ReloadRetryAfter),
			Message: "A corpus reload is already running; nothing was changed. Retry once it has ended."}
	}
	defer c.reloading.Unlock()
	c.lift()
	ct, err := build(dir, "")
	if err != nil {
		c.settle()
		return "", err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := c.pin(rctx, dir, ct); err != nil {
		ct = nil // garbage, for settle
		c.settle()
		if isStoreError(err) {
			c.cfg.Log.Error("origin: a reloaded corpus's contentVersion could not be checked; nothing changed", "dir", dir, "err", err)
			return "", apierr.New(apierr.Internal, "The corpus in "+dir+" loaded but its contentVersion could not be "+
				"checked against the database, so nothing changed; the cause is in the origin's log. Retry.")
		}
		return "", err
	}
	rec := store.CorpusRecord{Dir: dir, ContentVersion: ct.ContentVersion, LoadedAt: time.Now()}
	if err := c.cfg.Store.RecordCorpus(rctx, rec); err != nil {
		ct = nil // garbage, for settle
		c.settle()
		c.cfg.Log.Error("origin: a reloaded corpus could not be recorded; nothing changed", "dir", dir,
			"contentVersion", rec.ContentVersion, "err", err)
		return "", apierr.New(apierr.Internal, "The corpus in "+dir+" loaded (contentVersion "+rec.ContentVersion+
			") but could not be recorded in the database, so nothing changed; the cause is in the origin's log. Retry.")
	}
	c.failed = failure{}
	c.content.Store(ct)
	c.swapped()
	if c.onChange != nil {
		// Not waited for by the reload's answer; Close waits for it.
		actx := context.WithoutCancel(ctx)
		c.announcing.Go(func() { c.announce(actx, c.record(actx)) })
	}
	if err := c.revokeAll(ctx); err != nil {
		return "", apierr.New(apierr.Internal, "The corpus in "+dir+" (contentVersion "+rec.ContentVersion+
			") is served and recorded, but the edge's leases on the previous one could not be revoked; they end within "+
			c.leases.TTL().String()+". The cause is in the origin's log.")
	}
	return ct.ContentVersion, nil
}

// pin refuses ct, loaded from dir, when it declares a contentVersion the
// deployment first served with other content (another ContentDigest,
// store.Store.PinCorpusVersion), and records its digest as the version's
// when the version is new. Clients (lectern sync, ETags, cursors) go by
// the version, so every mirror would stay on the old text, and bill
// nothing, while the API served the new one. The same content again (the
// same directory, or a copy) passes. The refusal is a 400 BAD_REQUEST on
// dir (an *apierr.Error); a database failure is a storeError.
func (c *Corpus) pin(ctx context.Context, dir string, ct *server.Content) error {
	pinned, err := c.cfg.Store.PinCorpusVersion(ctx, ct.ContentVersion, ct.ContentDigest, ct.Parts.Encode(), time.Now())
	if err != nil {
		return storeError{err}
	}
	if pinned == ct.ContentDigest {
		return nil
	}
	c.cfg.Log.Warn("origin: a corpus was refused: a contentVersion served before, with other content", "dir", dir,
		"contentVersion", ct.ContentVersion, "digest", ct.ContentDigest, "first", pinned)
	return &apierr.Error{Code: apierr.BadRequest, Parameter: "dir",
		Message: "The corpus in " + dir + " declares contentVersion " + ct.ContentVersion +
			", which this deployment served with other content (digest " + pinned + ", this corpus " +
			ct.ContentDigest + "); nothing was changed. The contentVersion must move whenever the content changes " +
			"(clients re-pull only when it does): give corpus.json a new contentVersion and reload."}
}

// storeError is a database failure of pin, apart from its refusal.
type storeError struct{ error }

func (e storeError) Unwrap() error { return e.error }

func isStoreError(err error) bool {
	var se storeError
	return errors.As(err, &se)
}

// revokeAll takes back every edge lease once a corpus is swapped in:
// each names the content version it was granted under, and the edge
// must not answer a 304 of the previous version after the reload is
// acknowledged (docs/edge.md, Leases).
func (c *Corpus) revokeAll(ctx context.Context) error {
	if c.leases == nil {
		return nil
	}
	err := c.leases.RevokeAll(context.WithoutCancel(ctx))
	if err != nil {
		c.cfg.Log.Error("origin: the edge's leases were not revoked after a corpus swap", "err", err)
	}
	return err
}

// Start begins following: the record is read every Config.Every until
// Close. Each swap from then on, a reload's or the record's, revokes the
// edge's leases of leases (nil: none). Call it once, before anything can
// call Reload.
func (c *Corpus) Start(leases *lease.Manager) {
	c.leases = leases
	every := c.cfg.Every
	if every <= 0 {
		every = SyncEvery
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
				c.Sync(ctx)
			}
		}
	}()
	c.stop = func() { cancel(); <-done }
}

// Sync loads the recorded corpus when it is not the one served: what the
// loop Start began does every Config.Every. The record is read without
// the reload lock, so that following never refuses an operator's reload
// for a mere read; the lock is taken to load, and the record read again
// under it, since a reload of this origin may have ended in between. It
// skips its turn while a reload runs, and a record that failed to load
// here until Retry has passed; a failure is logged and the origin keeps
// serving its corpus.
func (c *Corpus) Sync(ctx context.Context) {
	if rec := c.record(ctx); rec == nil || rec.ContentVersion == c.Content().ContentVersion {
		c.announce(ctx, rec)
		return
	}
	if !c.reloading.TryLock() {
		return
	}
	defer c.reloading.Unlock()
	rec := c.record(ctx)
	if rec == nil {
		return
	}
	serving := c.Content().ContentVersion
	if rec.ContentVersion == serving || c.failed.is(rec) && time.Since(c.failed.at) < Retry {
		return
	}
	c.lift()
	ct, err := build(rec.Dir, rec.ContentVersion)
	if err == nil {
		err = c.pin(ctx, rec.Dir, ct)
	}
	if err != nil {
		ct = nil // garbage, for settle
		c.settle()
		c.failed = failure{*rec, time.Now()}
		c.cfg.Log.Error("origin: the deployment's corpus did not load here; still serving the current one",
			"dir", rec.Dir, "contentVersion", rec.ContentVersion, "serving", serving, "err", err, "retryIn", Retry)
		return
	}
	c.failed = failure{}
	c.content.Store(ct)
	c.swapped()
	c.announce(ctx, rec)
	c.revokeAll(ctx)
	c.cfg.Log.Info("origin: now serving the deployment's corpus", "dir", rec.Dir, "contentVersion", rec.ContentVersion,
		"was", serving, "recordedAt", rec.LoadedAt)
}

// record reads the deployment's corpus record; nil when there is none or
// it could not be read (logged, unless ctx is done).
func (c *Corpus) record(ctx context.Context) *store.CorpusRecord {
	rctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	rec, err := c.cfg.Store.Corpus(rctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
		c.cfg.Log.Warn("origin: read the deployment's corpus record", "err", err)
	}
	if err != nil {
		return nil
	}
	return rec
}

func (c *Corpus) lift() {
	if c.cfg.Lift != nil {
		c.cfg.Lift()
	}
}

func (c *Corpus) settle() {
	if c.cfg.Settle != nil {
		c.cfg.Settle()
	}
}

// swapped settles the memory after a corpus swap, now and again after
// settleAgain unless a reload runs then (it settles when it ends). Run
// under c.reloading.
func (c *Corpus) swapped() {
	c.settle()
	if c.resettle != nil {
		c.resettle.Stop()
	}
	c.resettle = time.AfterFunc(settleAgain, func() {
		if c.reloading.TryLock() {
			defer c.reloading.Unlock()
			c.settle()
		}
	})
}

// Close stops following, waiting for a read or load in progress, an
// announcement a reload started, and the settling to come. A reload in progress (its admin request) finishes.
func (c *Corpus) Close() {
	if c.stop != nil {
		c.stop()
	}
	c.announcing.Wait()
	c.reloading.Lock()
	if c.resettle != nil {
		c.resettle.Stop()
	}
	c.reloading.Unlock()
}
