package main

// The one place the program picks its store. Everything else in this
// package, internal/admin and worker takes hookwarden.Store (or a smaller
// role of it); only here are the implementations named: sqlitestore on the
// file of database.path (or --db), pgstore on the database of
// database.url. The copies between them (export, migrate-store) are here
// too, through internal/storecopy.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/internal/storecopy"
	"github.com/hookwarden/hookwarden/pgstore"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// operatorReadCacheKiB is an operator command's page cache per read
// connection (sqlitestore.Options.ReadCacheKiB): at 10 M claims `events
// list --type` read 433 pages, each into fresh memory, with SQLite's
// default of 2,000 KiB.
const operatorReadCacheKiB = 256

// openStoreFile opens the store at path for an operator command. readOnly
// opens it with no writer and no migration: the file is never changed.
func openStoreFile(ctx context.Context, path string, readOnly bool, log *slog.Logger) (hookwarden.Store, error) {
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{ReadOnly: readOnly, Logger: log, ReadCacheKiB: operatorReadCacheKiB})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// openStoreURL opens the PostgreSQL store of database.url for an operator
// command. It migrates nothing: a schema that is not this build's is
// refused, so that a newer CLI never changes the schema under older serve
// processes.
func openStoreURL(ctx context.Context, db config.Database, log *slog.Logger) (hookwarden.Store, error) {
	return openPostgres(ctx, "database.url", db.URL, pgstore.Options{NoMigrate: true, Logger: log})
}

// openPostgres opens pgstore on the URL of key (database.url, or
// migrate-store's --to); its errors name the key. A refused setting is a
// configuration error (exit 2).
func openPostgres(ctx context.Context, key string, ref config.Secret, opts pgstore.Options) (*pgstore.Store, error) {
	url, err := ref.Resolve()
	if err != nil {
		return nil, usageErrorf("%s: %v", key, err)
	}
	if err := config.CheckPostgresURL(url); err != nil {
		return nil, usageErrorf("%s: %v", key, err)
	}
	s, err := pgstore.Open(ctx, url, opts)
	var se *pgstore.SettingError
	switch {
	case errors.As(err, &se):
		return nil, usageErrorf("%s: %v", key, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return s, nil
}

// openServeStore opens the store serve runs on. On SQLite it first makes
// this process the file's owner (one serve per file: a second would run
// workers on the same jobs) and refuses a file that is an export or was
// moved to PostgreSQL; on PostgreSQL many serve processes share the
// database, so there is no lock, and a setting that breaks durability is
// refused (exit 2). unlock gives the ownership up; call it after Close.
func openServeStore(ctx context.Context, cfg *config.Config, log *slog.Logger,
	onCommit func(batch int, d time.Duration, err error)) (s hookwarden.Store, unlock func() error, err error) {
	if cfg.Database.Postgres() {
		// Instance: instance_name, else the host's name and the listen
		// port, stable across restarts, so that gaps tells a restart from
		// an outage, and two receivers on one host are two instances.
		st, err := openPostgres(ctx, "database.url", cfg.Database.URL, pgstore.Options{
			Timeout: cfg.Limits.CommitTimeout.D(), Logger: log, OnCommit: onCommit, Instance: cfg.Instance()})
		if err != nil {
			return nil, nil, err
		}
		return st, func() error { return nil }, nil
	}
	path := cfg.Database.Path
	owner, err := sqlitestore.LockOwner(path, "hookwarden serve")
	if err != nil {
		return nil, nil, err
	}
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Logger: log, OnCommit: onCommit, RefuseMarked: true, Fold: true})
	if err != nil {
		_ = owner.Release()
		var me *sqlitestore.MarkError
		if errors.As(err, &me) {
			return nil, nil, usageErrorf("database.path: %v", err)
		}
		return nil, nil, fmt.Errorf("database.path %s: %w", path, err)
	}
	return st, owner.Release, nil
}

// newSQLite: cfg's store is an SQLite file that does not exist yet.
func newSQLite(cfg *config.Config) bool {
	if cfg.Database.Postgres() || cfg.Database.Path == "" {
		return false
	}
	_, err := os.Lstat(cfg.Database.Path)
	return errors.Is(err, fs.ErrNotExist)
}

// storeOwner says whether a serve owns the store at path, and which (its
// String names it for messages). It never creates anything.
func storeOwner(path string) (owner fmt.Stringer, owned bool, err error) {
	info, owned, err := sqlitestore.Owner(path)
	return info, owned, err
}

// schemaVersion is the schema version this build's SQLite store writes.
func schemaVersion() int { return sqlitestore.SchemaVersion() }

