package bundles

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/lectern-api/lectern/origin/internal/filelock"
)

// The store's repairs (issue #33, point 4). A directory removed under a
// store was a 500 on every download until someone made it again; a full
// volume was a 500 on every download with nothing evicted; and bundles
// beside the SQLite database could fill its volume, failing every
// organisation's lesson reads. Now a build that finds its directory gone
// makes it again (and locks it again) and is tried again; one the volume
// refuses (ENOSPC, EDQUOT) or that would go below the reserve has the
// least recently used bundles evicted and is tried again; and one that
// still finds no room is ErrNoSpace, which the server answers 503 with
// Retry-After. Each repair is tried once a build, and nothing of a
// failure is kept: the next Get tries afresh, so the store recovers by
// itself once space is back.

// ErrNoSpace is a Get's error when the store has no room for the bundle:
// the volume's free space is at the reserve, or the volume refused a
// write, and evicting every bundle it could did not make room. It is
// temporary: space comes back as downloads still reading evicted bundles
// end (an unlinked file's blocks are freed at its last close), or as an
// operator frees some.
var ErrNoSpace = errors.New("bundle store: no room for the bundle")

// errReserve is a write the reserve refused.
var errReserve = errors.New("the volume's free space is at the reserve")

// DefaultReserveMax is the most a default reserve keeps free: 512 MiB.
const DefaultReserveMax = 512 << 20

// Option sets what Open does beyond its directory and bound.
type Option func(*options)

type options struct {
	reserve int64 // < 0: DefaultReserve
	share   int   // percent of the bound one owner may hold (tenants.go)
	perHour int   // builds an owner may start an hour
	now     func() time.Time
}

// Reserve keeps bytes free on the store's volume: no bundle is written
// that would take the space available there below it (the store evicts
// first, then refuses with ErrNoSpace), so that bundles cannot fill the
// volume of a database beside them. 0 keeps nothing back; a negative
// reserve is DefaultReserve's.
func Reserve(bytes int64) Option { return func(o *options) { o.reserve = bytes } }

// DefaultReserve is the reserve of a store in dir when none is set: a
// tenth of its volume's size, at most DefaultReserveMax, so that a large
// volume keeps 512 MiB and a small one still holds some bundles; 0 where
// the volume cannot be read.
func DefaultReserve(dir string) int64 {
	v, err := volumeOf(dir)
	if err != nil {
		return 0
	}
	return min(v.size/10, DefaultReserveMax)
}

// Reserve is the bytes the store keeps free on its volume.
func (s *Store) Reserve() int64 { return s.reserve }

// Available is the space available on the store's volume now, in bytes
// (statfs's available blocks); false when it cannot be read.
func (s *Store) Available() (int64, bool) {
	v, err := s.volume(s.dir)
	return v.avail, err == nil
}

// volume is what statfs says of a directory's file system, in bytes.
type volume struct {
	avail int64 // available to an unprivileged writer
	size  int64
}

// headroom is what builds may write before the volume's free space falls
// to the reserve; false when the volume cannot be read (no statfs here,
// or the directory is gone): nothing is held back then.
func (s *Store) headroom() (int64, bool) {
	v, err := s.volume(s.dir)
	if err != nil {
		return 0, false
	}
	return v.avail - s.reserve, true
}

// take debits n bytes a build is about to write from the room left above
// the reserve, or refuses them (errReserve). The room is read with
// statfs when a build starts (makeRoom) and again only when the debits
// have spent it, so the check costs a system call a build, not a write.
func (s *Store) take(n int64) error {
	if s.reserve <= 0 {
		return nil
	}
	s.roomMu.Lock()
	defer s.roomMu.Unlock()
	if s.room < n {
		h, ok := s.headroom()
		if !ok {
			return nil
		}
		if s.room = h; s.room < n {
			return errReserve
		}
	}
	s.room -= n
	return nil
}

// makeRoom evicts bundles, the least recently used of the largest holder
// first (victimLocked), until the volume has
// need bytes above the reserve, or none is left, and reports whether the
// room is there. Where the volume cannot be read it evicts need bytes of
// bundles and reports true: the next try tells. A bundle a download
// still reads frees its blocks only when the download ends, so this may
// evict more than need.
func (s *Store) makeRoom(need int64) bool {
	h, ok := s.headroom()
	if !ok || h < need {
		s.mu.Lock()
		var freed int64
		for (ok && h < need) || (!ok && freed < need) {
			el := s.victimLocked("")
			if el == nil {
				break
			}
			e := el.Value.(*entry)
			s.forgetLocked(el)
			s.stats.SpaceEvictions++
			os.Remove(filepath.Join(s.dir, e.key))
			freed += e.size
			h, ok = s.headroom()
		}
		s.mu.Unlock()
	}
	if !ok {
		return true
	}
	s.roomMu.Lock()
	s.room = h
	s.roomMu.Unlock()
	return h >= need
}

