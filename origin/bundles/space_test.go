package bundles

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// sized is a volume of capacity bytes holding only the store's directory:
// what is available is capacity less the bytes of the files in dir.
type sized struct{ capacity atomic.Int64 }

func (v *sized) of(dir string) (volume, error) {
	var used int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			used += info.Size()
		}
		return nil
	})
	if err != nil {
		return volume{}, err
	}
	c := v.capacity.Load()
	return volume{avail: max(c-used, 0), size: c}, nil
}

// onVolume opens a store in a new directory on a volume of capacity
// bytes that keeps reserve bytes free.
func onVolume(t *testing.T, capacity, reserve int64) (*Store, *sized) {
	t.Helper()
	s, err := Open(t.TempDir(), 0, Reserve(reserve))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	v := new(sized)
	v.capacity.Store(capacity)
	s.volume = v.of
	return s, v
}

func bytesOf(c byte, n int) func(io.Writer) error {
	return writing(strings.Repeat(string(c), n))
}

// The reserve: a build that would take the volume below it has the least
// recently used bundles evicted and is tried again; one that still finds
// no room is ErrNoSpace, and nothing of the refusal is kept: once there
// is space the same Get succeeds.
func TestReserve(t *testing.T) {
	const k = 1 << 10
	s, v := onVolume(t, 1000*k, 600*k)
	ctx := context.Background()
	a, b, c := Key("a"), Key("b"), Key("c")
	if g := get(t, s, a, bytesOf('a', 300*k)); len(g) != 300*k {
		t.Fatalf("a: got %d bytes, want %d", len(g), 300*k)
	}
	// 100 KiB above the reserve: b's try stops there, a is evicted, and
	// the second try keeps b.
	var tries int
	f, err := s.Get(ctx, b, "", func(w io.Writer) error { tries++; return bytesOf('b', 300*k)(w) })
	if g := read(t, f, err); len(g) != 300*k {
		t.Fatalf("b: got %d bytes, want %d", len(g), 300*k)
	}
	if tries != 2 || s.Has(a) {
		t.Errorf("b: got %d tries, a held %v; want 2 tries and a evicted", tries, s.Has(a))
	}
	if st := s.Stats(); st.SpaceEvictions != 1 || st.Evictions != 0 || st.RefusedReserve != 0 || st.NoSpace != 0 || st.Files != 1 {
		t.Errorf("after b: stats %+v", st)
	}
	// Bigger than all the room above the reserve, b evicted included.
	_, err = s.Get(ctx, c, "", bytesOf('c', 500*k))
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("c: got %v, want ErrNoSpace", err)
	}
	if st := s.Stats(); st.RefusedReserve != 1 || st.Files != 0 || st.Bytes != 0 {
		t.Errorf("after c's refusal: stats %+v", st)
	}
	if des, _ := os.ReadDir(s.Dir()); len(des) != 1 || des[0].Name() != lockName {
		t.Errorf("a refused build left %v", des)
	}
	// Space back: the same Get succeeds.
	v.capacity.Store(2000 * k)
	if g := get(t, s, c, bytesOf('c', 500*k)); len(g) != 500*k {
		t.Errorf("c once there is space: got %d bytes, want %d", len(g), 500*k)
	}
}

// A volume already below the reserve: the store evicts what it holds,
// and with nothing left refuses before building.
func TestReserveRefusesBeforeBuilding(t *testing.T) {
	s, v := onVolume(t, 1<<20, 0)
	a := Key("a")
	get(t, s, a, bytesOf('a', 100<<10))
	s.reserve = 1 << 20 // the whole volume: never any room
	var built bool
	_, err := s.Get(context.Background(), Key("b"), "", func(w io.Writer) error { built = true; return nil })
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "reserve") {
		t.Fatalf("got %v, want ErrNoSpace for the reserve", err)
	}
	if built || s.Has(a) {
		t.Errorf("built %v, a held %v; want no build and a evicted", built, s.Has(a))
	}
	if st := s.Stats(); st.RefusedReserve != 1 || st.SpaceEvictions != 1 {
		t.Errorf("stats %+v", st)
	}
	s.reserve = 0
	v.capacity.Store(2 << 20)
	if g := get(t, s, Key("b"), writing("b")); g != "b" {
		t.Errorf("without the reserve: got %q, want b", g)
	}
}

// A directory removed under the store is made again, private and locked,
// at the next build; the bundles it held are built again.
func TestMissingDirRemade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundles")
	s := open(t, dir, 0)
	defer s.Close()
	a, b := Key("a"), Key("b")
	get(t, s, a, writing("a"))
	get(t, s, b, writing("b"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	var builds int
	f, err := s.Get(context.Background(), a, "", func(w io.Writer) error { builds++; return writing("a again")(w) })
	if g := read(t, f, err); g != "a again" || builds != 1 {
		t.Fatalf("got %q in %d builds, want a again in 1", g, builds)
	}
	if st := s.Stats(); st.MissingDir != 1 || st.Files != 1 || st.Bytes != int64(len("a again")) || s.Has(b) {
		t.Errorf("stats %+v, b held %v; want one repair and only a held", st, s.Has(b))
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("the directory made again: %v %v, want 0700", info, err)
	}
	if s2, err := Open(dir, 0); err == nil {
		s2.Close()
		t.Error("a second store opened the directory made again: its lock was not taken again")
	}
}

// A directory removed while a bundle is built (its rename fails) is made
// again and the build tried again; one removed and made again by hand
// between two builds is locked again at the next.
func TestMissingDirDuringBuild(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundles")
	s := open(t, dir, 0)
	defer s.Close()
	var tries int
	f, err := s.Get(context.Background(), Key("a"), "", func(w io.Writer) error {
		if tries++; tries == 1 {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
		return writing("a")(w)
	})
	if g := read(t, f, err); g != "a" || tries != 2 {
		t.Fatalf("got %q in %d tries, want a in 2", g, tries)
	}
	if st := s.Stats(); st.MissingDir != 1 || st.Other != 0 {
		t.Errorf("stats %+v", st)
	}
	os.RemoveAll(dir)
	os.Mkdir(dir, 0o755) // an operator's mkdir
	get(t, s, Key("b"), writing("b"))
	if s2, err := Open(dir, 0); err == nil {
		s2.Close()
		t.Error("a second store opened a directory made again by hand")
	}
	if st := s.Stats(); st.MissingDir != 2 {
		t.Errorf("got %d repairs, want 2", st.MissingDir)
	}
}
