package bundles

import (
	"context"
	"errors"
	"github.com/lectern-api/lectern/internal/tmpfstest"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A full volume: the build's ENOSPC has the least recently used bundles
// evicted and the build tried again; a bundle bigger than the volume is
// ErrNoSpace, leaving nothing behind; and once space is back (a file
// that is not a bundle removed) the next Get succeeds.
func TestVolumeFull(t *testing.T) {
	const k = 1 << 10
	vol := tmpfstest.Mount(t, "1m")
	s, err := Open(filepath.Join(vol, "bundles"), 0, Reserve(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	a, b, c := Key("a"), Key("b"), Key("c")
	get(t, s, a, bytesOf('a', 400*k))
	get(t, s, b, bytesOf('b', 400*k))
	var tries int
	f, err := s.Get(ctx, c, "", func(w io.Writer) error { tries++; return bytesOf('c', 400*k)(w) })
	if g := read(t, f, err); len(g) != 400*k {
		t.Fatalf("c on a full volume: got %d bytes, want %d", len(g), 400*k)
	}
	if st := s.Stats(); tries != 2 || st.NoSpace != 1 || st.SpaceEvictions == 0 || s.Has(a) || !s.Has(c) {
		t.Errorf("got %d tries, stats %+v, a held %v; want 2 tries, one ENOSPC and a evicted", tries, st, s.Has(a))
	}

	_, err = s.Get(ctx, Key("huge"), "", bytesOf('h', 2048*k))
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a bundle bigger than the volume: got %v, want ErrNoSpace from ENOSPC", err)
	}
	if st := s.Stats(); st.RefusedFull != 1 {
		t.Errorf("after the refusal: stats %+v", st)
	}
	if des, _ := os.ReadDir(s.Dir()); len(des) != 1+s.Stats().Files {
		t.Errorf("a refused build left %v", des)
	}

	// Something else fills the volume and the store holds nothing to
	// evict: refused at the first ENOSPC, then served once space is back.
	if err := s.Purge(); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(vol, "filler")
	fill(t, filler)
	tries = 0
	_, err = s.Get(ctx, a, "", func(w io.Writer) error { tries++; return bytesOf('a', 400*k)(w) })
	if !errors.Is(err, ErrNoSpace) || tries != 1 {
		t.Fatalf("a full volume: got %v in %d tries, want ErrNoSpace in 1", err, tries)
	}
	if des, _ := os.ReadDir(s.Dir()); len(des) != 1 {
		t.Errorf("a refused build left %v", des)
	}
	os.Remove(filler)
	if g := get(t, s, a, bytesOf('a', 400*k)); len(g) != 400*k {
		t.Errorf("space back: got %d bytes, want %d", len(g), 400*k)
	}
}

// fill writes path until its volume is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// The default reserve on a small volume is a tenth of it, which the store
// keeps free: bundles stop short of filling it.
func TestDefaultReserveKeepsRoom(t *testing.T) {
	const k = 1 << 10
	vol := tmpfstest.Mount(t, "1m")
	if r := DefaultReserve(vol); r < 90*k || r > 110*k {
		t.Fatalf("got a default reserve of %d bytes on 1 MiB, want about a tenth", r)
	}
	s := open(t, filepath.Join(vol, "bundles"), 0)
	defer s.Close()
	for i := range 8 {
		_, err := s.Get(context.Background(), Key("b", string(rune('a'+i))), "", bytesOf('x', 200*k))
		if err != nil && !errors.Is(err, ErrNoSpace) {
			t.Fatalf("bundle %d: %v", i, err)
		}
		if avail, _ := s.Available(); avail < s.Reserve() {
			t.Fatalf("after bundle %d: %d bytes available, below the reserve of %d", i, avail, s.Reserve())
		}
	}
	if st := s.Stats(); st.NoSpace != 0 || st.SpaceEvictions == 0 {
		t.Errorf("stats %+v: want evictions for the reserve and no ENOSPC", st)
	}
}
