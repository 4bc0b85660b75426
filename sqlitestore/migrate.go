package sqlitestore

import (
	"context"
	"embed"
	"fmt"

	"github.com/hookwarden/hookwarden/internal/migrations"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// loadMigrations lists the embedded migrations in version order.
func loadMigrations() ([]migrations.Migration, error) {
	return migrations.Load(migrationFS, "migrations")
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate brings the schema forward, one transaction per migration, recording
// the version in PRAGMA user_version inside the same transaction.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
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
			return fmt.Errorf("migrate to %d: %w", m.Version, err)
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migrate to %d (%s): %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migrate to %d: set version: %w", m.Version, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate to %d: commit: %w", m.Version, err)
		}
		s.log.Info("database migrated", "version", m.Version, "migration", m.Name)
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