// verifyBackup opens the copy the way `--db FILE` will and checks it.
func verifyBackup(ctx context.Context, path string) error {
	b, err := sqlitestore.Open(ctx, path, sqlitestore.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("backup written to %s but it does not open: %w", path, err)
	}
	defer b.Close()
	var res string
	if err := b.DB().QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&res); err != nil {
		return fmt.Errorf("backup %s: quick_check: %w", path, err)
	}
	if res != "ok" {
		return fmt.Errorf("backup %s: quick_check: %s", path, res)
	}
	return nil
}

// backupRefusal is backup's answer on a store it does not back up
// (PostgreSQL), before anything is opened: nil when it can.
func backupRefusal(db config.Database) error {
	if db.Postgres() {
		return pgstore.ErrBackupRefused
	}
	return nil
}

// checkConnect is `check`'s look at database.url: it connects once and
// reports what serve would refuse, each problem at database.url. It
// writes nothing.
func checkConnect(ctx context.Context, db config.Database) []config.Problem {
	url, err := db.URL.Resolve()
	if err != nil || config.CheckPostgresURL(url) != nil {
		return nil // reported by Validate already
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := pgstore.Check(ctx, url, 5*time.Second)
	var se *pgstore.SettingError
	var ce *pgstore.ConnectError
	switch {
	case err == nil:
		if v > 0 && v < pgstore.SchemaVersion() {
			return []config.Problem{{Path: "database.url", Warning: true,
				Message: fmt.Sprintf("schema version %d: serve migrates it to %d at start", v, pgstore.SchemaVersion())}}
		}
		return nil
	case errors.As(err, &se):
		return []config.Problem{{Path: "database.url", Message: err.Error() + ": serve refuses to run on it"}}
	case errors.As(err, &ce):
		return []config.Problem{{Path: "database.url", Message: err.Error()}}
	case errors.Is(err, pgstore.ErrNewerSchema):
		return []config.Problem{{Path: "database.url", Message: err.Error()}}
	}
	return []config.Problem{{Path: "database.url", Message: err.Error()}}
}

// liveInstances is the count behind hookwarden_instances_up, for a store
// shared by several serve processes (ok=false: not such a store).
func liveInstances(s hookwarden.Store) (count func(ctx context.Context, stale time.Duration) (int, error), ok bool) {
	if p, isPG := s.(*pgstore.Store); isPG {
		return p.InstancesUp, true
	}
	return nil, false
}

// claimsInMemory is the SQLite store's count of the claims serve holds in
// memory; PostgreSQL holds none.
func claimsInMemory(s hookwarden.Store) (count func() int, ok bool) {
	if q, isSQLite := s.(*sqlitestore.Store); isSQLite {
		return q.ClaimsInMemory, true
	}
	return nil, false
}

// exportStore writes the rows of src (since since, when set) into a new
// SQLite file at dest, in this build's schema, marked as an export. dest
// must not exist; it appears complete or not at all.
func exportStore(ctx context.Context, src hookwarden.Store, dest string, since time.Time, log *slog.Logger) ([]storecopy.Count, error) {
	if _, err := os.Lstat(dest); err == nil {
		return nil, fmt.Errorf("%s: %w", dest, hookwarden.ErrExists)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(dest), "."+filepath.Base(dest)+".export-"+hex.EncodeToString(rnd[:]))
	// The copy is created here, new (O_EXCL opens no symlink), 0600, so
	// that SQLite opens a file this process made, never one planted at the
	// name.
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", dest, err)
	}
	if err := errors.Join(f.Chmod(0o600), f.Close()); err != nil {
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("create %s: %w", dest, err)
	}
	defer removeSQLite(tmp)
	out, err := sqlitestore.Open(ctx, tmp, sqlitestore.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", dest, err)
	}
	var counts []storecopy.Count
	err = withSource(ctx, src, func(s storecopy.Source) error {
		return out.Bulk(ctx, func(ctx context.Context, tx *sql.Tx) error {
			var err error
			counts, err = storecopy.Copy(ctx, s, storecopy.SQLiteDestination(tx), storecopy.Options{
				Since: since, Skip: []string{"schema_version", "store_marks"},
				// Which run of which instance holds a lease (PostgreSQL)
				// means nothing in an offline copy; leased_until stays.
				Drop: map[string][]string{"jobs": {"leased_by"}}})
			if err != nil {
				return err
			}
			return sqlitestore.SetMarkTx(ctx, tx, sqlitestore.Mark{Kind: sqlitestore.MarkExport, Since: since, Origin: src.Path()})
		})
	})
	if cerr := out.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	// Closing the last connection checkpoints the WAL into the file and
	// removes it; a WAL left behind would not follow the file's new name.
	if fi, err := os.Stat(tmp + "-wal"); err == nil && fi.Size() > 0 {
		return nil, fmt.Errorf("write %s: the copy's WAL was not checkpointed at close", dest)
	}
	// A link never replaces a file that appeared meanwhile.
	if err := os.Link(tmp, dest); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s: %w", dest, hookwarden.ErrExists)
		}
		return nil, fmt.Errorf("write %s: %w", dest, err)
	}
	return counts, nil
}

