package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
// It counts their names without reading them: every operator command asks,
// some more than once.
func SchemaVersion() int {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return 0
	}
	return len(names)
}

// migrateLock is the session advisory lock that serializes migrations of
// instances starting at once: "hookwarden" in ASCII.
const migrateLock int64 = 0x686f6f6b77617264

// migrate brings the schema forward under the advisory lock, one
// transaction per migration with its version; it refuses a newer schema.
func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		var se *SettingError
		if errors.As(err, &se) {
			return fmt.Errorf("%s: %w", s.address, se)
		}
		return connectError(s.address, err)
	}
	defer conn.Release()
	if s.opts.NoMigrate {
		return s.checkVersion(ctx, conn.Conn(), SchemaVersion())
	}
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return fmt.Errorf("migrate %s: take the migration lock: %w", s.address, err)
	}
	defer func() {
		// A failed unlock leaves the lock with the session: close it.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLock); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	cur, err := schemaVersion(ctx, conn.Conn())
	if err != nil {
		return fmt.Errorf("read schema version of %s: %w", s.address, err)
	}
	if cur > len(ms) {
		return newerSchema(s.address, cur, len(ms))
	}
	for _, m := range ms[cur:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE schema_version SET version = $1`, m.Version)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s to %d (%s): %w", s.address, m.Version, m.Name, err)
		}
		s.log.Info("database migrated", "version", m.Version, "migration", m.Name)
	}
	return nil
}

// checkVersion is Open's check with Options.NoMigrate: the schema must be
// this build's. It changes nothing, so it takes no migration lock: an
// operator's command does not wait behind a migration under way (it sees
// the version before or after each migration's commit, which carries it).
func (s *Store) checkVersion(ctx context.Context, c *pgx.Conn, want int) error {
	cur, err := schemaVersion(ctx, c)
	switch {
	case err != nil:
		return fmt.Errorf("read schema version of %s: %w", s.address, err)
	case cur > want:
		return newerSchema(s.address, cur, want)
	case cur < want:
		return fmt.Errorf("database %s has schema version %d, older than this build's %d: "+
			"start serve with this build first (it migrates), or use the hookwarden that serves it: %w",
			s.address, cur, want, ErrOlderSchema)
	}
	return nil
}

func newerSchema(address string, cur, want int) error {
	return fmt.Errorf("database %s has schema version %d, newer than this build's %d: use a newer hookwarden: %w",
		address, cur, want, ErrNewerSchema)
}

// schemaVersion reads the version of the schema (0: none yet). One
// statement, not a look-up of the table first: every CLI command opens the
// store, and on a new backend each statement costs a round trip and its
// catalogue reads. Callers hold no transaction, so the error of a missing
// table aborts nothing.
func schemaVersion(ctx context.Context, c *pgx.Conn) (int, error) {
	var v int
	err := c.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
		return 0, nil
	}
	return v, err
}
