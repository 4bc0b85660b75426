package sqlitestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// One owner per file, in-process: flock locks belong to open file
// descriptions, so a second LockOwner in the same process is refused too,
// and Owner sees the lock without taking it over. (The two-process case,
// kill -9 and restart are in cmd/hookwarden's TestSecondServeRefused.)
func TestOwnerLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	if _, owned, err := Owner(path); err != nil || owned {
		t.Fatalf("owner of a file with no lock file: %v %v", owned, err)
	}
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Owner created the lock file")
	}
	l, err := LockOwner(path, "hookwarden serve")
	if err != nil {
		t.Fatal(err)
	}
	info, owned, err := Owner(path)
	if err != nil || !owned || info.PID != os.Getpid() || info.Command != "hookwarden serve" || info.Since.IsZero() {
		t.Fatalf("owner = %+v %v %v", info, owned, err)
	}
	_, err = LockOwner(path, "hookwarden serve")
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "in use by hookwarden serve (pid ") {
		t.Fatalf("second lock: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, owned, _ := Owner(path); owned {
		t.Fatal("still owned after Release")
	}
	l2, err := LockOwner(path, "hookwarden serve")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Release()
}

// The database, its -wal and -shm, its directory and a backup are the
// owner's only whatever the umask. The umask is process-wide: no other test
// of this package runs in parallel with this one (none calls t.Parallel).
func TestFilesPrivateUnderUmask0(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "state", "db")
	path := filepath.Join(dir, "hw.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Record(context.Background(), receipt("std", "e1", `{}`, "std/app")); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "copy.db")
	if err := s.Backup(context.Background(), backup, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700 | os.ModeDir}, {path, 0o600}, {path + "-wal", 0o600}, {path + "-shm", 0o600}, {backup, 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
}

// Two spellings of one file share the lock: through a symlinked directory,
// before the database exists and after.
func TestOwnerLockThroughSymlink(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	l, err := LockOwner(filepath.Join(link, "hw.db"), "hookwarden serve")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, owned, err := Owner(filepath.Join(real, "hw.db")); err != nil || !owned {
		t.Fatalf("owned through the real path: %v %v", owned, err)
	}
	s, err := Open(context.Background(), filepath.Join(real, "hw.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := LockOwner(filepath.Join(real, "hw.db"), "hookwarden serve"); !errors.Is(err, ErrInUse) {
		t.Fatalf("second lock through the real path once the file exists: %v", err)
	}
}

// A symlink planted at FILE.lock (in a directory another user can write) is
// refused: the file it points to is neither chmod-ed, truncated nor written.
// The database file's creation follows no symlink either.
func TestLockOwnerRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hw.db")
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("root's file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path+".lock"); err != nil {
		t.Fatal(err)
	}
	l, err := LockOwner(path, "hookwarden serve")
	if err == nil {
		l.Release()
		t.Fatal("LockOwner followed a symlinked lock file")
	}
	if !strings.Contains(err.Error(), path+".lock") || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("error does not name the link: %v", err)
	}
	b, _ := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if string(b) != "root's file\n" || fi.Mode().Perm() != 0o644 {
		t.Fatalf("target changed: %q %v", b, fi.Mode())
	}
	if _, _, err := Owner(path); err == nil {
		t.Fatal("Owner read through a symlinked lock file")
	}

	// createPrivate (and createEmpty, for a backup's copy) never open a
	// symlink planted at the new file's name.
	db := filepath.Join(dir, "new.db")
	gone := filepath.Join(dir, "gone")
	if err := os.Symlink(gone, db+".partial"); err != nil {
		t.Fatal(err)
	}
	if err := createEmpty(db + ".partial"); err == nil {
		t.Fatal("createEmpty opened a symlink")
	}
	if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("createEmpty created the symlink's target")
	}
}