// keep builds key's bundle into the store (write), repairing what it can
// between two tries: the directory made again when it is gone, bundles
// evicted when there is no room. Each repair is tried once; a try that
// still finds no room is ErrNoSpace.
func (s *Store) keep(key string, stop <-chan struct{}, build func(io.Writer) error) (int64, error) {
	// A directory removed and made again by hand before this build is
	// found here, not by a failed write: two stats a build.
	if err := s.remake(); err != nil {
		s.count(&s.stats.Other)
		return 0, err
	}
	remade, evicted := false, false
	for {
		// Below the reserve nothing is written: evict first, then refuse.
		if s.reserve > 0 && !s.makeRoom(writeSize) {
			return 0, s.refuse(true, errReserve)
		}
		n, wrote, err := s.write(key, stop, build)
		var fe *fileError
		if err == nil || !errors.As(err, &fe) {
			return n, err // done, or the build's own failure
		}
		select {
		case <-stop:
			return 0, errAbandoned // nobody waits: nothing to repair for
		default:
		}
		switch reserve := errors.Is(err, errReserve); {
		case reserve || isNoSpace(err):
			if !reserve {
				s.count(&s.stats.NoSpace)
			}
			if evicted {
				return 0, s.refuse(reserve, err)
			}
			// The bundle is bigger than what the try wrote: evict room
			// for twice that, and try again.
			evicted = true
			if !s.makeRoom(2*wrote+writeSize) && s.Stats().Files == 0 {
				return 0, s.refuse(reserve, err) // nothing left to evict: a second try would fail as the first
			}
		case errors.Is(err, fs.ErrNotExist) && (fe.op == "create" || fe.op == "rename") && !remade:
			// The directory went during the build (a rename's ENOENT may
			// also be the temporary file removed alone: tried again too).
			remade = true
			if err := s.remake(); err != nil {
				s.count(&s.stats.Other)
				return 0, err
			}
		default:
			s.count(&s.stats.Other)
			return 0, err
		}
	}
}

// count adds one to a counter of s.stats.
func (s *Store) count(c *int64) {
	s.mu.Lock()
	*c++
	s.mu.Unlock()
}

// refuse counts a build refused for want of room and returns its error:
// ErrNoSpace, with the volume's state and the cause.
func (s *Store) refuse(reserve bool, cause error) error {
	if reserve {
		s.count(&s.stats.RefusedReserve)
	} else {
		s.count(&s.stats.RefusedFull)
	}
	avail, _ := s.Available()
	return fmt.Errorf("%w (%s: %d bytes available, %d kept in reserve, %d held in bundles): %w",
		ErrNoSpace, s.dir, avail, s.reserve, s.Stats().Bytes, cause)
}

// remake makes the store's directory again when it is gone or is no
// longer the one the store locked (removed, then made again by hand),
// and takes its lock again: a store keeps its directory to itself while
// it is open, even one made again. The bundles whose files went with the
// old directory are forgotten, and Stats.MissingDir counts the repair.
// It does nothing when the directory is still the store's (another build
// remade it first).
func (s *Store) remake() error {
	s.dirMu.Lock()
	defer s.dirMu.Unlock()
	if s.ownsDir() {
		return nil
	}
	lock, err := s.makeDir()
	for try := 1; errors.Is(err, fs.ErrNotExist) && try < remakeTries; try++ {
		lock, err = s.makeDir() // removed again while it was being made
	}
	if err != nil {
		return err
	}
	s.lock.Close()
	s.lock = lock
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.MissingDir++
	for _, el := range s.filesLocked() {
		if _, err := os.Stat(filepath.Join(s.dir, el.Value.(*entry).key)); errors.Is(err, fs.ErrNotExist) {
			s.forgetLocked(el)
		}
	}
	return nil
}

// remakeTries bounds how often remake makes the directory when it is
// removed again between its steps.
const remakeTries = 3

// makeDir makes the store's directory, private, and locks it. Its error
// wraps fs.ErrNotExist when the directory went again meanwhile.
func (s *Store) makeDir() (*os.File, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, &fileError{"make the directory again", err}
	}
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return nil, &fileError{"make the directory again", err}
	}
	lock, err := filelock.Lock(filepath.Join(s.dir, lockName))
	if err != nil {
		return nil, fmt.Errorf("bundle store %s: made again, but another store has it: %w", s.dir, err)
	}
	return lock, nil
}

// ownsDir reports whether the store's lock file is the one it holds:
// false when the directory is gone or was made again. Under dirMu.
func (s *Store) ownsDir() bool {
	held, err := s.lock.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(filepath.Join(s.dir, lockName))
	return err == nil && os.SameFile(held, now)
}
