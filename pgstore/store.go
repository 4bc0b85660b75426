// Package pgstore is Hookwarden's store on PostgreSQL 15 or later, for
// several receivers sharing one database, through
// github.com/jackc/pgx/v5 (pure Go: the binary stays CGO-free). The program
// selects it with database.url (cmd/hookwarden/store.go).
//
// Built: Open (a bounded pool whose every new connection is checked for
// fsync and synchronous_commit, migrations under an advisory lock, a newer
// schema refused; Options.NoMigrate for the operator's commands), Check (what
// `hookwarden check` asks of a database, writing nothing), the schema
// (migrations/0001_init.sql, the SQLite schema at version 8, and the
// migrations after it: lease holders, prune indexes, flow, backfill,
// counters kept by triggers, their rows one per server process and folded
// by Prune, listing indexes), Record (hookwarden.Recorder: a new single
// event in one statement, fresh.go, concurrent ones and their repeats in
// one transaction, batch.go; with the direct
// hand-over of SetDirect: a new job given a free slot is committed leased
// to this process's run and handed over after COMMIT), the queue
// (hookwarden.Queue: leases with FOR UPDATE SKIP LOCKED on the database's
// clock, each naming the run that holds it, in two round trips; a Finish
// one statement, shared by the Finishes under way at once, finish.go; and
// ReleaseLeases that gives back only the leases of processes that are
// gone, never another live instance's), the run log with gaps across instances (hookwarden.RunLog)
// and InstancesUp, the operator's reads (hookwarden.Inspector: events, dead
// letters, counts, held requests; plain reads that take no locks, every
// listing on an index) and writes (hookwarden.Operator: Replay, Prune,
// Audit, ReleaseQuarantined, DropQuarantined, each safe with several
// instances at once), flow control across instances (flow.go: pause and
// probes, the rate's bucket, concurrency, order_by; Pause, Resume,
// Destinations), Health (the last write's outcome through the pool's
// tracer; Ping a one-row write), and Backup, which refuses (pg_dump, or
// hookwarden export; export and migrate-store copy rows through
// internal/storecopy), and LISTEN/NOTIFY (notify.go: the transactions that
// make jobs due announce their destinations, Record's after its COMMIT, and
// SetDirect with a hookwarden.Waker starts a listener on a connection of
// its own that wakes the pool; polling stays the safety net).
package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ hookwarden.Store = (*Store)(nil)

// Options tune Open. The zero value is usable.
type Options struct {
	// MaxConns bounds the pool (default 16).
	MaxConns int32
	// ConnectTimeout bounds opening one connection when the URL sets no
	// connect_timeout (default 5s).
	ConnectTimeout time.Duration
	// Timeout bounds each call, waiting for a pooled connection included,
	// so that a hung database fails a Record with ErrUnavailable (the
	// receiver's 503) instead of holding it: limits.commit_timeout
	// (default 5s).
	Timeout time.Duration
	// Now, when set, replaces the database's clock (now()) in every
	// statement: for the conformance suite's hand-moved clock. Production
	// leaves it nil, so that every instance reads one clock.
	Now func() time.Time
	// Instance names this receiver in the run log, stable across its
	// restarts (default: the host's name), so gaps can tell a restart while
	// others served from an outage, and ReleaseLeases can tell its own
	// earlier runs' leases (given back at start) from another live
	// instance's (left alone). One name per serve process running at once.
	Instance string
	// Stale is how old a run's heartbeat may be before ReleaseLeases takes
	// the run for dead and gives its leases back (default 10s: five missed
	// heartbeats of serve's 2s, as gaps judges a run). Shorter risks
	// releasing a slow but live instance's jobs in flight, which are then
	// delivered twice; longer only delays a dead one's until their lease
	// ends.
	Stale time.Duration
	// Logger receives migration notices (default: discarded).
	Logger *slog.Logger
	// NoMigrate opens a database only when its schema is this build's
	// version, changing nothing: for the operator's commands, so that a
	// newer CLI never migrates a schema under older serve processes. serve
	// and migrate-store leave it false.
	NoMigrate bool
	// OnCommit, if set, is called after each COMMIT with the calls whose
	// writes it carries (a batch of Records, batch.go, or Finishes that
	// shared a statement, finish.go; else 1), how long the COMMIT took (a
	// statement that is its own transaction: the statement) and its error:
	// the store_commit metrics.
	OnCommit func(batch int, d time.Duration, err error)

	// tracer, set by a test, sees every statement the pool runs.
	tracer pgx.QueryTracer
	// batchers, set by a test or a benchmark, replaces the number of batch
	// transactions at once (batch.go); below 0, none: every Record on a
	// transaction of its own.
	batchers int
	// testHold, set by a test, is called by each batcher once it took a
	// call: the calls arriving while it blocks form one batch.
	testHold func()
	// testBatchTx, set by a test, runs in each batch's transaction before
	// its statement; testBatchCommit just before its COMMIT.
	testBatchTx, testBatchCommit func(ctx context.Context, tx pgx.Tx)
}

