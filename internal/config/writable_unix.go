//go:build unix

package config

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

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

// sharedDir refuses a directory that users other than its owner may write
// without the sticky bit: any of them could plant a symlink or a file at a
// name serve creates (the lock file, -wal, -shm, a backup's or an export's
// copy) or swap the database for one of theirs. With the sticky bit (/tmp)
// only a file's owner may rename or remove it, and the kernel follows no
// other user's symlink there. Write for others is refused always; write
// for the group only on the database's own directory (own), and only when
// that group is not this process's own (a user private group, umask 002,
// is no one else).
func sharedDir(dir string, own bool) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	m := fi.Mode()
	if m&fs.ModeSticky != 0 {
		return nil
	}
	shared := m.Perm()&0o002 != 0
	if own && m.Perm()&0o020 != 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Gid) != os.Getegid() {
			shared = true
		}
	}
	if !shared {
		return nil
	}
	return fmt.Errorf("directory %s is writable by other users (mode %04o): one of them could plant a symlink "+
		"where serve creates the lock, -wal or -shm file, or replace the database: chmod go-w %s, "+
		"or keep the database in a directory only hookwarden's user writes", dir, m.Perm(), dir)
}
