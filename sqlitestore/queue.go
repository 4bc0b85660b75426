package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// Lease marks up to max due pending jobs of the destination as in flight until
// now+leaseFor, counts the attempt, and returns them ready to deliver. The lease
// moves next_at to its own end, so a job whose worker died is simply due again
// when the lease expires: no separate rescuer.
func (s *Store) Lease(ctx context.Context, destination string, max int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	if max <= 0 {
		return nil, nil
	}
	var got []leased
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) (err error) {
		got, err = s.leaseTx(ctx, tx, destination, max, leaseFor)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.leasedJobs(ctx, destination, got)
}

// FinishAndLease is Finish, then Lease of up to max jobs of the destination,
// in one transaction: a worker that keeps its slot busy pays one commit per
// delivery instead of two. Both happen or neither does.
func (s *Store) FinishAndLease(ctx context.Context, a hookwarden.Attempt, destination string, max int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	var got []leased
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) (err error) {
		if err := s.finishTx(ctx, tx, a); err != nil {
			return err
		}
		if max > 0 {
			got, err = s.leaseTx(ctx, tx, destination, max, leaseFor)
		}
		return err
	})
	if err != nil || len(got) == 0 {
		return nil, err
	}
	// The attempt is recorded whatever happens now: a job whose event
	// cannot be read keeps its lease and is due again when it expires.
	jobs, err := s.leasedJobs(ctx, destination, got)
	if err != nil {
		s.log.Error("load leased jobs", "destination", destination, "err", err)
	}
	return jobs, nil
}

// leased is a job row as the lease statement returns it.
type leased struct {
	id, ref             int64
	attempts, deadCount int
	probe               bool
}

// leaseTx leases what flow control allows of max due jobs (gateTx), and
// records what it took (leasedTx).
func (s *Store) leaseTx(ctx context.Context, tx *sql.Tx, destination string, max int, leaseFor time.Duration) ([]leased, error) {
	now := s.now()
	g, err := s.gateTx(ctx, tx, destination, max, now)
	if err != nil || g.max <= 0 {
		return nil, err
	}
	got, err := s.leaseRowsTx(ctx, tx, destination, g.max, leaseFor, now)
	if err != nil {
		return nil, err
	}
	for i := range got {
		got[i].probe = g.probe
	}
	return got, s.leasedTx(ctx, tx, destination, g, len(got), now)
}