// removeSQLite removes a database file this process wrote and closed, with
// what SQLite may have left beside it.
func removeSQLite(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		_ = os.Remove(p)
	}
}

// withSource runs fn on one snapshot of the store s.
func withSource(ctx context.Context, s hookwarden.Store, fn func(storecopy.Source) error) error {
	switch st := s.(type) {
	case *sqlitestore.Store:
		tx, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("read %s: %w", s.Path(), err)
		}
		defer tx.Rollback()
		return fn(storecopy.SQLiteSource(tx))
	case *pgstore.Store:
		tx, err := st.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("read %s: %w", s.Path(), err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		return fn(storecopy.PostgresSource(tx))
	}
	return fmt.Errorf("export from %T: not supported", s)
}

// moveResult is what migrate-store did.
type moveResult struct {
	Counts []storecopy.Count
	Target string // the PostgreSQL database, without credentials
}

// errNotEmpty marks a target database that already holds a store.
var errNotEmpty = errors.New("not empty")

// migrateStore copies the stopped SQLite database at path into the empty
// PostgreSQL database at url, verifies the counts, and marks the file as
// moved so that serve refuses it. It holds the file's owner lock for the
// whole copy: no serve can start on it meanwhile. The PostgreSQL side is
// committed last, after the file is marked, so that a failure can leave
// the target empty but never both stores accepting events.
func migrateStore(ctx context.Context, path string, url config.Secret, log *slog.Logger) (moveResult, error) {
	var res moveResult
	if _, err := os.Stat(path); err != nil {
		return res, fmt.Errorf("database.path: %w", err)
	}
	owner, err := sqlitestore.LockOwner(path, "hookwarden migrate-store")
	if err != nil {
		return res, fmt.Errorf("database.path %s: %w: stop it first (migrate-store copies a stopped database)", path, err)
	}
	defer owner.Release()
	src, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Logger: log, RefuseMarked: true})
	if err != nil {
		var me *sqlitestore.MarkError
		if errors.As(err, &me) {
			return res, usageErrorf("database.path: %v", err)
		}
		return res, fmt.Errorf("database.path %s: %w", path, err)
	}
	defer src.Close()
	dst, err := openPostgres(ctx, "--to", url, pgstore.Options{Logger: log})
	if err != nil {
		return res, err
	}
	defer dst.Close()
	res.Target = dst.Path()

	tx, err := dst.Pool().Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("--to %s: %w", res.Target, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := requireEmpty(ctx, tx); err != nil {
		if errors.Is(err, errNotEmpty) {
			return res, usageErrorf("--to %s: %v: migrate-store copies into an empty database only", res.Target, err)
		}
		return res, fmt.Errorf("--to %s: %w", res.Target, err)
	}
	host, _ := os.Hostname()
	stx, err := src.DB().BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", path, err)
	}
	defer stx.Rollback()
	res.Counts, err = storecopy.Copy(ctx, storecopy.SQLiteSource(stx), storecopy.PostgresDestination(tx), storecopy.Options{
		Skip: []string{"store_marks"},
		// The appliance's runs were this machine's: the name pgstore
		// gives a serve here, so that gaps pairs its restarts.
		Fill: map[string]map[string]any{"runs": {"instance": host}},
	})
	if err != nil {
		return res, fmt.Errorf("copy into %s: %w", res.Target, err)
	}
	if err := src.SetMark(ctx, sqlitestore.Mark{Kind: sqlitestore.MarkMoved, Origin: src.Path(), Target: res.Target}); err != nil {
		return res, fmt.Errorf("mark %s as moved: %w (nothing was committed to %s)", path, err, res.Target)
	}
	if err := tx.Commit(ctx); err != nil {
		if cerr := src.ClearMark(context.WithoutCancel(ctx), sqlitestore.MarkMoved); cerr != nil {
			return res, fmt.Errorf("commit into %s: %w; %s stays marked as moved (%v): check %s before serving either",
				res.Target, err, path, cerr, res.Target)
		}
		return res, fmt.Errorf("commit into %s: %w (%s is unchanged)", res.Target, err, path)
	}
	return res, nil
}

