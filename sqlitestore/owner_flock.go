//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlitestore

import (
	"errors"
	"os"
	"syscall"
)

// noFollow makes an open of a symbolic link fail (ELOOP) rather than open
// its target: every file the store creates is opened with it.
const noFollow = syscall.O_NOFOLLOW

// tryLock takes an exclusive (or shared) flock on f without waiting; false
// means another open file description holds a conflicting lock.
func tryLock(f *os.File, exclusive bool) (bool, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}
