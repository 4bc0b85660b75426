package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/internal/migrations"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// loadMigrations lists the embedded migrations in version order.
func loadMigrations() ([]migrations.Migration, error) {
	return migrations.Load(migrationFS, "migrations")
}

// SchemaVersion is the schema version this build writes: how many
// migrations it embeds (loadMigrations checks they are numbered 1 to n).
// It counts their names without reading them: every operator command asks.
func SchemaVersion() int {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return 0
	}
	return len(names)
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
	start := time.Now()
	for _, m := range ms[cur:] {
		if err := s.migrateOne(ctx, m); err != nil {
			return err
		}
		s.log.Debug("database migration applied", "version", m.Version, "migration", m.Name)
	}
	if len(ms) > cur {
		// One line, not one per migration: a new database runs them all.
		s.log.Info("database migrated", "from", cur, "to", len(ms), "migrations", len(ms)-cur,
			"took", time.Since(start).Round(time.Millisecond))
		// A step that rewrote many rows (schema 8) grew the WAL by as much;
		// without this the file keeps that size for as long as serve runs.
		var busy, logPages, done int
		if err := s.wdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done); err != nil || busy != 0 {
			s.log.Warn("checkpoint after migration failed; the WAL shrinks at the next one", "err", err, "busy", busy)
		}
	}
	return nil
}

// fkOff marks a migration that rebuilds a table others refer to: SQLite's
// way (https://sqlite.org/lang_altertable.html, "other kinds of table
// schema changes") runs it with foreign keys off, which a transaction
// cannot switch, and checks them all before the commit.
const fkOff = "-- hookwarden: foreign_keys off"

func (s *Store) migrateOne(ctx context.Context, m migrations.Migration) error {
	if strings.Contains(m.SQL, fkOff) {
		// The writer's pool holds one connection, so the pragma holds for
		// the transaction below.
		if _, err := s.wdb.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
			return fmt.Errorf("migrate to %d: %w", m.Version, err)
		}
		defer func() {
			if _, err := s.wdb.ExecContext(context.Background(), "PRAGMA foreign_keys = ON"); err != nil {
				s.log.Error("foreign keys stay off after migration", "version", m.Version, "err", err)
			}
		}()
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate to %d: %w", m.Version, err)
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("migrate to %d (%s): %w", m.Version, m.Name, err)
	}
	if strings.Contains(m.SQL, fkOff) {
		if err := foreignKeyCheck(ctx, tx); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migrate to %d (%s): foreign keys: %w", m.Version, m.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("migrate to %d: set version: %w", m.Version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate to %d: commit: %w", m.Version, err)
	}
	return nil
}

// foreignKeyCheck fails when a row refers to a missing one.
func foreignKeyCheck(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return err
	}
	defer rows.Close()
	if rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fkid int
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return err
		}
		return fmt.Errorf("row %d of %s refers to a missing row of %s", rowid.Int64, table, parent)
	}
	return rows.Err()
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
