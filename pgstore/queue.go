package pgstore

// The queue: leases, finishes and unleases, with sqlitestore's semantics
// on several instances at once. Every time is the database's clock (or
// Options.Now in tests), never an instance's.
//
// Unlike SQLite's, a lease here leaves next_at alone (see the schema's
// comment on jobs): it writes only attempts and leased_until, so that it is
// a HOT update. A pending job is therefore due when next_at has passed and
// its lease, if any, has expired; the time it becomes due is the later of
// next_at and leased_until.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ hookwarden.Queue = (*Store)(nil)

// leaseSQL leases up to $2 due jobs of destination $1 until now ($4, or the
// database's clock) plus $3 microseconds, to run $5 (the holder, NULL
// outside a run), and reads what their delivery needs in the same statement
// (one round trip). The holder is a column no index covers: the lease stays
// a HOT update. SKIP LOCKED in the sub-select lets instances leasing at
// once take disjoint jobs without waiting on each other; a row another
// lease committed meanwhile is re-checked against the WHERE clause on its
// new version, so it is not taken twice. The body of a single event is its
// accepted receipt's, a batch element's is its own. The LEFT JOINs keep a
// job whose event cannot be read, so that it is reported, as sqlitestore
// reports it.
const leaseSQL = `
WITH leased AS (
	UPDATE jobs SET attempts = attempts + 1,
		leased_until = COALESCE($4::timestamptz, now()) + $3::bigint * interval '1 microsecond', leased_by = $5::bigint
	WHERE id IN (
		SELECT id FROM jobs
		WHERE destination = $1 AND state = 'pending' AND next_at <= COALESCE($4::timestamptz, now())
			AND (leased_until IS NULL OR leased_until <= COALESCE($4::timestamptz, now()))
		ORDER BY next_at, id
		FOR UPDATE SKIP LOCKED
		LIMIT $2)
	RETURNING id, event_ref, attempts, dead_count, next_at)
SELECT l.id, l.event_ref, l.attempts, l.dead_count, r.id IS NOT NULL,
	COALESCE(e.source, ''), COALESCE(e.event_id, ''), COALESCE(e.event_type, ''),
	COALESCE(e.body, r.body, ''::bytea), COALESCE(r.headers, ''), COALESCE(r.received_at, 'epoch'::timestamptz),
	e.body IS NOT NULL
FROM leased l
LEFT JOIN events e ON e.id = l.event_ref
LEFT JOIN receipts r ON r.id = COALESCE(
	(SELECT id FROM receipts WHERE event_ref = e.id AND kind = 'accepted' ORDER BY id LIMIT 1),
	(SELECT receipt_id FROM receipt_events WHERE event_ref = e.id AND kind = 'accepted' ORDER BY receipt_id LIMIT 1))
ORDER BY l.next_at, l.id`

// Lease marks up to max due pending jobs of the destination as in flight
// until now+leaseFor, counts the attempt, and returns them ready to
// deliver, oldest due first. A job whose worker died is due again when its
// lease expires, on whichever instance leases next: no separate rescuer.
// If a job's event cannot be read, the jobs before it are returned with
// the error; the lease of the others stands until it expires.
func (s *Store) Lease(ctx context.Context, destination string, max int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	if max <= 0 {
		return nil, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	jobs, loadErr, err := s.leasePiped(ctx, nil, destination, max, leaseFor)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", hookwarden.ErrUnavailable, err)
	}
	return jobs, loadErr
}

// FinishAndLease is Finish, then Lease of up to max jobs of the
// destination, in one transaction: a worker that keeps its slot busy pays
// one commit per delivery instead of two. Both happen or neither does.
func (s *Store) FinishAndLease(ctx context.Context, a hookwarden.Attempt, destination string, max int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	if err := checkVerdict(a); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, s.Finish(ctx, a)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var jobs []hookwarden.Job
	var loadErr, err error
	if s.finishFlow(a) {
		err = s.inTx(ctx, func(tx pgx.Tx) error {
			if err := s.finishTx(ctx, tx, a); err != nil {
				return err
			}
			jobs, loadErr = s.leaseTx(ctx, tx, destination, max, leaseFor)
			if loadErr != nil && !errors.Is(loadErr, errNoEvent) {
				return loadErr // the statement failed: roll the finish back too
			}
			return nil
		})
	} else {
		jobs, loadErr, err = s.leasePiped(ctx, &a, destination, max, leaseFor)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", hookwarden.ErrUnavailable, err)
	}
	if loadErr != nil {
		// The attempt is recorded whatever happens now: a job whose event
		// cannot be read keeps its lease and is due again when it expires.
		s.log.Error("load leased jobs", "destination", destination, "err", loadErr)
	}
	return jobs, nil
}

