package bundles

import (
	"container/list"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Owners (issue #36, points 1 and 2). The store used to count only its
// own bytes under one LRU for everyone: one organisation making distinct
// bundles (a scope subset, a format and a target each) evicted every
// other organisation's, whose next downloads built them again, and could
// fill the bundles' budget alone. Now each bundle has an owner, the
// organisation it was built for, and three rules bound what an owner can
// take from the others:
//
//   - Share: no owner holds more than OrgShare percent of the bound. A
//     build that takes its owner past it evicts the owner's own least
//     recently used bundles (never the one just built: an owner may
//     exceed its share by its newest bundle alone, as the store may
//     exceed its bound).
//   - Largest first: when the store is over its bound, or short of room on
//     its volume, the owner holding the most bytes gives up its least
//     recently used bundle (between owners holding as much, the one whose
//     least recently used bundle is the older), so an owner holding less
//     than every other keeps its bundles while anyone holds more.
//   - Builds an hour: an owner starts at most BuildsPerHour builds a UTC
//     hour (Admit, before any work: the caller refuses with the error,
//     free), so churning through distinct bundles costs the origin a
//     bounded amount of work an hour, whatever the cache keeps.
//
// Bundles a previous process left have no known owner (their file name
// is their key): they are owned by "", which has no share, until a Get
// of one names its owner. The share and the builds are counted per
// store, that is per origin.

// DefaultOrgShare is the percent of the bound one owner may hold when
// OrgShare is not given.
const DefaultOrgShare = 25

// DefaultBuildsPerHour is how many builds an owner may start a UTC hour
// when BuildsPerHour is not given: far above a sync of every subject of
// the corpus (125), far below the distinct bundles one organisation can
// ask for (tens of thousands).
const DefaultBuildsPerHour = 1000

// OrgShare bounds the bytes one owner holds to percent of the store's
// bound; 0 or 100 and above: no share (only the bound).
func OrgShare(percent int) Option { return func(o *options) { o.share = percent } }

// BuildsPerHour bounds the builds one owner starts a UTC hour (Admit);
// 0: no bound.
func BuildsPerHour(n int) Option { return func(o *options) { o.perHour = max(n, 0) } }

// Clock sets the clock of the hourly bound (time.Now by default).
func Clock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// tenant is what one owner holds: its bundles, the most recently used at
// the front, and their bytes.
type tenant struct {
	lru   list.List
	bytes int64
}

// Share is the most bytes one owner may hold (beyond its newest bundle);
// 0: no share.
func (s *Store) Share() int64 { return s.share }

// Held is the bytes of the bundles owner holds now.
func (s *Store) Held(owner string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenants[owner]; t != nil {
		return t.bytes
	}
	return 0
}

// insertLocked holds a new bundle of owner, the most recently used.
func (s *Store) insertLocked(key, owner string, size int64) {
	t := s.tenants[owner]
	if t == nil {
		t = &tenant{}
		s.tenants[owner] = t
		s.stats.Owners++
	}
	s.tick++
	s.files[key] = t.lru.PushFront(&entry{key: key, owner: owner, size: size, used: s.tick})
	t.bytes += size
	s.stats.Bytes += size
	s.stats.Files++
}

// touchLocked marks el used now; a bundle of no known owner read for
// owner becomes owner's (its key names the organisation it was built
// for), within owner's share.
func (s *Store) touchLocked(el *list.Element, owner string) {
	e := el.Value.(*entry)
	if e.owner == "" && owner != "" {
		s.forgetLocked(el)
		s.insertLocked(e.key, owner, e.size)
		s.evictLocked(e.key, owner)
		return
	}
	s.tick++
	e.used = s.tick
	s.tenants[e.owner].lru.MoveToFront(el)
}

// forgetLocked stops holding el's bundle (its file is the caller's).
func (s *Store) forgetLocked(el *list.Element) {
	e := el.Value.(*entry)
	t := s.tenants[e.owner]
	t.lru.Remove(el)
	t.bytes -= e.size
	if t.lru.Len() == 0 {
		delete(s.tenants, e.owner)
		s.stats.Owners--
	}
	delete(s.files, e.key)
	s.stats.Bytes -= e.size
	s.stats.Files--
}

// filesLocked lists every bundle held.
func (s *Store) filesLocked() []*list.Element {
	els := make([]*list.Element, 0, len(s.files))
	for _, el := range s.files {
		els = append(els, el)
	}
	return els
}

// oldest is t's least recently used bundle but keep's; nil when none.
func (t *tenant) oldest(keep string) *list.Element {
	el := t.lru.Back()
	for el != nil && el.Value.(*entry).key == keep {
		el = el.Prev()
	}
	return el
}

// victimLocked is the bundle to evict next but keep: the least recently
// used of the owner holding the most bytes (of those holding another
// than keep), the owner whose oldest bundle is the older between equals;
// nil when keep is all there is.
func (s *Store) victimLocked(keep string) *list.Element {
	var best *tenant
	var victim *list.Element
	for _, t := range s.tenants {
		el := t.oldest(keep)
		if el == nil {
			continue
		}
		if best == nil || t.bytes > best.bytes ||
			(t.bytes == best.bytes && el.Value.(*entry).used < victim.Value.(*entry).used) {
			best, victim = t, el
		}
	}
	return victim
}

// evictLocked removes bundles, but keep: owner's least recently used
// while owner holds more than its share, then the largest holder's
// (victimLocked) while the store holds more than its bound.
func (s *Store) evictLocked(keep, owner string) {
	if owner != "" && s.share > 0 {
		for t := s.tenants[owner]; t != nil && t.bytes > s.share; t = s.tenants[owner] {
			el := t.oldest(keep)
			if el == nil {
				break
			}
			s.removeLocked(el)
			s.stats.ShareEvictions++
		}
	}
	for s.stats.Bytes > s.max {
		el := s.victimLocked(keep)
		if el == nil {
			return
		}
		s.removeLocked(el)
		s.stats.Evictions++
	}
}

// removeLocked forgets el's bundle and removes its file.
func (s *Store) removeLocked(el *list.Element) {
	key := el.Value.(*entry).key
	s.forgetLocked(el)
	os.Remove(filepath.Join(s.dir, key))
}

// hourly is an owner's builds in one UTC hour.
type hourly struct {
	hour    int64 // Unix hours
	builds  int   // started in hour
	pending int   // admitted keys whose build has not started (any hour)
}

// admission is an admitted key whose build has not started: every Admit
// of the key shares it, so concurrent requests of one bundle take one
// build of the hour.
type admission struct {
	owner   string
	refs    int
	started bool
}

// maxHours bounds the owners whose builds the store remembers: past it,
// those with no build this hour and none pending are forgotten.
const maxHours = 10000

// hourLocked is owner's record of the current hour.
func (s *Store) hourLocked(owner string) *hourly {
	now := s.now().Unix() / 3600
	h := s.hours[owner]
	if h == nil {
		if len(s.hours) >= maxHours {
			for o, x := range s.hours {
				if x.pending == 0 && (x.hour != now || x.builds == 0) {
					delete(s.hours, o)
				}
			}
		}
		h = &hourly{hour: now}
		s.hours[owner] = h
	}
	if h.hour != now {
		h.hour, h.builds = now, 0
	}
	return h
}

// LimitError is Admit's refusal: the owner has started Limit builds this
// hour; RetryAfter is the time to the next UTC hour.
type LimitError struct {
	Limit      int
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("bundle store: %d builds this hour, the most an owner may start; retry in %s", e.Limit, e.RetryAfter)
}

// Admit takes, before any work, one of owner's builds of the hour for a
// Get of key that may build it, or refuses with a *LimitError when owner
// has started (or been admitted for) BuildsPerHour builds this hour. A
// key held, being built, or already admitted takes nothing more. done
// gives the build back if no Get built key by then (the request was
// refused, or another request's build served it); a build that started
// counts in its hour whatever happens to it.
func (s *Store) Admit(owner, key string) (done func(), err error) {
	nothing := func() {}
	if s.perHour <= 0 {
		return nothing, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.files[key]; ok {
		return nothing, nil
	}
	if fl, ok := s.flights[key]; ok && fl.started {
		return nothing, nil
	}
	a := s.pending[key]
	if a == nil {
		h := s.hourLocked(owner)
		if h.builds+h.pending >= s.perHour {
			s.stats.Limited++
			now := s.now()
			return nil, &LimitError{Limit: s.perHour, RetryAfter: now.Truncate(time.Hour).Add(time.Hour).Sub(now)}
		}
		h.pending++
		a = &admission{owner: owner}
		s.pending[key] = a
	}
	a.refs++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if a.refs--; a.refs == 0 && !a.started {
			if s.pending[key] == a {
				delete(s.pending, key)
			}
			s.hourLocked(a.owner).pending--
		}
	}, nil
}

// builtLocked counts a build of key for owner starting now: the
// admission of key, if any, is spent.
func (s *Store) builtLocked(key, owner string) {
	if a := s.pending[key]; a != nil {
		a.started = true
		delete(s.pending, key)
		s.hourLocked(a.owner).pending--
	}
	s.hourLocked(owner).builds++
}
