//go:build unix

package config

import "syscall"

// writable asks the kernel, without writing, whether this process may write
// path (and, for a directory, create in it): access(2) also says no on a
// read-only file system, even to root.
func writable(path string, dir bool) error {
	mode := uint32(2) // W_OK
	if dir {
		mode |= 1 // X_OK: entering it is needed to create a file
	}
	return syscall.Access(path, mode)
}
