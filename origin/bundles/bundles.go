// Package bundles keeps built export bundles on disk, so that a bundle is
// built once and every download of it is a file read.
//
// A bundle is stored under its key, the hex SHA-256 of everything that
// makes its bytes (the caller's Key): built by one goroutine however many
// ask for it at once, written into a temporary file in the store's
// directory, synced and renamed into place, so that a reader never sees a
// partial bundle and a crash leaves at most a temporary file, which Open
// removes. The store is bounded: when the bundles it holds add up to more
// than its bound, bundles go (a reader holding one open keeps reading it:
// the file is unlinked, not cut). The bound may be exceeded by the newest
// bundle alone when it is bigger than the bound.
//
// Bundles are kept per owner (an organisation: tenants.go). No owner
// holds more than its share of the bound (OrgShare): past it, its own
// least recently used bundles go first. When the store as a whole is over
// its bound, or short of room on its volume, the owner holding the most
// bytes gives up its least recently used bundle first, so one
// organisation's churn evicts its own bundles, never a smaller holder's.
// And an owner builds at most BuildsPerHour bundles an hour (Admit), so
// that its churn is bounded in work as well as in bytes.
//
// A store belongs to one process: several origins each keep their own
// directory and build their own copy of a bundle (its bytes are the same
// on every origin: the bundle is deterministic).
//
// The store repairs itself (space.go): a directory removed under it is
// made again (and locked again) at the next build, and a volume without
// room for a bundle has the least recently used bundles evicted before
// the build is tried again. A store also keeps a reserve of free space on
// its volume (Reserve), below which it writes nothing, so that bundles
// never fill the volume of a database beside them; a build that finds no
// room even after eviction fails with ErrNoSpace, which the caller
// answers as a temporary refusal. Nothing of a failure is kept: the next
// Get tries again.
package bundles

import (
	"bufio"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/internal/filelock"
)

// DefaultMaxBytes is a store's bound when none is given: 2 GiB.
const DefaultMaxBytes = 2 << 30

// tmpSuffix ends the name of a bundle being written.
const tmpSuffix = ".tmp"