// leasePiped is leaseTx, after the finish of attempt a when a is not nil
// (one whose finish changes no flow state), in one transaction of two
// round trips where each statement was one: BEGIN, the flow row's lock,
// the finish and the count of leases in flight go in one batch, the lease
// and COMMIT in a second (a rate or a probe adds the flow row's update
// between them). The statements are still separate, so the snapshots of
// the finish and the count are taken after the lock (inflightSQL). The
// flow row is held for those two round trips and the commit: leases of
// the destination on other connections and Record's hand-over (which
// skips a held row) wait less. loadErr wraps errNoEvent (the lease
// committed) or is nil; err says nothing committed.
func (s *Store) leasePiped(ctx context.Context, a *hookwarden.Attempt, dest string, max int, leaseFor time.Duration) (jobs []hookwarden.Job, loadErr, err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire a connection: %w", err)
	}
	defer c.Release()
	defer rollback(ctx, c) // a no-op once committed
	p := s.policy(dest)
	// A chained slot's FinishAndLease of one job ends a lease in flight and
	// takes one: the number in flight cannot grow, so the count (one more
	// statement, inflightSQL) is needed only when the lease it ends was not
	// counted by the others, finishLiveSQL's live.
	swap := a != nil && max == 1 && p.Concurrency > 0
	counted := p.Concurrency > 0 && !swap
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(flowLockSQL, dest, s.now())
	if a != nil {
		sql, args := s.finishStatement(*a, swap)
		b.Queue(sql, args...)
	}
	if counted {
		b.Queue(inflightSQL, dest, s.now())
	}
	br := c.SendBatch(ctx, b)
	_, err = br.Exec()
	var f flowRow
	var now time.Time
	found := true
	if err == nil {
		if f, now, err = scanFlow(br.QueryRow()); errors.Is(err, pgx.ErrNoRows) {
			found, err = false, nil
		}
	}
	live := false
	if err == nil && a != nil {
		if swap {
			var j finishedJob
			switch err = br.QueryRow().Scan(&j.dest, &j.key, &j.now, &live); {
			case errors.Is(err, pgx.ErrNoRows):
				err = nil // a stale attempt: nothing ended
			case err == nil:
				live = live && j.dest == dest
			}
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			err = fmt.Errorf("finish job %d: %w", a.JobID, err)
		}
	}
	var inflight int
	if err == nil && counted {
		if err = br.QueryRow().Scan(&inflight); err != nil {
			err = fmt.Errorf("count leases of %s: %w", dest, err)
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	if !found {
		// The flow row was inserted by the lock's statement, which cannot
		// see its own insert (readFlow): read it, once per destination's
		// life.
		if f, now, err = scanFlow(c.QueryRow(ctx, flowLockSQL, dest, s.now())); err != nil {
			return nil, nil, fmt.Errorf("read flow state of %s: %w", dest, err)
		}
		counted = false
	}
	if p.Concurrency > 0 && !counted && !live {
		if err := c.QueryRow(ctx, inflightSQL, dest, now).Scan(&inflight); err != nil {
			return nil, nil, fmt.Errorf("count leases of %s: %w", dest, err)
		}
	}
	g := gate(p, f, now, max)
	if p.Concurrency > 0 {
		g.limit = min(g.limit, p.Concurrency-inflight)
	}
	if g.limit <= 0 {
		return nil, nil, s.commit(ctx, c)
	}
	if !p.Rate.IsZero() || g.probe {
		rows, err := c.Query(ctx, leaseSQL, dest, g.limit, leaseFor.Microseconds(), now, s.holder())
		if err != nil {
			return nil, nil, fmt.Errorf("lease jobs: %w", err)
		}
		if jobs, loadErr = s.leased(ctx, c, dest, rows, g, now); loadErr != nil && !errors.Is(loadErr, errNoEvent) {
			return nil, nil, loadErr
		}
		return jobs, loadErr, s.commit(ctx, c)
	}
	b = &pgx.Batch{}
	b.Queue(leaseSQL, dest, g.limit, leaseFor.Microseconds(), now, s.holder())
	b.Queue("commit")
	start := time.Now()
	br = c.SendBatch(ctx, b)
	rows, err := br.Query()
	if err == nil {
		jobs, loadErr = leasedJobs(rows, dest)
		if loadErr != nil && !errors.Is(loadErr, errNoEvent) {
			br.Close()
			return nil, nil, loadErr
		}
	} else {
		err = fmt.Errorf("lease jobs: %w", err)
	}
	if err == nil {
		if _, err = br.Exec(); err != nil {
			err = fmt.Errorf("%w: %w", errCommit, err)
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("%w: %w", errCommit, cerr)
	}
	s.committed(1, time.Since(start), err)
	if err != nil {
		return nil, nil, err
	}
	return jobs, loadErr, nil
}

// flowLockSQL locks dest's ($1) flow row for the transaction, inserting it
// first, and reads it with the store's clock ($2, NULL: now()). A row this
// statement inserted is not visible to its own SELECT: no row then.
const flowLockSQL = `WITH up AS (INSERT INTO destination_flow (destination) VALUES ($1) ON CONFLICT DO NOTHING)
	SELECT pause, failures, next_probe_at, tokens, tokens_at, COALESCE($2::timestamptz, now())
	FROM destination_flow WHERE destination = $1 FOR UPDATE`

// scanFlow reads a row of flowLockSQL.
func scanFlow(row pgx.Row) (flowRow, time.Time, error) {
	var f flowRow
	var failures *int
	var now time.Time
	if err := row.Scan(&f.pause, &failures, &f.nextProbe, &f.tokens, &f.tokensAt, &now); err != nil {
		return flowRow{}, time.Time{}, err
	}
	if failures != nil {
		f.failures = *failures
	}
	return f, now.UTC(), nil
}

// commit commits c's transaction.
func (s *Store) commit(ctx context.Context, c *pgxpool.Conn) error {
	if _, err := c.Exec(ctx, "commit"); err != nil {
		return fmt.Errorf("%w: %w", errCommit, err)
	}
	return nil
}

// committed reports a COMMIT the tracer does not see as one (a batch's, or
// the implicit one of a statement sent alone) of n calls' writes to
// Options.OnCommit.
func (s *Store) committed(n int, d time.Duration, err error) {
	if s.health.onCommit != nil {
		s.health.onCommit(n, d, err)
	}
}

// rollback ends c's transaction, if one is open (the pool closes a
// connection it gets back in one).
func rollback(ctx context.Context, c *pgxpool.Conn) {
	if c.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_, _ = c.Exec(rctx, "rollback")
}

// errNoEvent marks a leased job whose event (or its accepted receipt)
// cannot be read.
var errNoEvent = errors.New("event not found")

// leasedJobs reads the lease statement's rows, in lease order, and closes
// them. A statement error wraps hookwarden.ErrUnavailable; a job without
// its event ends the list with an error wrapping errNoEvent.
func leasedJobs(rows pgx.Rows, destination string) ([]hookwarden.Job, error) {
	defer rows.Close()
	var jobs []hookwarden.Job
	var missing error
	for rows.Next() {
		var j hookwarden.Job
		var ref int64
		var found, element bool
		var headers string
		if err := rows.Scan(&j.ID, &ref, &j.Attempt, &j.DeadCount, &found, &j.Source, &j.EventID, &j.EventType,
			&j.Body, &headers, &j.ReceivedAt, &element); err != nil {
			return jobs, fmt.Errorf("%w: lease jobs: %w", hookwarden.ErrUnavailable, err)
		}
		if missing != nil {
			continue // read to the end so that the statement's outcome is known
		}
		if !found {
			missing = fmt.Errorf("load event %d: %w", ref, errNoEvent)
			continue
		}
		j.Destination = destination
		j.ReceivedAt = j.ReceivedAt.UTC()
		j.Header = decodeHeaders(headers)
		if element {
			j.ContentType = "application/json" // batch elements are JSON values
		} else {
			j.ContentType = j.Header.Get("Content-Type")
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return jobs, fmt.Errorf("%w: lease jobs: %w", hookwarden.ErrUnavailable, err)
	}
	return jobs, missing
}

// Finish records an attempt and applies its verdict to the job. The
// verdict of a stale attempt (the job was leased again since, or finished)
// is kept in the attempt log but does not change the job. A finish that
// changes no flow state (finishFlow) is one statement, its own
// transaction (one round trip where BEGIN, the two writes and COMMIT were
// four), shared with the finishes under way at once (finish.go).
func (s *Store) Finish(ctx context.Context, a hookwarden.Attempt) error {
	if err := checkVerdict(a); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var err error
	if s.finishFlow(a) {
		err = s.inTx(ctx, func(tx pgx.Tx) error { return s.finishTx(ctx, tx, a) })
	} else {
		err = s.finishGrouped(ctx, a)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", hookwarden.ErrUnavailable, err)
	}
	return nil
}

func checkVerdict(a hookwarden.Attempt) error {
	switch a.Verdict {
	case hookwarden.Delivered, hookwarden.Retry, hookwarden.Dead:
		return nil
	}
	return fmt.Errorf("finish job %d: unknown verdict %q", a.JobID, a.Verdict)
}

// finishSQL records an attempt and applies its verdict in one statement,
// by verdict: the attempt's row and the job's update are data-modifying
// CTEs. The verdict applies only to the lease that made the attempt
// (attempts = its number): a late finish of an attempt whose lease expired
// and was leased again is logged but must not overwrite the newer
// attempt's outcome. A row comes back only when the verdict applied, with
// what flow control reads of the job. $1 job, $2 attempt number, $3
// started, $4 duration (µs), $5 status, $6 exit code, $7 error, $8
// response, $9 verdict, $10 the store's clock (NULL: now()); $11 the retry's
// due time.
var finishSQL = func() map[hookwarden.Verdict]string {
	const head = `WITH a AS (
	INSERT INTO attempts (job_id, number, started_at, duration_us, status_code, exit_code, error, response, verdict)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
), j AS (
	UPDATE jobs SET `
	const tail = `
	WHERE id = $1 AND state = 'pending' AND attempts = $2
	RETURNING destination, order_key)
SELECT destination, order_key, COALESCE($10::timestamptz, now()) FROM j`
	return map[hookwarden.Verdict]string{
		hookwarden.Delivered: head + `state = 'delivered', leased_until = NULL, last_error = NULL,
		finished_at = COALESCE($10::timestamptz, now())` + tail,
		hookwarden.Retry: head + `next_at = $11::timestamptz, leased_until = NULL, last_error = $7` + tail,
		hookwarden.Dead: head + `state = 'dead', leased_until = NULL, last_error = $7,
		finished_at = COALESCE($10::timestamptz, now()), dead_count = dead_count + 1` + tail,
	}
}()

// finishLiveSQL is finishSQL returning also whether the lease the
// attempt ends was live: its end after the store's clock ($10) or, on the
// database's, clock_timestamp(), in a statement after the flow row's lock.
// Every transaction that counts the leases in flight holds that lock; one
// that held it before counted them at its now(), earlier than this
// clock_timestamp(), so it counted a lease live here. Those after see it
// ended and the new one taken.
var finishLiveSQL = func() map[hookwarden.Verdict]string {
	m := make(map[hookwarden.Verdict]string, len(finishSQL))
	for v, sql := range finishSQL {
		sql = strings.Replace(sql, "WITH a AS (", `WITH o AS (
	SELECT leased_until > COALESCE($10::timestamptz, clock_timestamp()) AS live FROM jobs WHERE id = $1
), a AS (`, 1)
		m[v] = strings.Replace(sql, "COALESCE($10::timestamptz, now()) FROM j",
			"COALESCE($10::timestamptz, now()), COALESCE((SELECT live FROM o), false) FROM j", 1)
	}
	return m
}()

// finishStatement is a's finishSQL (finishLiveSQL with live) and its
// arguments.
func (s *Store) finishStatement(a hookwarden.Attempt, live bool) (string, []any) {
	var status, exit, errText any
	if a.StatusCode != 0 {
		status = a.StatusCode
	}
	if a.ExitCode >= 0 {
		exit = a.ExitCode
	}
	if a.Error != "" {
		errText = cleanText(a.Error)
	}
	args := []any{a.JobID, a.Number, a.StartedAt.UTC(), a.Duration.Microseconds(), status, exit, errText, a.Response,
		string(a.Verdict), s.now()}
	if a.Verdict == hookwarden.Retry {
		args = append(args, a.RetryAt.UTC())
	}
	if live {
		return finishLiveSQL[a.Verdict], args
	}
	return finishSQL[a.Verdict], args
}

// finishTx records the attempt, applies its verdict (finishSQL) and then
// what it changes of flow control, in tx.
func (s *Store) finishTx(ctx context.Context, tx pgx.Tx, a hookwarden.Attempt) error {
	sql, args := s.finishStatement(a, false)
	var j finishedJob
	switch err := tx.QueryRow(ctx, sql, args...).Scan(&j.dest, &j.key, &j.now); {
	case errors.Is(err, pgx.ErrNoRows):
		return s.finishedTx(ctx, tx, a, nil)
	case err != nil:
		return fmt.Errorf("finish job %d: %w", a.JobID, err)
	}
	j.now = j.now.UTC()
	return s.finishedTx(ctx, tx, a, &j)
}

// inTx runs fn in a transaction and commits it.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		// After Commit this is a no-op; on a dead connection it returns at once.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%w: %w", errCommit, err)
	}
	return nil
}

// nextDueSQL: the earliest time a pending job of the destination becomes
// due, the later of its next_at and its lease's end. The jobs_due index
// gives the first job not leased (U, whose time is its next_at; every
// entry before it is a leased job); a job not leased cannot be earlier
// than U, and a leased one counts at the later of its next_at and its
// lease's end, found through job_leases (schema 12), which holds exactly
// the pending jobs with a lease: as many as are in flight, not the
// backlog. (One statement over jobs with next_at <= U, U a parameter the
// planner cannot see, was planned as a walk of every pending job through
// jobs_pending_event at 300,000 parked: 105,621 rows filtered out, 127 ms.)
// The leased jobs are probed by id (= ANY of an array): a join of
// job_leases with jobs was planned as a merge join reading jobs' primary
// key from its start (213,457 rows for 31 leases, 193 ms).
const nextDueSQL = `
SELECT LEAST(
	(SELECT next_at FROM jobs WHERE destination = $1 AND state = 'pending' AND leased_until IS NULL
		ORDER BY next_at LIMIT 1),
	(SELECT min(GREATEST(next_at, leased_until)) FROM jobs
		WHERE id = ANY (ARRAY(SELECT job_id FROM job_leases WHERE destination = $1)) AND state = 'pending'))`

// NextDue is the earliest due time of a pending job of the destination
// (ok=false: none), a job in flight counting at its lease's end.
func (s *Store) NextDue(ctx context.Context, destination string) (time.Time, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var next *time.Time
	if err := s.pool.QueryRow(ctx, nextDueSQL, destination).Scan(&next); err != nil {
		return time.Time{}, false, fmt.Errorf("next due job: %w", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return s.gateNextDue(ctx, destination, next.UTC())
}

// holder is the lease holder this store writes: its run, NULL before
// StartRun (a lease taken outside serve belongs to no live process).
func (s *Store) holder() any {
	if id := s.run.Load(); id != 0 {
		return id
	}
	return nil
}

// releaseSQL gives back the leases of processes that are gone, their
// attempts counted: those of this instance's other runs ($2 is its name, $3
// its current run, NULL before StartRun: an instance starts after its
// earlier process died), of runs that stopped, whose heartbeat is older
// than $4 microseconds by the store's clock ($1) or whose row is gone, and
// those taken outside a run. The lease of a live run of another instance
// is left alone: that process is delivering the job now. The leased jobs
// are those job_leases names, probed by id: leased_until is in no index,
// and a walk of the pending jobs read the whole backlog at every start
// (173,056 rows, 398 ms, with 213,000 parked).
const releaseSQL = `
UPDATE jobs j SET next_at = LEAST(j.next_at, COALESCE($1::timestamptz, now())), leased_until = NULL, leased_by = NULL
WHERE j.id = ANY (ARRAY(SELECT job_id FROM job_leases)) AND j.state = 'pending' AND j.leased_until IS NOT NULL
	AND ($3::bigint IS NULL OR j.leased_by IS DISTINCT FROM $3)
	AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = j.leased_by AND r.instance <> $2
		AND r.stopped_at IS NULL
		AND r.heartbeat_at >= COALESCE($1::timestamptz, now()) - $4::bigint * interval '1 microsecond')`

// ReleaseLeases makes the jobs leased by processes that are gone due now,
// their attempt counted: this instance's earlier runs (it is starting, so
// they died), runs of any instance that stopped or whose heartbeat is older
// than Options.Stale, and leases taken outside a run. Another live
// instance's leases stand: its jobs in flight are not delivered twice.
// Call it once at start, before the workers run.
//
// An instance is its Options.Instance (the host's name by default): two
// serve processes sharing one name count as one instance, and each one's
// start releases the other's leases. Give each its own name.
func (s *Store) ReleaseLeases(ctx context.Context) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// next_at already passed when the job was leased: LEAST keeps it (its
	// place in the order, and a HOT update) unless it is somehow later.
	// Announced (notify.go): other live instances may deliver them now.
	tag, err := s.pool.Exec(ctx, s.notifying(releaseSQL+` RETURNING destination`), s.now(), s.instance(), s.holder(), s.opts.Stale.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("%w: release leases: %w", hookwarden.ErrUnavailable, err)
	}
	return tag.RowsAffected(), nil
}

// Unlease gives back the lease of a job handed to a slot whose pool
// refused to start it. The attempt never ran, so it is not counted, and the
// job is due now for whichever pool or instance serves the destination
// next. A job leased again or finished since is left alone.
func (s *Store) Unlease(ctx context.Context, job hookwarden.Job) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// Announced (notify.go): another instance may have a free slot.
	if _, err := s.pool.Exec(ctx, s.notifying(`UPDATE jobs SET attempts = attempts - 1,
		next_at = LEAST(next_at, COALESCE($1::timestamptz, now())), leased_until = NULL
		WHERE id = $2 AND state = 'pending' AND attempts = $3 AND leased_until IS NOT NULL
		RETURNING destination`),
		s.now(), job.ID, job.Attempt); err != nil {
		return fmt.Errorf("%w: unlease job %d: %w", hookwarden.ErrUnavailable, job.ID, err)
	}
	return nil
}

// OutboxStats reads pending depth, oldest pending age (on the store's
// clock) and dead letters per destination, one entry per name given
// (zeros included) plus any other destination that still has jobs. The
// counts are the counters' (summed over their shards), the oldest pending
// job one seek on jobs_pending_age per destination with pending jobs: the
// cost follows the destinations, not the outbox or the history. Delivered
// is left zero (Stats counts it).
func (s *Store) OutboxStats(ctx context.Context, destinations []string) ([]hookwarden.OutboxStat, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	byName := make(map[string]*hookwarden.OutboxStat, len(destinations))
	order := append([]string(nil), destinations...)
	for _, d := range destinations {
		byName[d] = &hookwarden.OutboxStat{Destination: d}
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT COALESCE($1::timestamptz, now())`, s.now()).Scan(&now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
SELECT name, kind, n FROM (SELECT name, kind, sum(n)::bigint AS n FROM counters WHERE kind IN ('pending', 'dead') GROUP BY name, kind) c
WHERE n <> 0 ORDER BY name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var dest, kind string
			var n int
			if err := rows.Scan(&dest, &kind, &n); err != nil {
				return err
			}
			st := byName[dest]
			if st == nil {
				st = &hookwarden.OutboxStat{Destination: dest}
				byName[dest] = st
				order = append(order, dest)
			}
			if kind == "pending" {
				st.Pending = n
			} else {
				st.Dead = n
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, st := range byName {
			if st.Pending == 0 {
				continue
			}
			oldest, err := oldestPending(ctx, tx, st.Destination)
			if err != nil {
				return err
			}
			if oldest != nil {
				st.OldestPendingAge = max(now.Sub(*oldest), 0)
				st.OldestPendingSeconds = st.OldestPendingAge.Seconds()
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	out := make([]hookwarden.OutboxStat, len(order))
	for i, d := range order {
		out[i] = *byName[d]
	}
	return out, nil
}
