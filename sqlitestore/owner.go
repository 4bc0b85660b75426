package sqlitestore

// One serve per SQLite file (docs/operations.md, "One serve per database file"). serve holds an exclusive
// flock(2) on a lock file beside the database, FILE.lock, for as long as it
// runs, and writes its pid and command line into it. flock is released by
// the kernel when the process dies, however it dies, so a stale file of a
// dead process never blocks a restart: stale means "not locked".
//
// The lock is a separate file on purpose: opening and closing the database,
// -wal or -shm from this process would drop SQLite's own POSIX locks
// (docs/design.md). The file is never deleted: unlinking a locked file lets
// a second process lock a new inode under the same name.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrInUse is returned by LockOwner when another process owns the database.
var ErrInUse = errors.New("database in use")

// InUseError is LockOwner's refusal: it names the owner.
type InUseError struct {
	Path, LockFile string
	Owner          OwnerInfo
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("database %s is in use by %s (lock file %s)", e.Path, e.Owner, e.LockFile)
}

// Is makes errors.Is(err, ErrInUse) true.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// LockPath is the owner lock file of the database at path: path + ".lock",
// after resolving symlinks (of the file, or of its directory while the file
// does not exist yet), so that two spellings of one file share a lock.
func LockPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}
	return abs + ".lock", nil
}

// OwnerInfo is what the owner of a database wrote into its lock file.
type OwnerInfo struct {
	PID     int
	Command string // "hookwarden serve"
	Since   time.Time
}

func (o OwnerInfo) String() string {
	cmd := o.Command
	if cmd == "" {
		cmd = "another process"
	}
	if o.PID <= 0 {
		return cmd
	}
	return fmt.Sprintf("%s (pid %d)", cmd, o.PID)
}

// OwnerLock is a held owner lock; Release gives it up.
type OwnerLock struct {
	f    *os.File
	path string
}

// Path is the lock file.
func (l *OwnerLock) Path() string { return l.path }

// Release unlocks and closes the lock file (the file stays, with the last
// owner's pid in it: harmless, since only the flock counts).
func (l *OwnerLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the only descriptor releases the flock
	l.f = nil
	return err
}

// lockRetry is how long LockOwner keeps trying before it refuses: a writing
// command's probe (Owner) holds a shared lock for microseconds, and a serve
// starting at that instant must not take it for another serve.
const lockRetry = 500 * time.Millisecond

// LockOwner makes this process the owner of the database at path, or fails
// with an error wrapping ErrInUse that names the process holding it.
// command is written into the lock file for that message ("hookwarden serve").
func LockOwner(path, command string) (*OwnerLock, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("lock database: %w", err)
	}
	// The directory first, so that LockPath resolves it as Owner will.
	if err := privateDir(filepath.Dir(abs)); err != nil {
		return nil, err
	}
	lp, err := LockPath(abs)
	if err != nil {
		return nil, fmt.Errorf("lock database: %w", err)
	}
	// O_NOFOLLOW: a symlink planted at FILE.lock must not make serve (root,
	// perhaps) chmod, truncate and write the file it points to; a FIFO or a
	// device planted there is refused below, before anything is written.
	f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		if isSymlink(lp) {
			return nil, fmt.Errorf("lock database: %s is a symbolic link: remove it (the lock file is never a link)", lp)
		}
		return nil, fmt.Errorf("lock database: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file (%s): remove it", lp, fi.Mode().Type())
		}
		return nil, fmt.Errorf("lock database: %w", err)
	}
	deadline := time.Now().Add(lockRetry)
	for {
		ok, err := tryLock(f, true)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock database: %s: %w", lp, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			info := readOwner(lp)
			f.Close()
			return nil, &InUseError{Path: path, LockFile: lp, Owner: info}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = f.Chmod(0o600)
	// Locked: say who we are. Readers may see the file between the truncate
	// and the write; they then name "another process".
	text := fmt.Sprintf("%d\n%s\n%s\n", os.Getpid(), command, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(text), 0)
	}
	return &OwnerLock{f: f, path: lp}, nil
}

// Owner says whether a process (a serve) owns the database at path, and
// which. It never creates anything: a file with no lock file beside it is
// owned by nobody. It takes a shared lock for an instant to find out.
func Owner(path string) (OwnerInfo, bool, error) {
	lp, err := LockPath(path)
	if err != nil {
		return OwnerInfo{}, false, err
	}
	f, err := os.OpenFile(lp, os.O_RDONLY|noFollow, 0)
	if errors.Is(err, os.ErrNotExist) {
		return OwnerInfo{}, false, nil
	}
	if err != nil {
		return OwnerInfo{}, false, fmt.Errorf("read owner lock: %w", err)
	}
	defer f.Close()
	ok, err := tryLock(f, false)
	if err != nil {
		return OwnerInfo{}, false, fmt.Errorf("read owner lock %s: %w", lp, err)
	}
	if ok {
		return OwnerInfo{}, false, nil // closing f unlocks
	}
	return readOwner(lp), true, nil
}

// isSymlink: path itself (not what it points to) is a symbolic link.
func isSymlink(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// readOwner parses a lock file: pid, command, start time, one a line.
func readOwner(lp string) OwnerInfo {
	var o OwnerInfo
	b, err := os.ReadFile(lp)
	if err != nil {
		return o
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 0 {
		o.PID, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	}
	if len(lines) > 1 {
		o.Command = strings.TrimSpace(lines[1])
	}
	if len(lines) > 2 {
		o.Since, _ = time.Parse(time.RFC3339, strings.TrimSpace(lines[2]))
	}
	return o
}
