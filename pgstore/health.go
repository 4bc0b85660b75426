package pgstore

// Health (the store's half of /readyz and of the systemd watchdog), the
// count of live instances, and Backup, which a server store leaves to the
// server's own tools.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ hookwarden.Health = (*Store)(nil)

// health remembers the outcome of the last write. It sees every statement
// through the pool's tracer, so that every write path (Record, the queue,
// the run log, the operator's writes) counts without each one reporting:
// a write is an INSERT, UPDATE, DELETE, COPY or COMMIT, and a failure to
// get a connection at all (the server down, a setting refused on a new
// connection) counts as a failed write. Reads do not count. A caller that
// gave up (context.Canceled) says nothing about the database.
type health struct {
	mu      sync.Mutex
	lastErr error // nil when the last write succeeded
	errAt   time.Time

	onCommit func(batch int, d time.Duration, err error) // Options.OnCommit
	next     pgx.QueryTracer                             // another tracer to call (a test's), or nil
}

func (h *health) note(err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.lastErr, h.errAt = err, now
		return
	}
	h.lastErr = nil
}

// state is nil when the last write succeeded (or none failed yet).
func (h *health) state() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastErr != nil {
		return fmt.Errorf("last write failed at %s: %w", h.errAt.UTC().Format(time.RFC3339), h.lastErr)
	}
	return nil
}

// writeKey marks the context of a write statement; its value is the
// statement's start when it is a COMMIT (else the zero time).
type writeKey struct{}

// TraceQueryStart marks the context of a write statement.
func (h *health) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if h.next != nil {
		ctx = h.next.TraceQueryStart(ctx, c, d)
	}
	if !isWrite(d.SQL) {
		return ctx
	}
	var start time.Time
	if h.onCommit != nil && strings.EqualFold(strings.TrimSpace(d.SQL), "commit") {
		start = time.Now()
	}
	return context.WithValue(ctx, writeKey{}, start)
}

// TraceQueryEnd notes the outcome of a write statement, and times a COMMIT.
func (h *health) TraceQueryEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryEndData) {
	if h.next != nil {
		h.next.TraceQueryEnd(ctx, c, d)
	}
	start, ok := ctx.Value(writeKey{}).(time.Time)
	if !ok {
		return
	}
	h.note(d.Err)
	if !start.IsZero() {
		n, _ := ctx.Value(batchSizeKey{}).(int)
		h.onCommit(max(n, 1), time.Since(start), d.Err)
	}
}

// TraceBatchStart: a batch's statements are noted one by one.
func (h *health) TraceBatchStart(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if bt, ok := h.next.(pgx.BatchTracer); ok {
		ctx = bt.TraceBatchStart(ctx, c, d)
	}
	return ctx
}

// TraceBatchQuery notes the outcome of a write statement of a batch
// (Record's one-statement path sends its statement in one).
func (h *health) TraceBatchQuery(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	if bt, ok := h.next.(pgx.BatchTracer); ok {
		bt.TraceBatchQuery(ctx, c, d)
	}
	if isWrite(d.SQL) {
		h.note(d.Err)
	}
}

// TraceBatchEnd: a batch that failed as a whole (its connection lost) is
// a failed write.
func (h *health) TraceBatchEnd(ctx context.Context, c *pgx.Conn, d pgx.TraceBatchEndData) {
	if bt, ok := h.next.(pgx.BatchTracer); ok {
		bt.TraceBatchEnd(ctx, c, d)
	}
	if d.Err != nil {
		h.note(d.Err)
	}
}

func (h *health) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return ctx
}

func (h *health) TraceCopyFromEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceCopyFromEndData) {
	h.note(d.Err)
}

func (h *health) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return ctx
}

// TraceAcquireEnd counts a connection that could not be had as a failed
// write: every write needs one.
func (h *health) TraceAcquireEnd(_ context.Context, _ *pgxpool.Pool, d pgxpool.TraceAcquireEndData) {
	if d.Err != nil {
		h.note(d.Err)
	}
}

// isWrite tells a statement that changes the database (or commits the
// changes of its transaction) from a read.
func isWrite(sql string) bool {
	sql = strings.TrimLeft(sql, " \t\r\n(")
	i := strings.IndexAny(sql, " \t\r\n;")
	if i < 0 {
		i = len(sql)
	}
	switch strings.ToLower(sql[:i]) {
	case "insert", "update", "delete", "commit", "copy", "with":
		// WITH: the store writes its data-modifying CTEs this way; a read
		// in a WITH is noted as a success, which is true of the database.
		return true
	}
	return false
}

// Healthy reports whether the last write succeeded.
func (s *Store) Healthy() error {
	if s.closed.Load() {
		return errors.New("store closed")
	}
	return s.health.state()
}

// Ping proves the database writable by this instance: a one-row write
// (the schema_version row, rewritten unchanged) committed within
// Options.Timeout. A standby after a failover, a full disk or a setting
// refused on a new connection fail it.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE schema_version SET version = version`); err != nil {
		return fmt.Errorf("%w: ping %s: %w", hookwarden.ErrUnavailable, s.address, err)
	}
	return nil
}

// InstancesUp counts the serve processes on this database whose run has no
// stop and a heartbeat newer than stale, by the database's clock: the
// metric hookwarden_instances_up.
func (s *Store) InstancesUp(ctx context.Context, stale time.Duration) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM runs WHERE stopped_at IS NULL
		AND heartbeat_at > COALESCE($1::timestamptz, now()) - make_interval(secs => $2)`,
		s.now(), stale.Seconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count live instances: %w", err)
	}
	return n, nil
}

// ErrBackupRefused is Backup's answer: Hookwarden does not back up a
// PostgreSQL database; the server's tools do it better (pg_dump, or a base
// backup with WAL archiving), and `hookwarden export` writes the
// offline-forensics file. It wraps hookwarden.ErrNotSupported.
var ErrBackupRefused = fmt.Errorf("backup: the store is PostgreSQL (database.url): use pg_dump (or your provider's backups) "+
	"for the database, or `hookwarden export FILE` for an SQLite copy that every --db command reads (backup %w)",
	hookwarden.ErrNotSupported)

// Backup refuses with ErrBackupRefused and writes nothing.
func (s *Store) Backup(ctx context.Context, dest string, progress func(written, total int64)) error {
	return ErrBackupRefused
}