// requireEmpty fails with errNotEmpty when the database holds any run,
// event, receipt, job, quarantined request or audit entry, after locking
// those tables against a serve starting meanwhile.
func requireEmpty(ctx context.Context, tx pgx.Tx) error {
	tables := []string{"runs", "events", "receipts", "jobs", "quarantine", "audit"}
	if _, err := tx.Exec(ctx, `LOCK TABLE runs, events, receipts, jobs, quarantine, audit IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return err
	}
	for _, t := range tables {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+t).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: table %s has %d rows", errNotEmpty, t, n)
		}
	}
	return nil
}

// exportMarks says what a file is when it is not a live database (an
// export, partial or not; a database moved to PostgreSQL), for the --db
// commands to show: nil for a live database or a server store.
func exportMarks(ctx context.Context, s hookwarden.Store) []string {
	st, ok := s.(*sqlitestore.Store)
	if !ok {
		return nil
	}
	ms, err := st.Marks(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ms {
		switch {
		case m.Kind == sqlitestore.MarkMoved:
			out = append(out, fmt.Sprintf("this database was moved to %s at %s", m.Target, m.At.UTC().Format(time.RFC3339)))
		case !m.Since.IsZero():
			out = append(out, fmt.Sprintf("partial export of %s: only what happened since %s (written %s)",
				m.Origin, m.Since.UTC().Format(time.RFC3339), m.At.UTC().Format(time.RFC3339)))
		default:
			out = append(out, fmt.Sprintf("export of %s written %s", m.Origin, m.At.UTC().Format(time.RFC3339)))
		}
	}
	return out
}

// countLine is the rows copied per table, non-empty tables only.
func countLine(counts []storecopy.Count) string {
	var b []byte
	for _, c := range counts {
		if c.Rows == 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = fmt.Appendf(b, "%s %d", c.Table, c.Rows)
	}
	if len(b) == 0 {
		return "no rows"
	}
	return string(b)
}

// fillHistory writes the benchmark's synthetic history into a new store
// (make bench, the history phase): the SQLite file at path, or, with url,
// the PostgreSQL database there (migrated first; it must hold no events).
// claims in all, payloads of them kept whole, each payload body bytes.
func fillHistory(ctx context.Context, path, url string, claims, payloads, body int, progress func(done int)) error {
	h := hookwarden.History{Claims: claims, Payloads: payloads, Source: "bench", Body: body}
	if url != "" {
		if err := config.CheckPostgresURL(url); err != nil {
			return usageErrorf("--url: %v", err)
		}
		// A transaction of the fill is thousands of rows, each counted by
		// the triggers: on a busy machine it outlasts the default bound of
		// a call, meant for requests.
		st, err := pgstore.Open(ctx, url, pgstore.Options{Timeout: 5 * time.Minute})
		if err != nil {
			return fmt.Errorf("--url: %w", err)
		}
		err = st.FillHistory(ctx, h, progress)
		st.Close()
		return err
	}
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		return err
	}
	err = st.FillHistory(ctx, h, progress)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}

// plannerStatsKeeper renews the database's statistics of the queue when a
// backlog has moved far from them (pgstore.Store.KeepPlannerStats; serve's
// plannerStatsLoop).
type plannerStatsKeeper interface {
	KeepPlannerStats(ctx context.Context) (bool, []pgstore.PlannerStats, error)
}

// Both stores warm their claim index and say when it needs no warm-up, and
// PostgreSQL keeps its planner's statistics: a rename there must not
// quietly turn any of them off.
var (
	_ claimWarmer        = (*sqlitestore.Store)(nil)
	_ claimWarmer        = (*pgstore.Store)(nil)
	_ warmUpDecider      = (*sqlitestore.Store)(nil)
	_ warmUpDecider      = (*pgstore.Store)(nil)
	_ plannerStatsKeeper = (*pgstore.Store)(nil)
)

// checkMarks opens the SQLite file read-only and reports the mark serve
// would refuse it for (moved first, as serve does), or a schema it cannot
// run. ok is true when serve would open it.
func checkMarks(ctx context.Context, path string) (config.Problem, bool) {
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{ReadOnly: true})
	if err != nil {
		return config.Problem{Path: "database.path", Message: fmt.Sprintf("%s: %v", path, err)}, false
	}
	defer s.Close()
	ms, err := s.Marks(ctx)
	if err != nil {
		return config.Problem{Path: "database.path", Message: fmt.Sprintf("%s: read its marks: %v", path, err)}, false
	}
	for _, kind := range []string{sqlitestore.MarkMoved, sqlitestore.MarkExport} {
		for _, m := range ms {
			if m.Kind == kind {
				return config.Problem{Path: "database.path", Message: (&sqlitestore.MarkError{Path: path, Mark: m}).Error()}, false
			}
		}
	}
	return config.Problem{}, true
}

// sqliteOwned reports whether a running serve owns the SQLite file at path
// (its lock is held).
func sqliteOwned(path string) bool {
	_, owned, err := sqlitestore.Owner(path)
	return err == nil && owned
}

// What app.go finds by type assertion, kept true: both stores let the
// receiver refuse a one-time token already recorded with another body
// before extraction and filters (receiver.Options.Tokens).
var (
	_ receiver.TokenReader = (*sqlitestore.Store)(nil)
	_ receiver.TokenReader = (*pgstore.Store)(nil)
)