func (s *Store) leaseRowsTx(ctx context.Context, tx *sql.Tx, destination string, max int, leaseFor time.Duration, now time.Time) ([]leased, error) {
	until := fmtTime(now.Add(leaseFor))
	rows, err := tx.StmtContext(ctx, s.stmts.lease).QueryContext(ctx, until, until, destination, fmtTime(now), max)
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	defer rows.Close()
	var got []leased
	for rows.Next() {
		var l leased
		if err := rows.Scan(&l.id, &l.ref, &l.attempts, &l.deadCount); err != nil {
			return nil, fmt.Errorf("lease jobs: %w", err)
		}
		got = append(got, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	return got, nil
}

// leasedJobs completes leased rows with their events, in lease order. If
// an event cannot be read, the jobs before it are returned with the error;
// the lease of the others stands, and they are due again when it expires.
func (s *Store) leasedJobs(ctx context.Context, destination string, got []leased) ([]hookwarden.Job, error) {
	if len(got) == 0 {
		return nil, nil
	}
	refs := make([]int64, len(got))
	for i, l := range got {
		refs[i] = l.ref
	}
	events, err := s.loadJobEvents(ctx, refs)
	jobs := make([]hookwarden.Job, 0, len(got))
	for _, l := range got {
		j, ok := events[l.ref]
		if !ok {
			if err == nil {
				err = fmt.Errorf("load event %d: %w", l.ref, sql.ErrNoRows)
			}
			return jobs, err
		}
		j.ID, j.Destination, j.Attempt, j.DeadCount, j.Probe = l.id, destination, l.attempts, l.deadCount, l.probe
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// loadJobEvents reads the event fields of leased jobs from the read pool, in
// one query for the whole lease: the body of a single event is its first
// receipt's, a batch element's is its own. On error it returns what it read.
func (s *Store) loadJobEvents(ctx context.Context, refs []int64) (map[int64]hookwarden.Job, error) {
	out := make(map[int64]hookwarden.Job, len(refs))
	rows, err := s.reads.loadJobs.QueryContext(ctx, idSet(refs))
	if err != nil {
		return out, fmt.Errorf("load events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var j hookwarden.Job
		var ref int64
		var headers, at string
		var element bool
		if err := rows.Scan(&ref, &j.Source, &j.EventID, &j.EventType, &j.Body, &headers, &at, &element); err != nil {
			return out, fmt.Errorf("load events: %w", err)
		}
		if j.ReceivedAt, err = parseTime(at); err != nil {
			return out, fmt.Errorf("load event %d: %w", ref, err)
		}
		j.Header = decodeHeaders(headers)
		if element {
			j.ContentType = "application/json" // batch elements are JSON values
		} else {
			j.ContentType = j.Header.Get("Content-Type")
		}
		out[ref] = j
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("load events: %w", err)
	}
	return out, nil
}

// readStmts are the workers' reads, prepared once on the read pool (each
// pooled connection prepares them on first use): parsing the event query
// took longer than running it.
type readStmts struct {
	loadJobs, nextDue, flow *sql.Stmt
}

func (r *readStmts) prepare(ctx context.Context, db *sql.DB) error {
	var err error
	// The events are given as one JSON array of row ids, so that one
	// prepared statement serves a lease of any size.
	if r.loadJobs, err = db.PrepareContext(ctx, `
SELECT e.id, e.source, e.event_id, e.event_type, COALESCE(e.body, r.body, x''), r.headers, r.received_at, e.body IS NOT NULL
FROM json_each(?) AS k
CROSS JOIN events e ON e.id = k.value
JOIN receipts r ON r.id = COALESCE(
	(SELECT id FROM receipts WHERE event_ref = e.id AND kind = 'accepted'),
	(SELECT receipt_id FROM receipt_events WHERE event_ref = e.id AND kind = 'accepted'))`); err != nil {
		return fmt.Errorf("prepare statement: %w", err)
	}
	if r.nextDue, err = db.PrepareContext(ctx,
		`SELECT min(next_at) FROM jobs WHERE state = 'pending' AND destination = ?`); err != nil {
		r.close()
		return fmt.Errorf("prepare statement: %w", err)
	}
	if r.flow, err = db.PrepareContext(ctx, flowSelect); err != nil {
		r.close()
		return fmt.Errorf("prepare statement: %w", err)
	}
	return nil
}

func (r *readStmts) close() {
	for _, st := range []*sql.Stmt{r.loadJobs, r.nextDue, r.flow} {
		if st != nil {
			st.Close()
		}
	}
}

// Finish records an attempt and applies its verdict to the job.
func (s *Store) Finish(ctx context.Context, a hookwarden.Attempt) error {
	return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		return s.finishTx(ctx, tx, a)
	})
}

func (s *Store) finishTx(ctx context.Context, tx *sql.Tx, a hookwarden.Attempt) error {
	var status, exit any
	if a.StatusCode != 0 {
		status = a.StatusCode
	}
	if a.ExitCode >= 0 {
		exit = a.ExitCode
	}
	var errText any
	if a.Error != "" {
		errText = a.Error
	}
	if _, err := tx.StmtContext(ctx, s.stmts.attempt).ExecContext(ctx, a.JobID, a.Number, fmtTime(a.StartedAt),
		a.Duration.Microseconds(), status, exit, errText, a.Response, string(a.Verdict)); err != nil {
		return fmt.Errorf("insert attempt: %w", err)
	}
	now := fmtTime(s.now())
	var res sql.Result
	var err error
	switch a.Verdict {
	case hookwarden.Delivered:
		res, err = tx.StmtContext(ctx, s.stmts.delivered).ExecContext(ctx, now, a.JobID, a.Number)
	case hookwarden.Retry:
		res, err = tx.StmtContext(ctx, s.stmts.retry).ExecContext(ctx, fmtTime(a.RetryAt), errText, a.JobID, a.Number)
	case hookwarden.Dead:
		res, err = tx.StmtContext(ctx, s.stmts.dead).ExecContext(ctx, errText, now, a.JobID, a.Number)
	default:
		return fmt.Errorf("finish job %d: unknown verdict %q", a.JobID, a.Verdict)
	}
	if err != nil {
		return fmt.Errorf("finish job %d: %w", a.JobID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("finish job %d: %w", a.JobID, err)
	}
	return s.finishedTx(ctx, tx, a, n == 1)
}

// NextDue is the earliest due time of a pending job of the destination.
func (s *Store) NextDue(ctx context.Context, destination string) (time.Time, bool, error) {
	var next sql.NullString
	err := s.reads.nextDue.QueryRowContext(ctx, destination).Scan(&next)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due job: %w", err)
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	t, err := parseTime(next.String)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due job: %w", err)
	}
	return s.gateNextDue(ctx, destination, t)
}

// ReleaseLeases makes every job that was in flight when a previous process
// died due now. Call it once at start, before the workers run: hookwarden
// serve is the only process that leases jobs from a file.
func (s *Store) ReleaseLeases(ctx context.Context) (int64, error) {
	var n int64
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx,
			`UPDATE jobs SET next_at = ?, leased_until = NULL WHERE state = 'pending' AND leased_until IS NOT NULL`,
			fmtTime(s.now()))
		if err != nil {
			return fmt.Errorf("release leases: %w", err)
		}
		n, err = r.RowsAffected()
		return err
	})
	return n, err
}

