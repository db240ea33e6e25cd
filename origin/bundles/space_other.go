//go:build !(linux || darwin || freebsd)

package bundles

import (
	"errors"
	"syscall"
)

// volumeOf cannot read a volume here: the store keeps no reserve, and
// evicts by its bundles' sizes when a write fails for want of space.
func volumeOf(string) (volume, error) { return volume{}, errors.ErrUnsupported }

// isNoSpace reports whether err is the volume refusing a write.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