// Key is the store's key of a bundle made from parts: the hex SHA-256 of
// the parts, each length-prefixed, so that no two lists of parts share a
// key.
func Key(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Stats are what a store has done since Open.
type Stats struct {
	Builds    int64 // bundles built
	Hits      int64 // Gets answered from a stored bundle
	Evictions int64 // bundles removed for the bound
	Purged    int64 // bundles removed by Purge
	Bytes     int64 // the bytes of the bundles held now
	Files     int   // the bundles held now
	Owners    int   // the owners holding bundles now ("" counted: bundles a previous process left)

	// ShareEvictions are the bundles removed because their owner held
	// more than its share (OrgShare); Evictions, those removed for the
	// bound, are taken from the largest holder first.
	ShareEvictions int64
	// Limited are the Admits refused because their owner had built its
	// BuildsPerHour bundles this hour.
	Limited int64

	// SpaceEvictions are the bundles removed to make room on the volume:
	// for the reserve, or after the volume refused a write.
	SpaceEvictions int64
	// Failures met writing or reading bundles, by kind, each counted
	// where it was met, whether the store repaired it or not: NoSpace, a
	// write the volume refused (ENOSPC or EDQUOT); MissingDir, the
	// directory found gone (or no longer the one the store locked) and
	// made again; Other, any other failure of the store's own file work
	// (a build's own error is not the store's).
	NoSpace, MissingDir, Other int64
	// Refused are the builds that ended in ErrNoSpace, by what refused
	// the last try: the reserve (RefusedReserve) or the volume
	// (RefusedFull). Every Get waiting for such a build fails with it.
	RefusedReserve, RefusedFull int64
}

// Store is a directory of built bundles. It is safe for concurrent use.
type Store struct {
	dir     string
	max     int64
	reserve int64         // bytes kept free on the volume; 0: none (space.go)
	builds  chan struct{} // a token per build running: at most GOMAXPROCS at once

	dirMu sync.Mutex // held while the directory is checked and made again
	lock  *os.File   // the directory's lock, held while the store is open; under dirMu

	roomMu sync.Mutex
	room   int64 // bytes builds may write before the reserve, as of the last look (space.go)
	// volume reads the directory's file system: volumeOf, or a test's
	// volume of a set size.
	volume func(dir string) (volume, error)

	share   int64            // the most bytes one owner holds; 0: no share (tenants.go)
	perHour int              // the most builds an owner starts an hour; 0: no bound
	now     func() time.Time // the clock of the hourly bound

	mu      sync.Mutex
	files   map[string]*list.Element // of *entry, in its owner's tenant.lru
	tenants map[string]*tenant       // by owner
	tick    uint64                   // the last entry.used given
	hours   map[string]*hourly       // builds of each owner this hour (tenants.go)
	pending map[string]*admission    // admitted keys whose build has not started, by key
	flights map[string]*flight
	stats   Stats
}

type entry struct {
	key   string
	owner string // "" when not known (a bundle a previous process left)
	size  int64
	used  uint64 // Store.tick when last built or read: a global order of use
}

// flight is one build of a key, which every Get of the key during it
// waits for. A build whose last waiter leaves is dropped: before it
// starts (abandoned closed), or as it writes (stop closed): nobody wants
// it, and nobody pays for it.
type flight struct {
	done      chan struct{}
	err       error
	waiters   int
	started   bool
	abandoned chan struct{}
	stop      chan struct{}
}

// errAbandoned ends a flight whose waiters all left before it started; a
// Get that joined it after them builds anew.
var errAbandoned = errors.New("bundle store: the build was abandoned")

// lockName is the lock file in a store's directory: one store (one
// origin) a directory.
const lockName = ".lock"

// Open opens the store in dir (created when
// missing, and made private to its owner) bounded to max bytes (DefaultMaxBytes when max <= 0),
// keeping the reserve of free space opts set (by default DefaultReserve's),
// each owner's share (by default DefaultOrgShare percent of max) and its
// builds an hour (by default DefaultBuildsPerHour). The bundles a previous
// process left are kept, owned by "" until a Get names their owner, oldest
// first in line for eviction; temporary files it left are removed.
func Open(dir string, max int64, opts ...Option) (*Store, error) {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	o := options{reserve: -1, share: DefaultOrgShare, perHour: DefaultBuildsPerHour, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	// Bundles are licensed content: the directory is its owner's alone.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bundle store: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bundle store: %w", err)
	}
	lock, err := filelock.Lock(filepath.Join(dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("bundle store %s: another store has it (one directory an origin): %w", dir, err)
	}
	s := &Store{dir: dir, max: max, reserve: o.reserve, lock: lock, volume: volumeOf, builds: make(chan struct{}, runtime.GOMAXPROCS(0)),
		share: max * int64(o.share) / 100, perHour: o.perHour, now: o.now,
		files: map[string]*list.Element{}, tenants: map[string]*tenant{}, hours: map[string]*hourly{},
		pending: map[string]*admission{}, flights: map[string]*flight{}}
	if o.share <= 0 || o.share >= 100 {
		s.share = 0
	}
	if s.reserve < 0 {
		s.reserve = DefaultReserve(dir)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("bundle store: %w", err)
	}
	type found struct {
		entry
		mod int64
	}
	var kept []found
	for _, de := range des {
		name := de.Name()
		if key, _, ok := strings.Cut(name, "."); ok && validKey(key) && strings.HasSuffix(name, tmpSuffix) {
			os.Remove(filepath.Join(dir, name)) // a build the last process did not finish
			continue
		}
		info, err := de.Info()
		if err != nil || !info.Mode().IsRegular() || !validKey(name) {
			continue
		}
		kept = append(kept, found{entry{key: name, size: info.Size()}, info.ModTime().UnixNano()})
	}
	// The oldest first, so that it is the least recently used.
	for i := 1; i < len(kept); i++ {
		for j := i; j > 0 && kept[j].mod < kept[j-1].mod; j-- {
			kept[j], kept[j-1] = kept[j-1], kept[j]
		}
	}
	s.mu.Lock()
	for _, f := range kept {
		s.insertLocked(f.key, "", f.size)
	}
	s.evictLocked("", "")
	s.mu.Unlock()
	return s, nil
}

// validKey reports whether name is a key as Key writes it.
func validKey(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil && strings.ToLower(name) == name
}

// Has reports whether the store holds the bundle of key now (a Get of it
// would read its file, unless it is evicted in between).
func (s *Store) Has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.files[key]
	return ok
}

// Stored opens the bundle of key, owned by owner, when the store holds it,
// as a Get of it would (a hit), and reports false when it does not (a Get
// would build it): nothing is built.
func (s *Store) Stored(key, owner string) (*os.File, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.files[key]
	if !ok {
		return nil, false
	}
	f, err := os.Open(filepath.Join(s.dir, key))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			s.forgetLocked(el) // removed behind the store's back
		} else {
			s.stats.Other++
		}
		return nil, false
	}
	s.touchLocked(el, owner)
	s.stats.Hits++
	return f, true
}

