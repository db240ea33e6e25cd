package edgesig

import "sync"

// DefaultSeen bounds a Seen's entries when Max is 0: 2^18 signatures
// within a Window, 8 700 accepted a second sustained, in about 12 MiB.
const DefaultSeen = 1 << 18

// Seen remembers the signatures a receiver accepted within the Window, so
// that each is accepted once. It is bounded: when it is full, the oldest
// entry is forgotten and every signature made at or before that entry's
// time is refused from then on (the window shrinks under a flood rather
// than let a forgotten signature through). Safe for concurrent use; the
// zero value is ready.
type Seen struct {
	Max int // entries; 0: DefaultSeen

	mu    sync.Mutex
	m     map[[16]byte]struct{}
	q     []seenEntry // in the order added
	head  int         // q[head:] are held
	floor int64       // a signature made at or before this time is refused
}

type seenEntry struct {
	mac  [16]byte
	time int64
}

// Add remembers sig, accepted at nowMilli, and reports whether it is new.
// Only the MAC's first 128 bits are kept: a collision needs 2^64 work.
func (s *Seen) Add(sig Signature, nowMilli int64) bool {
	var k [16]byte
	copy(k[:], sig.MAC[:16])
	s.mu.Lock()
	defer s.mu.Unlock()
	if sig.Time <= s.floor {
		return false
	}
	if _, ok := s.m[k]; ok {
		return false
	}
	if s.m == nil {
		s.m = map[[16]byte]struct{}{}
	}
	// Forget what has left the window: those signatures fail the time
	// check now. The queue is in the order added, close to time order;
	// an entry behind a younger one waits for it, at most the bound.
	for s.head < len(s.q) && s.q[s.head].time < nowMilli-Window {
		s.pop()
	}
	limit := s.Max
	if limit <= 0 {
		limit = DefaultSeen
	}
	for len(s.q)-s.head >= limit {
		e := s.pop()
		s.floor = max(s.floor, e.time)
	}
	if sig.Time <= s.floor {
		return false
	}
	if s.head > 0 && s.head >= len(s.q)/2 {
		n := copy(s.q, s.q[s.head:])
		clear(s.q[n:])
		s.q, s.head = s.q[:n], 0
	}
	s.q = append(s.q, seenEntry{k, sig.Time})
	s.m[k] = struct{}{}
	return true
}

func (s *Seen) pop() seenEntry {
	e := s.q[s.head]
	s.head++
	delete(s.m, e.mac)
	return e
}

// Begin makes s refuse every signature made before nowMilli: a
// receiver that starts (or restarts) does not know what it accepted in
// its last run, and a signature captured then is still within the
// Window. A call signed just before the start is refused once, as a
// stale one.
func (s *Seen) Begin(nowMilli int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.floor = max(s.floor, nowMilli-1)
}

// Len returns how many signatures are held.
func (s *Seen) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q) - s.head
}