// Unlease gives back the lease of a job that was committed leased to a slot
// (Direct) whose pool refused to start it: the pool began draining, for a
// reload or a stop, between the reservation and the commit. The attempt
// never ran, so it is not counted, and the job is due now for whichever pool
// serves the destination next, instead of when its lease would have ended.
// A job leased again or finished since is left alone.
func (s *Store) Unlease(ctx context.Context, job hookwarden.Job) error {
	return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE jobs SET attempts = attempts - 1, next_at = ?, leased_until = NULL
			WHERE id = ? AND state = 'pending' AND attempts = ? AND leased_until IS NOT NULL`,
			fmtTime(s.now()), job.ID, job.Attempt)
		if err != nil {
			return fmt.Errorf("unlease job %d: %w", job.ID, err)
		}
		return nil
	})
}

// outboxCountersSQL reads the outbox's counts.
const outboxCountersSQL = `SELECT name, kind, n FROM counters WHERE kind IN ('pending', 'dead') AND n != 0 ORDER BY name`

// OutboxStats reads pending depth, oldest pending age and dead letters per
// destination, one entry per name given (zeros included) plus any destination
// no longer configured that still has jobs. The counts are the counters
// table's (kept by triggers), the oldest pending job one seek on
// jobs_pending_age per destination with pending jobs: the cost follows the
// number of destinations, not the outbox or the history.
func (s *Store) OutboxStats(ctx context.Context, destinations []string) ([]hookwarden.OutboxStat, error) {
	byName := make(map[string]*hookwarden.OutboxStat, len(destinations))
	order := append([]string(nil), destinations...)
	for _, d := range destinations {
		byName[d] = &hookwarden.OutboxStat{Destination: d}
	}
	now := s.now()
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	err = eachRow(ctx, tx, outboxCountersSQL,
		func(rows *sql.Rows) error {
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
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	for _, st := range byName {
		if st.Pending == 0 {
			continue
		}
		t, err := oldestPending(ctx, tx, st.Destination)
		if err != nil {
			return nil, fmt.Errorf("outbox stats of %s: %w", st.Destination, err)
		}
		if !t.IsZero() {
			st.OldestPendingAge = max(now.Sub(t), 0)
			st.OldestPendingSeconds = st.OldestPendingAge.Seconds()
		}
	}
	out := make([]hookwarden.OutboxStat, len(order))
	for i, d := range order {
		out[i] = *byName[d]
	}
	return out, nil
}
