package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded migrations in order. Their file names start
// with the version they bring the schema to: 0001_init.sql, 0002_....sql.
// Gaps and duplicates are refused, so a bad release cannot skip a step.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must start with a positive version number and _", base)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %q: want version %d (no gaps or duplicates)", m.name, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate brings the schema forward, one transaction per migration, recording
// the version in PRAGMA user_version inside the same transaction.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	var cur int
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
		return fmt.Errorf("read schema version of %s: %w", s.path, err)
	}
	if cur > len(ms) {
		return fmt.Errorf("database %s has schema version %d, newer than this build's %d: use a newer hookwarden", s.path, cur, len(ms))
	}
	for _, m := range ms[cur:] {
		tx, err := s.wdb.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate to %d: %w", m.version, err)
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migrate to %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migrate to %d: set version: %w", m.version, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate to %d: commit: %w", m.version, err)
		}
		s.log.Info("database migrated", "version", m.version, "migration", m.name)
	}
	if len(ms) > cur {
		// A step that rewrote many rows (schema 8) grew the WAL by as much;
		// without this the file keeps that size for as long as serve runs.
		var busy, logPages, done int
		if err := s.wdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done); err != nil || busy != 0 {
			s.log.Warn("checkpoint after migration failed; the WAL shrinks at the next one", "err", err, "busy", busy)
		}
	}
	return nil
}

// checkVersion refuses a file this build cannot read.
func (s *Store) checkVersion(ctx context.Context) error {
	var cur int
	if err := s.rdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&cur); err != nil {
		return fmt.Errorf("read schema version of %s: %w", s.path, err)
	}
	if cur == 0 {
		return fmt.Errorf("%s is not a hookwarden database (schema version 0)", s.path)
	}
	if cur > SchemaVersion() {
		return fmt.Errorf("database %s has schema version %d, newer than this build's %d", s.path, cur, SchemaVersion())
	}
	return nil
}