// Close releases the store's directory for another store.
func (s *Store) Close() error {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	return s.lock.Close()
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Stats reads the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Get opens the bundle of key, owned by owner (an organisation, whose
// share and builds it counts in), building it first with build when the
// store does not hold it: build writes the bundle's bytes, and its error
// is Get's (nothing is stored then). One build of a key runs at a time,
// and every Get of the key waits for it; a Get whose ctx ends while it
// waits returns ctx's error, and the build goes on for the others. The
// caller closes the file. A build is dropped when every Get waiting for
// it has left: before it starts, or at its next write.
//
// build may be called a second time for one Get, when the store repairs
// itself between two tries (a directory made again, bundles evicted for
// room): it must write the same bytes each time. A bundle the store has
// no room for, even after eviction, is ErrNoSpace: temporary, since the
// next Get tries again.
func (s *Store) Get(ctx context.Context, key, owner string, build func(io.Writer) error) (*os.File, error) {
	if !validKey(key) {
		return nil, errors.New("bundle store: malformed key")
	}
	for {
		s.mu.Lock()
		if el, ok := s.files[key]; ok {
			s.touchLocked(el, owner)
			s.stats.Hits++
			s.mu.Unlock()
			f, err := os.Open(filepath.Join(s.dir, key))
			if err == nil {
				return f, nil
			}
			if !errors.Is(err, os.ErrNotExist) {
				s.mu.Lock()
				s.stats.Other++
				s.mu.Unlock()
				return nil, fmt.Errorf("bundle store: %w", err)
			}
			// Removed behind the store's back: forget it and build again.
			s.mu.Lock()
			s.stats.Hits-- // not answered from the store after all
			if el2, ok := s.files[key]; ok && el2 == el {
				s.forgetLocked(el)
			}
			s.mu.Unlock()
			continue
		}
		fl, ok := s.flights[key]
		if !ok {
			fl = &flight{done: make(chan struct{}), abandoned: make(chan struct{}), stop: make(chan struct{})}
			s.flights[key] = fl
			go s.fly(key, owner, fl, build)
		}
		fl.waiters++
		s.mu.Unlock()
		select {
		case <-fl.done:
		case <-ctx.Done():
			s.mu.Lock()
			if fl.waiters--; fl.waiters == 0 {
				if fl.started {
					close(fl.stop)
				} else {
					close(fl.abandoned)
				}
			}
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		if errors.Is(fl.err, errAbandoned) {
			continue // joined as the last waiter left: build anew
		}
		if fl.err != nil {
			return nil, fl.err
		}
	}
}

// fly builds key's bundle for owner into the store and ends fl with the
// outcome.
func (s *Store) fly(key, owner string, fl *flight, build func(io.Writer) error) {
	var size int64
	err := errAbandoned
	select {
	case s.builds <- struct{}{}:
		s.mu.Lock()
		if fl.started = fl.waiters > 0; fl.started {
			s.builtLocked(key, owner)
		}
		s.mu.Unlock()
		if fl.started {
			size, err = s.keep(key, fl.stop, build)
			select {
			case <-fl.stop:
				if err != nil {
					err = errAbandoned // however the build reported the failed write
				}
			default:
			}
		}
		<-s.builds
	case <-fl.abandoned:
	}
	s.mu.Lock()
	if err == nil {
		s.insertLocked(key, owner, size)
		s.stats.Builds++
		s.evictLocked(key, owner)
	}
	delete(s.flights, key)
	fl.err = err
	s.mu.Unlock()
	close(fl.done)
}

// writeSize is the size of a build's writes to its file (the buffer's):
// the reserve is checked a write at a time.
const writeSize = 64 << 10

// write builds key's bundle into a temporary file, syncs it and renames
// it into place; it returns the bundle's size. A failure of the store's
// own file work (not the build's) is a *fileError, and wrote is what the
// try wrote before it (space.go sizes the room it makes by it).
func (s *Store) write(key string, stop <-chan struct{}, build func(io.Writer) error) (n, wrote int64, err error) {
	f, err := os.CreateTemp(s.dir, key+".*"+tmpSuffix)
	if err != nil {
		return 0, 0, &fileError{"create", err}
	}
	sink := &sink{f: f, s: s, stop: stop}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(sink, writeSize)
	if err := build(bw); err != nil {
		if sink.err != nil { // the build failed because its file did
			return 0, sink.n, sink.fail()
		}
		return 0, sink.n, err
	}
	if err := bw.Flush(); err != nil {
		if sink.err == nil {
			sink.err = err
		}
		return 0, sink.n, sink.fail()
	}
	info, err := f.Stat()
	if err != nil {
		return 0, sink.n, &fileError{"stat", err}
	}
	if err := f.Sync(); err != nil {
		return 0, sink.n, &fileError{"sync", err}
	}
	if err := f.Close(); err != nil {
		return 0, sink.n, &fileError{"close", err}
	}
	if err := os.Rename(f.Name(), filepath.Join(s.dir, key)); err != nil {
		return 0, sink.n, &fileError{"rename", err}
	}
	return info.Size(), sink.n, nil
}

// Purge removes every bundle the store holds, so that the next Get of
// any key builds it: a bundle being built is not held yet, and is stored
// when its build ends. A reader holding a purged bundle open keeps
// reading it (the file is unlinked, not cut). Purged bundles are counted
// in Stats.Purged, not as evictions: the bound did not remove them. A
// bundle whose file cannot be removed stays held, and its error is
// Purge's.
func (s *Store) Purge() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, el := range s.filesLocked() {
		e := el.Value.(*entry)
		if err := os.Remove(filepath.Join(s.dir, e.key)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("bundle store: %w", err))
		} else {
			s.forgetLocked(el)
			s.stats.Purged++
		}
	}
	return errors.Join(errs...)
}

// sink is a build's file as the build writes it: a write fails once stop
// is closed (a build nobody waits for any more ends at its next write),
// or when it would take the volume's free space below the reserve
// (errReserve). Its first failure is kept: the build may wrap it or
// replace it, and the store needs the cause.
type sink struct {
	f    *os.File
	s    *Store
	stop <-chan struct{}
	n    int64 // bytes written
	err  error // the first write's failure
}

func (w *sink) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	select {
	case <-w.stop:
		w.err = errAbandoned
		return 0, w.err
	default:
	}
	if err := w.s.take(int64(len(p))); err != nil {
		w.err = err
		return 0, err
	}
	n, err := w.f.Write(p)
	w.n += int64(n)
	if err != nil {
		w.err = err
	}
	return n, err
}

// fail is the sink's failure as write returns it: errAbandoned as is,
// the rest as the store's own.
func (w *sink) fail() error {
	if w.err == errAbandoned {
		return w.err
	}
	return &fileError{"write", w.err}
}

// fileError is a failure of the store's own file work: op on the
// directory or a bundle's file, not the build's making of the bytes.
type fileError struct {
	op  string
	err error
}

func (e *fileError) Error() string { return "bundle store: " + e.op + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }
