package sqlitestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Backup writes a consistent snapshot of the database to dest with VACUUM
// INTO, run on a read connection: it sees one read snapshot, so writers
// (a running serve) go on meanwhile, and it never opens the database, -wal or
// -shm files by hand (closing such a file descriptor would drop SQLite's
// locks). dest must not exist; the copy is written next to it under a
// temporary name, synced, and linked into place, so dest is either complete
// or absent. progress, if set, is called every few hundred milliseconds with
// the bytes written so far and the size of the database.
func (s *Store) Backup(ctx context.Context, dest string, progress func(written, total int64)) error {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if abs == s.path {
		return fmt.Errorf("backup: %s is the database itself", dest)
	}
	if _, err := os.Lstat(abs); err == nil {
		return fmt.Errorf("backup: %s: %w; choose a new file name", dest, hookwarden.ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := fmt.Sprintf("%s.partial-%s", abs, hex.EncodeToString(rnd[:]))
	defer os.Remove(tmp) // after a success it is already gone
	// A backup holds every body and header: readable by the owner only,
	// whatever the umask. VACUUM INTO accepts an empty file.
	if err := createEmpty(tmp); err != nil {
		return fmt.Errorf("backup: %w", err)
	}

	done := make(chan struct{})
	stopped := make(chan struct{})
	if progress != nil {
		go func() {
			defer close(stopped)
			total := s.size()
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					if fi, err := os.Stat(tmp); err == nil {
						progress(fi.Size(), total)
					}
				}
			}
		}()
	} else {
		close(stopped)
	}
	err = s.vacuumInto(ctx, tmp)
	close(done)
	<-stopped
	if err != nil {
		return fmt.Errorf("backup: vacuum into %s: %w", tmp, err)
	}
	// tmp is a new file SQLite no longer holds open: opening it here is safe.
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// Link fails if dest appeared meanwhile; it never overwrites.
	if err := os.Link(tmp, abs); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("backup: %s: %w; choose a new file name", dest, hookwarden.ErrExists)
		}
		return fmt.Errorf("backup: %w", err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := syncFile(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if progress != nil {
		if fi, err := os.Stat(abs); err == nil {
			progress(fi.Size(), fi.Size())
		}
	}
	return nil
}

// vacuumInto runs VACUUM INTO on a connection of its own: the read pool's
// query_only forbids it, and the writer must not be held for the length of a
// copy. The connection opens the file read-only (mode=ro), so it cannot
// change the database, and like every connection here it goes through
// SQLite, which keeps the file's locks right.
func (s *Store) vacuumInto(ctx context.Context, tmp string) error {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Set("mode", "ro")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: s.path, RawQuery: q.Encode()}).String())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	_, err = db.ExecContext(ctx, `VACUUM INTO ?`, tmp)
	return err
}

// size is the database's size as SQLite counts it (pages in use plus free),
// read through SQL rather than by opening the file.
func (s *Store) size() int64 {
	var n int64
	if err := s.rdb.QueryRow(`SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&n); err != nil {
		return 0
	}
	return n
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// createEmpty creates path empty with mode 0600 (not less the umask).
func createEmpty(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	return errors.Join(err, f.Close())
}
