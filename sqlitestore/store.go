// Package sqlitestore keeps Hookwarden's receipts, claims, outbox and attempt
// log in one WAL-mode SQLite file.
//
// Guarantees:
//   - Every write goes through one writer goroutine on one connection, in
//     BEGIN IMMEDIATE transactions committed with synchronous=FULL. When a
//     write method returns nil, its effect survives power loss.
//   - Writes are group-committed: the writer takes every request waiting in
//     its queue (up to MaxBatch) into one transaction, so throughput is not
//     bound to one fsync per request. If a batch fails, each request in it is
//     retried alone, so one bad request cannot fail its neighbours.
//   - The queue in front of the writer is bounded; when it is full, Record
//     fails at once with hookwarden.ErrUnavailable instead of growing memory.
//   - Reads use a separate small pool of query_only connections.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookwarden/hookwarden"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Options configure a Store. The zero value of each field is a sane default.
type Options struct {
	// MaxBatch caps how many write requests share one transaction (default 256).
	// Larger batches amortise the fsync; smaller ones cap the latency of a batch.
	MaxBatch int
	// QueueSize bounds the write requests waiting for the writer (default 4096).
	// A full queue answers ErrUnavailable (503) rather than buffering without limit.
	QueueSize int
	// Readers caps the read-only connection pool (default 4).
	Readers int
	// Now is the clock (default time.Now); tests inject their own.
	Now func() time.Time
	// Logger receives internal errors (default slog.Default()).
	Logger *slog.Logger
	// OnCommit, if set, is called by the writer after each transaction with the
	// number of requests in it, how long the commit took and its error.
	OnCommit func(batch int, d time.Duration, err error)
	// ReadOnly opens the file for reading only: no writer, no migrations. For
	// offline forensics on a copy; the file is never modified.
	ReadOnly bool
	// RefuseMarked makes Open fail with a *MarkError on a file that is an
	// export or was moved to PostgreSQL (serve sets it): neither is a live
	// database. The file is left unchanged.
	RefuseMarked bool
	// Fold makes this store fold the dedup memory's log into claims
	// (fold.go) and read the log's index at Open. serve sets it: one
	// process per file may fold, and serve is the one that runs for long.
	Fold bool
	// FoldMin is the log's claims below which none is folded into the
	// large level of the dedup memory (default 1,048,576), and FoldChunk
	// the claims one fold transaction moves (default 512); see fold.go.
	// Tests make both small to fold at once.
	FoldMin, FoldChunk int
	// FoldIdle is how long the writer waits with nothing to write before
	// it takes a fold step (default 20 ms): the fold yields to a burst,
	// and runs beside one only once the log holds twice its limit.
	FoldIdle time.Duration
	// ReadCacheKiB is each read connection's page cache in KiB (0:
	// SQLite's default, 2,000). An operator command, which reads a page
	// or two of each of a few hundred rows and exits, sets a small one:
	// every page that enters the cache takes fresh memory, and on a VM a
	// first touch of memory (a page fault, 12 µs on the AMD host) costs
	// four times reading the page again from the OS's cache (3 µs).
	ReadCacheKiB int

	// partBlocks, set by a test, replaces filterPartBlocks: the blocks of
	// the claims filter in each part the writer keeps.
	partBlocks int
}

// Store is the SQLite implementation of hookwarden.Store. It is safe for
// concurrent use.
type Store struct {
	path string
	opts Options
	now  func() time.Time
	log  *slog.Logger

	wdb *sql.DB // exactly one connection, owned by the writer goroutine
	rdb *sql.DB // query_only readers

	ops      chan *op
	quit     chan struct{}
	done     chan struct{} // closed when the writer goroutine has exited
	closing  atomic.Bool
	closeErr error
	once     sync.Once
	// Background work beside the writer (the claims filter's build):
	// stopped and waited for by Close.
	bgCtx  context.Context
	bgStop context.CancelFunc
	bg     sync.WaitGroup

	stmts  writeStmts
	fstmts flowStmts  // flow control's, on the writer's connection too
	fold   foldState  // the writer's
	claims claimIndex // the log's look-up by key (claimindex.go)
	reads  readStmts  // prepared on rdb; not in a read-only store

	direct atomic.Pointer[hookwarden.Direct] // SetDirect
	handed []handed                          // jobs created leased by the writer's current transaction
	// flow is the flow policy per destination (SetFlow); txPaused caches,
	// for the writer's current transaction, which destinations are paused
	// (directAllowed).
	flow     hookwarden.FlowTable // SetFlow
	txPaused map[string]bool

	// filterKept: Open read the claims filter the file kept
	// (WarmUpNeeded). Set before the writer starts, never changed.
	filterKept bool
	// testCrash, set by a test, makes Close leave the file as a crash
	// would: no filter written at the stop.
	testCrash bool

	healthMu  sync.Mutex
	lastOK    time.Time
	lastErr   error
	lastErrAt time.Time

	// runStart is when this process's run began (StartRun, Unix ns; 0:
	// none): events timed before it are kept as late arrivals (sequence.go).
	runStart atomic.Int64
}

// An op is one write request: fn runs inside the writer's transaction and must
// be safe to run again (the writer retries it alone if its batch fails).
type op struct {
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error
	// rec, when set, is the Record request fn commits; the writer may commit
	// several of them together with multi-row statements instead (recordMany).
	rec *recordOp
	// claims says fn may claim an event: the claim index must be built
	// before its transaction begins.
	claims bool
}

// walAutocheckpoint is the writer's wal_autocheckpoint, in pages.
const walAutocheckpoint = 300

// dsn builds a modernc DSN. Pragmas go in the DSN so that every pooled
// connection gets them, not just the one a db.Exec happened to use.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		// The automatic checkpoint runs inside the commit that crosses it,
		// so every request of that batch (and of the one queued behind it)
		// waits for it. Small, frequent checkpoints keep that wait short:
		// at 64 connections 300 pages gave a p99 1.5 times the ack-only
		// baseline's against 1.6-1.9 with SQLite's default of 1,000 and
		// 2.6 with 4,000, at the same throughput (docs/performance.md).
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walAutocheckpoint))
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// Open opens (creating if needed) the database at path, migrates it forward
// and starts the writer.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 4096
	}
	if opts.Readers <= 0 {
		opts.Readers = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	s := &Store{path: abs, opts: opts, now: opts.Now, log: opts.Logger,
		quit: make(chan struct{}), done: make(chan struct{})}
	s.bgCtx, s.bgStop = context.WithCancel(context.Background())

	if opts.ReadOnly {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		if err := s.openReaders(ctx, true); err != nil {
			return nil, err
		}
		if err := s.checkVersion(ctx); err != nil {
			s.rdb.Close()
			return nil, err
		}
		close(s.done)
		s.closing.Store(true)
		return s, nil
	}

	if err := createPrivate(abs); err != nil {
		return nil, err
	}
	s.wdb, err = sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if opts.RefuseMarked {
		if err := s.refuseMarked(ctx); err != nil {
			s.wdb.Close()
			return nil, err
		}
	}
	if err := s.migrate(ctx); err != nil {
		s.wdb.Close()
		return nil, err
	}
	// A statement that writes several rows in a transaction of several
	// statements (the writer's multi-row inserts and their triggers) first
	// copies each page it changes to a statement journal, so that it can
	// undo itself alone. Past 64 KiB SQLite spills that journal to a temp
	// file, a write(2) a page: 7 % of a recording benchmark's CPU, more on
	// a deep file (docs/performance.md). In memory it is a copy, as large
	// as the pages one statement changes. Set after the migrations, whose
	// CREATE INDEX sorts whole tables in the same temp store, on disk; the
	// pool's one connection keeps it (a replaced connection would journal
	// to disk again: slower, not wrong).
	if _, err := s.wdb.ExecContext(ctx, "PRAGMA temp_store = MEMORY"); err != nil {
		s.wdb.Close()
		return nil, fmt.Errorf("open database %s: %w", s.path, err)
	}
	if err := s.stmts.prepare(ctx, s.wdb); err != nil {
		s.wdb.Close()
		return nil, err
	}
	if err := s.fstmts.prepare(ctx, s.wdb); err != nil {
		s.stmts.close()
		s.wdb.Close()
		return nil, err
	}
	if err := s.fold.stmts.prepare(ctx, s.wdb); err != nil {
		s.fstmts.close()
		s.stmts.close()
		s.wdb.Close()
		return nil, err
	}
	if err := s.openReaders(ctx, false); err != nil {
		s.wdb.Close()
		return nil, err
	}
	if err := s.reads.prepare(ctx, s.rdb); err != nil {
		s.rdb.Close()
		s.wdb.Close()
		return nil, err
	}
	if opts.Fold {
		// Before the first request: serve is not ready until it can claim.
		start := time.Now()
		if err := s.buildClaimIndex(ctx); err != nil {
			s.rdb.Close()
			s.wdb.Close()
			return nil, err
		}
		if err := s.startFold(ctx); err != nil {
			s.rdb.Close()
			s.wdb.Close()
			return nil, fmt.Errorf("read the fold's state: %w", err)
		}
		s.log.Info("claims log read into memory", "claims", s.claims.size(), "took", time.Since(start).Round(time.Millisecond))
		s.claims.filters.built = make(chan builtFilter)
		if s.claims.filters.cur, err = s.readKeptFilter(ctx); err != nil {
			s.rdb.Close()
			s.wdb.Close()
			return nil, err
		}
		s.filterKept = s.claims.filters.cur != nil
	}
	s.ops = make(chan *op, opts.QueueSize)
	s.lastOK = s.now()
	go s.writer()
	return s, nil
}

// createPrivate makes the database's directory (0700) and the database file
// (0600) when they do not exist yet, whatever the umask, before SQLite opens
// the file: SQLite gives the -wal and -shm files the database file's mode,
// and would otherwise create it 0644 less the umask. Existing ones are left
// as the operator made them. The file is opened only when it is new, so no
// descriptor of a file SQLite holds is ever closed here.
func createPrivate(path string) error {
	if err := privateDir(filepath.Dir(path)); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	err = f.Chmod(0o600)
	return errors.Join(err, f.Close())
}

// privateDir creates dir 0700 (and its missing parents) if it does not exist.
func privateDir(dir string) error {
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}
	return nil
}

func (s *Store) openReaders(ctx context.Context, readOnlyFile bool) error {
	d := dsn(s.path, true)
	if s.opts.ReadCacheKiB > 0 {
		d += "&_pragma=" + url.QueryEscape(fmt.Sprintf("cache_size(-%d)", s.opts.ReadCacheKiB))
	}
	if readOnlyFile {
		// mode=ro: never create or modify anything in a forensic copy.
		d += "&mode=ro"
	}
	rdb, err := sql.Open("sqlite", d)
	if err != nil {
		return fmt.Errorf("open database readers: %w", err)
	}
	rdb.SetMaxOpenConns(s.opts.Readers)
	rdb.SetMaxIdleConns(s.opts.Readers)
	if err := rdb.PingContext(ctx); err != nil {
		rdb.Close()
		return fmt.Errorf("open database %s: %w", s.path, err)
	}
	s.rdb = rdb
	return nil
}

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// DB returns the read-only pool, for read queries of other packages' tests and
// of forensic commands.
func (s *Store) DB() *sql.DB { return s.rdb }

// Close stops accepting writes, commits what is queued, and closes the file.
func (s *Store) Close() error {
	s.once.Do(func() {
		if s.wdb != nil {
			s.closing.Store(true)
			close(s.quit)
			<-s.done
			s.bgStop()
			s.bg.Wait()
			if s.opts.Fold && !s.testCrash {
				// Not a failed close: the next start builds the filter.
				if err := s.keepFilter(context.Background()); err != nil {
					s.log.Warn("the claims filter is built anew at the next start", "err", err)
				}
			}
			s.stmts.close()
			s.fstmts.close()
			s.fold.stmts.close()
			s.closeErr = errors.Join(s.closeErr, s.wdb.Close())
		}
		if s.rdb != nil {
			s.reads.close()
			s.closeErr = errors.Join(s.closeErr, s.rdb.Close())
		}
	})
	return s.closeErr
}

var _ hookwarden.Store = (*Store)(nil)

// errClosed is returned for writes after Close has begun.
var errClosed = fmt.Errorf("%w: shutting down", hookwarden.ErrUnavailable)

// write queues fn for the writer and waits for its transaction to commit.
// With wait=false a full queue fails at once (the receiver's backpressure);
// otherwise it waits for room until ctx ends.
func (s *Store) write(ctx context.Context, wait bool, fn func(context.Context, *sql.Tx) error) error {
	return s.writeOp(ctx, wait, &op{fn: fn, done: make(chan error, 1)})
}

// writeClaims is write for a function that may claim an event.
func (s *Store) writeClaims(ctx context.Context, fn func(context.Context, *sql.Tx) error) error {
	return s.writeOp(ctx, true, &op{fn: fn, done: make(chan error, 1), claims: true})
}

// writeOp is write for a prepared op.
func (s *Store) writeOp(ctx context.Context, wait bool, o *op) error {
	if s.closing.Load() {
		return errClosed
	}
	if wait {
		select {
		case s.ops <- o:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return errClosed
		}
	} else {
		select {
		case s.ops <- o:
		default:
			return fmt.Errorf("%w: write queue full", hookwarden.ErrUnavailable)
		}
	}
	// Once queued, the op will run even if ctx ends: wait for its result
	// unless the caller gives up, which does not undo the commit.
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		// The writer drains the queue before it exits, so the result is ready.
		select {
		case err := <-o.done:
			return err
		default:
			return errClosed
		}
	}
}

// writer is the only goroutine that writes. It exits after quit is closed and
// the queue is drained.
func (s *Store) writer() {
	defer close(s.done)
	batch := make([]*op, 0, s.opts.MaxBatch)
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	var stepTook time.Duration // the last wake-up's idle fold step; 0: it was not one
	for {
		batch = batch[:0]
		var idleC <-chan time.Time
		if s.foldDue() || s.keepDue() {
			// Quiet for FoldIdle: a fold step; then the next while it
			// stays quiet, after a pause as long as the step (at most
			// FoldIdle). Back to back, the steps starved the other
			// processes that write the file: a command's write gets
			// the lock only when it retries while no step holds it, and
			// SQLite's busy handler retries at growing intervals, so
			// an idle prune pass beside a fold waited 185-233 ms.
			wait := s.foldIdle()
			if stepTook > 0 {
				wait = min(stepTook, wait)
			}
			idle.Reset(wait)
			idleC = idle.C
		}
		if s.filterDue() {
			s.startFilterBuild()
		}
		select {
		case b := <-s.claims.filters.built:
			s.installFilter(b)
			continue
		case <-idleC:
			if len(s.ops) > 0 { // a write came with the timer: it goes first
				stepTook = 0
				continue
			}
			start := time.Now()
			if s.keepDue() { // before the fold, whose insert may delete the kept one
				s.idleKeep()
			} else {
				s.idleFold()
			}
			stepTook = max(time.Since(start), time.Nanosecond)
			continue
		case o := <-s.ops:
			stepTook = 0
			idle.Stop()
			batch = append(batch, o)
		case <-s.quit:
			idle.Stop()
			// Drain whatever was queued before Close, then stop.
			for {
				select {
				case o := <-s.ops:
					batch = append(batch, o)
					if len(batch) == s.opts.MaxBatch {
						s.commitBatch(batch)
						batch = batch[:0]
					}
				default:
					if len(batch) > 0 {
						s.commitBatch(batch)
					}
					return
				}
			}
		}
		// Group commit: take everything already waiting, without waiting for more.
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		s.commitBatch(batch)
		s.afterCommit()
	}
}

func (s *Store) commitBatch(batch []*op) {
	err := s.runTx(batch)
	if err == nil {
		for _, o := range batch {
			o.done <- nil
		}
		return
	}
	if len(batch) == 1 {
		batch[0].done <- err
		return
	}
	// Isolate the failure: each op again in its own transaction.
	for _, o := range batch {
		o.done <- s.runTx([]*op{o})
	}
}

// runTx runs ops in one IMMEDIATE transaction. Any failure, including of the
// commit itself (SQLITE_FULL, SQLITE_IOERR), rolls back all of them.
func (s *Store) runTx(ops []*op) (err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: panic in write: %v", hookwarden.ErrUnavailable, p)
		}
		s.noteCommit(len(ops), time.Since(start), err)
	}()
	// The transaction must not be cut short by a caller giving up: that would
	// turn one impatient client into a failed batch for everyone.
	ctx := context.Background()
	s.handed = s.handed[:0]
	clear(s.txPaused)
	for _, o := range ops {
		if o.claims || o.rec != nil {
			// Outside the write lock: a command-line writer reads the log
			// from a snapshot without holding up serve.
			if err := s.buildClaimIndex(ctx); err != nil {
				return fmt.Errorf("%w: %w", hookwarden.ErrUnavailable, err)
			}
			break
		}
	}
	s.claims.claimsBegin()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%w: begin: %w", hookwarden.ErrUnavailable, err)
	}
	committed := false
	var logTop int64
	defer func() {
		if !committed {
			_ = tx.Rollback()
			s.claims.claimsBegin() // its claims never were
		} else {
			s.claims.claimsAfterCommit(logTop)
		}
		handOver(s.handed, committed)
		clear(s.handed) // drop the bodies
		s.handed = s.handed[:0]
	}()
	// Plain receipts of a batch share multi-row statements; a lone one, and
	// every other write, runs its own function.
	var many []*recordOp
	if len(ops) > 1 {
		for _, o := range ops {
			if o.rec != nil && o.rec.single() {
				many = append(many, o.rec)
			}
		}
	}
	if len(many) > 1 {
		if err := s.recordMany(ctx, tx, many); err != nil {
			return fmt.Errorf("%w: %w", hookwarden.ErrUnavailable, err)
		}
	} else {
		many = nil
	}
	for _, o := range ops {
		if many != nil && o.rec != nil && o.rec.single() {
			continue
		}
		if err := o.fn(ctx, tx); err != nil {
			return fmt.Errorf("%w: %w", hookwarden.ErrUnavailable, err)
		}
	}
	if logTop, err = s.claimsBeforeCommit(ctx, tx); err != nil {
		return fmt.Errorf("%w: %w", hookwarden.ErrUnavailable, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %w", hookwarden.ErrUnavailable, err)
	}
	committed = true
	return nil
}

func (s *Store) noteCommit(n int, d time.Duration, err error) {
	s.healthMu.Lock()
	if err != nil {
		s.lastErr, s.lastErrAt = err, s.now()
	} else {
		// The outcome, not the times, decides: an injected clock may give
		// a failure and the success after it the same time.
		s.lastOK, s.lastErr = s.now(), nil
	}
	s.healthMu.Unlock()
	if err != nil {
		s.log.Error("store write failed", "batch", n, "err", err)
	}
	if s.opts.OnCommit != nil {
		s.opts.OnCommit(n, d, err)
	}
}

// Healthy reports whether the last write succeeded. It is the store's half of
// /readyz and of the systemd watchdog.
func (s *Store) Healthy() error {
	if s.wdb == nil {
		return errors.New("store opened read-only")
	}
	select {
	case <-s.done:
		return errClosed
	default:
	}
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	if s.lastErr != nil {
		return fmt.Errorf("last write failed at %s: %w", s.lastErrAt.UTC().Format(time.RFC3339), s.lastErr)
	}
	return nil
}

// Ping proves the writer is alive and the file writable: it commits an empty
// IMMEDIATE transaction through the writer queue.
func (s *Store) Ping(ctx context.Context) error {
	return s.write(ctx, true, func(context.Context, *sql.Tx) error { return nil })
}

// timeFormat is fixed-width UTC so that text order is time order.
const timeFormat = "2006-01-02T15:04:05.000000Z"

// TimeFormat is how every time column is stored, for tools that copy rows
// in and out (export, migrate-store).
const TimeFormat = timeFormat

func fmtTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeFormat, s) }
