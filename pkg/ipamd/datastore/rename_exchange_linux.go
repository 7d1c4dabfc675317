package datastore

import (
	"errors"

	"golang.org/x/sys/unix"
)

// errNoExchange: the file system (or kernel) cannot exchange two names.
var errNoExchange = errors.New("rename exchange not supported")

// exchange swaps the files named a and b atomically (both must exist).
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return errNoExchange
	}
	return err
}
