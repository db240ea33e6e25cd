//go:build linux || darwin || freebsd

package bundles

import (
	"errors"
	"syscall"
)

// volumeOf reads dir's file system with statfs(2): one system call.
func volumeOf(dir string) (volume, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return volume{}, err
	}
	bs := int64(st.Bsize)
	return volume{avail: int64(st.Bavail) * bs, size: int64(st.Blocks) * bs}, nil
}

// isNoSpace reports whether err is the volume refusing a write: full, or
// its user's quota spent.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
