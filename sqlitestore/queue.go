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
	type leased struct {
		id, ref             int64
		attempts, deadCount int
	}
	var got []leased
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		got = got[:0]
		now := s.now()
		until := fmtTime(now.Add(leaseFor))
		rows, err := tx.StmtContext(ctx, s.stmts.lease).QueryContext(ctx, until, until, destination, fmtTime(now), max)
		if err != nil {
			return fmt.Errorf("lease jobs: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var l leased
			if err := rows.Scan(&l.id, &l.ref, &l.attempts, &l.deadCount); err != nil {
				return fmt.Errorf("lease jobs: %w", err)
			}
			got = append(got, l)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	jobs := make([]hookwarden.Job, 0, len(got))
	for _, l := range got {
		j := hookwarden.Job{ID: l.id, Destination: destination, Attempt: l.attempts, DeadCount: l.deadCount}
		if err := s.loadJobEvent(ctx, l.ref, &j); err != nil {
			// The lease stands; the job is due again when it expires.
			return jobs, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// loadJobEvent fills the event fields of a job from the read pool: the body of
// a single event is its first receipt's, a batch element's is its own.
func (s *Store) loadJobEvent(ctx context.Context, ref int64, j *hookwarden.Job) error {
	const q = `
SELECT e.source, e.event_id, e.event_type, COALESCE(e.body, r.body, x''), r.headers, r.received_at, e.body IS NOT NULL
FROM events e
JOIN receipts r ON r.id = COALESCE(
	(SELECT id FROM receipts WHERE event_ref = e.id AND kind = 'accepted'),
	(SELECT receipt_id FROM receipt_events WHERE event_ref = e.id AND kind = 'accepted'))
WHERE e.id = ?`
	var headers, at string
	var element bool
	err := s.rdb.QueryRowContext(ctx, q, ref).Scan(&j.Source, &j.EventID, &j.EventType, &j.Body, &headers, &at, &element)
	if err != nil {
		return fmt.Errorf("load event %d: %w", ref, err)
	}
	if j.ReceivedAt, err = parseTime(at); err != nil {
		return fmt.Errorf("load event %d: %w", ref, err)
	}
	if element {
		j.ContentType = "application/json" // batch elements are JSON values
	} else {
		j.ContentType = DecodeHeaders(headers).Get("Content-Type")
	}
	return nil
}

// Finish records an attempt and applies its verdict to the job.
func (s *Store) Finish(ctx context.Context, a hookwarden.Attempt) error {
	return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
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
		var err error
		switch a.Verdict {
		case hookwarden.Delivered:
			_, err = tx.StmtContext(ctx, s.stmts.delivered).ExecContext(ctx, now, a.JobID, a.Number)
		case hookwarden.Retry:
			_, err = tx.StmtContext(ctx, s.stmts.retry).ExecContext(ctx, fmtTime(a.RetryAt), errText, a.JobID, a.Number)
		case hookwarden.Dead:
			_, err = tx.StmtContext(ctx, s.stmts.dead).ExecContext(ctx, errText, now, a.JobID, a.Number)
		default:
			return fmt.Errorf("finish job %d: unknown verdict %q", a.JobID, a.Verdict)
		}
		if err != nil {
			return fmt.Errorf("finish job %d: %w", a.JobID, err)
		}
		return nil
	})
}

// NextDue is the earliest due time of a pending job of the destination.
func (s *Store) NextDue(ctx context.Context, destination string) (time.Time, bool, error) {
	var next sql.NullString
	err := s.rdb.QueryRowContext(ctx,
		`SELECT min(next_at) FROM jobs WHERE state = 'pending' AND destination = ?`, destination).Scan(&next)
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
	return t, true, nil
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

// OutboxStats reads pending depth, oldest pending age and dead letters per
// destination, one entry per name given (zeros included) plus any destination
// no longer configured that still has jobs. The partial indexes on pending and
// dead jobs keep this proportional to the outbox, not to the history.
func (s *Store) OutboxStats(ctx context.Context, destinations []string) ([]hookwarden.OutboxStat, error) {
	byName := make(map[string]*hookwarden.OutboxStat, len(destinations))
	order := append([]string(nil), destinations...)
	for _, d := range destinations {
		byName[d] = &hookwarden.OutboxStat{Destination: d}
	}
	now := s.now()
	rows, err := s.rdb.QueryContext(ctx, `
SELECT destination, 'p', count(*), min(COALESCE(replayed_at, created_at)) FROM jobs WHERE state = 'pending' GROUP BY destination
UNION ALL
SELECT destination, 'd', count(*), NULL FROM jobs WHERE state = 'dead' GROUP BY destination`)
	if err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var dest, kind string
		var n int
		var oldest sql.NullString
		if err := rows.Scan(&dest, &kind, &n, &oldest); err != nil {
			return nil, fmt.Errorf("outbox stats: %w", err)
		}
		st := byName[dest]
		if st == nil {
			st = &hookwarden.OutboxStat{Destination: dest}
			byName[dest] = st
			order = append(order, dest)
		}
		if kind == "p" {
			st.Pending = n
			if t, err := parseTime(oldest.String); err == nil {
				st.OldestPendingAge = max(now.Sub(t), 0)
			}
		} else {
			st.Dead = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox stats: %w", err)
	}
	out := make([]hookwarden.OutboxStat, len(order))
	for i, d := range order {
		out[i] = *byName[d]
	}
	return out, nil
}
