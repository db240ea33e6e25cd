// Package tmpfstest mounts a small tmpfs for tests that need a volume to
// fill up for real (ENOSPC): the bundle store's and the origin's.
package tmpfstest

import (
	"os"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (such as "1m") on a new directory and
// returns it; it is unmounted when the test ends. Mounting needs root:
// without it the test is skipped, saying so.
func Mount(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs that fills up for real (ENOSPC)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}