// Store is a Hookwarden store in a PostgreSQL database.
type Store struct {
	pool    *pgxpool.Pool
	opts    Options
	log     *slog.Logger
	address string               // host and database, never the password
	flow    hookwarden.FlowTable // SetFlow
	health  health
	closed  atomic.Bool

	// testReplayChecked, set by a test, runs in each replay batch between
	// the check of its rules and the reset.
	testReplayChecked func()

	run    atomic.Int64                      // this process's run (StartRun): the holder of its leases
	direct atomic.Pointer[hookwarden.Direct] // SetDirect
	// analyzedAt is when KeepPlannerStats last analyzed jobs (Unix ns).
	analyzedAt atomic.Int64

	listenCfg *pgx.ConnConfig // the LISTEN connection's: the pool's, without its tracer
	listen    listener        // started by SetDirect with a hookwarden.Waker
	announcer announcer       // Record's announcements, sent after its COMMIT
	batch     *batching       // Record's batches of new events (batch.go)
	finishes  finishGroup     // Finish calls waiting to share a statement
	noNotify  bool            // set by a benchmark: announce nothing

	// runStart is when this process's run began (StartRun, Unix ns; 0:
	// none): events timed before it are kept as late arrivals (sequence.go).
	runStart atomic.Int64
}

// SettingError is a server setting that breaks the promise of a durable
// 200: serve must exit 2 naming it.
type SettingError struct {
	Setting string // "fsync" or "synchronous_commit"
	Value   string
	Why     string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("PostgreSQL setting %s = %s refused: %s", e.Setting, e.Value, e.Why)
}

// ErrNewerSchema is returned by Open when the database's schema is newer
// than this build's.
var ErrNewerSchema = errors.New("schema newer than this build")

// ErrOlderSchema is returned by Open with Options.NoMigrate when the
// database's schema is older than this build's.
var ErrOlderSchema = errors.New("schema older than this build")

// noParallel is the session's max_parallel_workers_per_gather, which
// checkSettings sets on every connection. The store's statements read what
// their answer needs through indexes, so a parallel plan only appears
// where an estimate is wrong (a listing on statistics older than the last
// hour's claims), and then each worker is a process the server starts for
// the statement: a listing that reads 11 buffers took 28 ms to start two,
// 44 ms in all against 1.3 ms without (docs/performance.md). A URL that
// sets it keeps its own value.
const noParallel = "0"

// checkSettings refuses a connection on which a commit can be answered
// before it is durable, and sets the session's noParallel.
func checkSettings(ctx context.Context, c *pgx.Conn) error {
	// The session's max_parallel_workers_per_gather in the same round trip,
	// unless the URL gave it. A set_config, not a startup parameter:
	// PgBouncer refuses a startup parameter it does not track.
	parallel := "current_setting('max_parallel_workers_per_gather')"
	if _, ok := c.Config().RuntimeParams["max_parallel_workers_per_gather"]; !ok {
		parallel = "set_config('max_parallel_workers_per_gather', '" + noParallel + "', false)"
	}
	var fsync, sync, standbys string
	if err := c.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('synchronous_standby_names'), `+parallel).Scan(&fsync, &sync, &standbys, new(string)); err != nil {
		return fmt.Errorf("read durability settings: %w", err)
	}
	switch {
	case fsync != "on":
		return &SettingError{"fsync", fsync, "the server does not flush its WAL: a crash loses acknowledged events"}
	case sync == "off":
		return &SettingError{"synchronous_commit", sync, "a commit returns before its WAL is flushed: a crash loses acknowledged events"}
	case sync == "local" && standbys != "":
		return &SettingError{"synchronous_commit", sync, "synchronous_standby_names is set but commits do not wait for the standby: a failover loses acknowledged events"}
	}
	return nil
}

// Open connects to the database at url, checks its settings and migrates
// its schema. Errors from the server's settings wrap a *SettingError, a
// newer schema ErrNewerSchema.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.MaxConns <= 0 {
		opts.MaxConns = 16
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Stale <= 0 {
		opts.Stale = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return nil, errors.New("parse database url: not a valid PostgreSQL URL")
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	}
	cfg.MaxConns = opts.MaxConns
	cfg.AfterConnect = checkSettings
	s := &Store{opts: opts, log: log, address: address(cfg.ConnConfig), listenCfg: cfg.ConnConfig.Copy()}
	s.health.onCommit = opts.OnCommit
	s.health.next = opts.tracer // a test's, seeing every statement too
	cfg.ConnConfig.Tracer = &s.health
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("open %s: %w", s.address, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if n := cmp.Or(opts.batchers, batchers); n > 0 {
		s.batch = newBatching(s, n)
	}
	return s, nil
}

// Path is the database's address (host, port and database name).
func (s *Store) Path() string { return s.address }

// address names a database for messages: host, port and database, never
// the user or the password.
func address(c *pgx.ConnConfig) string {
	// An unescaped @ in the password leaves its tail in Host: never print it.
	host := c.Host
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = "…" + host[i+1:]
	}
	return fmt.Sprintf("postgres://%s:%d/%s", host, c.Port, c.Database)
}

// Close stops the listener, sends the announcements gathered and closes
// the pool, waiting for the calls under way.
func (s *Store) Close() error {
	s.closed.Store(true)
	if s.batch != nil {
		s.batch.close() // the batches under way commit; later calls run on their own
	}
	s.stopListener()
	s.flushAnnouncements()
	s.pool.Close()
	return nil
}

// Pool is the store's pool, for tests' queries.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// bound gives a call its deadline: Options.Timeout, or ctx's if sooner.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// now is the time argument of statements: nil stands for the database's
// clock (each statement writes COALESCE($n, now())), unless Options.Now
// replaces it.
func (s *Store) now() any {
	if s.opts.Now == nil {
		return nil
	}
	return s.opts.Now().UTC()
}
