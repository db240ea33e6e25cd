package main

import "os"

// A reader of the mirror resolves DIR/<tier>/<slug> (a symbolic link to
// .lectern/objects/<object>) and reads the files under it. When a run
// swaps the link to a new copy, a reader that resolved it before still
// reads the old directory: that copy is kept for -keep-previous (the
// state's Retired) and removed by the first run after its grace has
// passed. A reader that opens a subject by its resolved path (realpath,
// or a directory descriptor and openat) and is done within the grace
// reads one whole copy.

// retire keeps object, which no link names any more, for -keep-previous
// (reap removes it once that has passed; at once with none).
func (s *syncer) retire(object string) {
	for _, r := range s.m.st.Retired {
		if r.Object == object {
			return
		}
	}
	s.m.st.Retired = append(s.m.st.Retired, retiredObject{Object: object, Until: s.o.now().Add(s.o.KeepPrevious)})
}

// reap removes the retired objects whose grace has passed, from the state
// and the disk; it reports whether the state changed (the caller saves
// it). Either order is safe: a state naming a directory gone is reaped
// again, a directory no state names is swept.
func (s *syncer) reap() bool {
	now := s.o.now()
	kept := s.m.st.Retired[:0]
	changed := false
	for _, r := range s.m.st.Retired {
		if now.Before(r.Until) {
			kept = append(kept, r)
			continue
		}
		os.RemoveAll(s.m.path("objects", r.Object))
		changed = true
	}
	s.m.st.Retired = kept
	return changed
}
