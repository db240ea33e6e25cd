package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A local failure while installing a subject (a full disk, here found by
// the free-space check before unpacking, or hit mid-write) keeps the
// pending export and its download: the run says "no space left", and the
// next one, once there is room, installs it without a new export or any
// download billed (#35, 4).
func TestSyncLocalFailureKeepsTheExport(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T)
	}{
		{"free space checked", func(t *testing.T) {
			freeSpace = func(string) (int64, error) { return 4096, nil }
		}},
		{"full mid-write", func(t *testing.T) {
			unpackBundle = func(part, dir, subject string) (int, int64, error) {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return 0, 0, err
				}
				p := filepath.Join(dir, "class-1.json")
				os.WriteFile(p, []byte("{"), 0o644)
				return 0, 0, &fs.PathError{Op: "write", Path: p, Err: syscall.ENOSPC}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restore(t)
			s := newTestStack(t, nil)
			dir := t.TempDir()
			one := "high/algebra"
			tc.fault(t)
			for i := range 2 {
				code, sum := runSyncCmd(t, s, dir, "-subject", one)
				if code != 1 || !strings.Contains(sum.Error, "no space left") || strings.Contains(sum.Error, "verify") {
					t.Fatalf("run %d on a full disk: exit %d, %+v", i, code, sum)
				}
			}
			if got := s.exports(); got != 1 {
				t.Errorf("two runs on a full disk made %d exports, want 1", got)
			}
			st := loadStateFile(t, dir)
			if p := st.Pending[one]; p == nil || p.URL == "" {
				t.Fatalf("the pending export is gone: %+v", st.Pending)
			}
			if des, _ := os.ReadDir(filepath.Join(dir, metaDir, "objects")); len(des) != 0 {
				t.Errorf("the failed unpack left %v", des)
			}

			restore(t)
			code, sum := runSyncCmd(t, s, dir, "-subject", one)
			if code != 0 || !sum.Complete || sum.Subjects.Held != 1 {
				t.Fatalf("after room was made: exit %d, %+v", code, sum)
			}
			checkMirror(t, dir, []string{one})
			if got := s.exports(); got != 1 || sum.Billed["exports"] != 0 || sum.Billed["downloads"] != 0 {
				t.Errorf("after room was made: %d exports in all, billed %v", got, sum.Billed)
			}
		})
	}
}

// A verification failure still drops the export: the bytes are not the
// bundle, and the next run exports again. A state write that fails on the
// way out is reported with it, not dropped (#35, 11).
func TestSyncStateWriteErrorsReported(t *testing.T) {
	restore(t)
	s := newTestStack(t, nil)
	dir := t.TempDir()
	unpackBundle = func(part, dir2, subject string) (int, int64, error) {
		// The state can no longer be written: its name is a directory.
		st := filepath.Join(dir, metaDir, "state.json")
		os.Remove(st)
		os.MkdirAll(filepath.Join(st, "x"), 0o755)
		return 0, 0, errors.New("the bundle holds an unexpected entry")
	}
	code, sum := runSyncCmd(t, s, dir, "-subject", "high/algebra")
	if code != 1 || !strings.Contains(sum.Error, "verify high/algebra") || !strings.Contains(sum.Error, "write the state") {
		t.Fatalf("exit %d, %+v", code, sum)
	}
	os.RemoveAll(filepath.Join(dir, metaDir, "state.json"))
}

// restore puts the install hooks back as they are outside tests, now
// and after the test.
func restore(t *testing.T) {
	reset := func() { unpackBundle, freeSpace = unpack, statfsFree }
	reset()
	t.Cleanup(reset)
}

// The same on a real full file system: a tmpfs of 128 KiB takes the
// download of high/algebra (43 KB) but not its files (about 240 KB in
// blocks); once it is grown, the next run installs the same download.
// It needs root (mount), else it is skipped.
func TestSyncFullDiskTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	restore(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	s := newTestStack(t, nil)
	one := "high/algebra"
	code, sum := runSyncCmd(t, s, dir, "-subject", one)
	if code != 1 || !strings.Contains(sum.Error, "no space left") {
		t.Fatalf("on a full tmpfs: exit %d, %+v", code, sum)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=4m", dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	code, sum = runSyncCmd(t, s, dir, "-subject", one)
	if code != 0 || !sum.Complete {
		t.Fatalf("after the tmpfs grew: exit %d, %+v", code, sum)
	}
	checkMirror(t, dir, []string{one})
	if got := s.exports(); got != 1 || sum.Billed["exports"] != 0 || sum.Billed["downloads"] != 0 {
		t.Errorf("after the tmpfs grew: %d exports in all, billed %v", got, sum.Billed)
	}
}
