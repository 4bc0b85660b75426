package pgstore

// The run log across instances: every serve process records its run, with
// the instance it belongs to, on the database's clock; gaps are the windows
// when no instance was up.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

var _ hookwarden.RunLog = (*Store)(nil)

// instance is the name runs are recorded under: Options.Instance, else the
// host's name. It must outlive a process so that a restart can be paired
// with the run before it.
func (s *Store) instance() string {
	if s.opts.Instance != "" {
		return s.opts.Instance
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown"
}

// StartRun records the start of a serve process on this instance. The run
// is the holder of every lease the store takes from then on (jobs.leased_by),
// so that ReleaseLeases on another instance can tell them from a dead one's.
func (s *Store) StartRun(ctx context.Context, version string) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var id int64
	var started time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO runs (instance, started_at, heartbeat_at, version, pid)
		VALUES ($1, COALESCE($2::timestamptz, now()), COALESCE($2::timestamptz, now()), $3, $4) RETURNING id, started_at`,
		s.instance(), s.now(), version, os.Getpid()).Scan(&id, &started)
	if err != nil {
		return 0, fmt.Errorf("record run start: %w", err)
	}
	s.runStart.Store(started.UnixNano())
	s.run.Store(id) // the holder of the leases this process takes from now on
	return id, nil
}

// Heartbeat records that the run is alive now, by the database's clock.
func (s *Store) Heartbeat(ctx context.Context, run int64) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE runs SET heartbeat_at = COALESCE($1::timestamptz, now()) WHERE id = $2`,
		s.now(), run); err != nil {
		return fmt.Errorf("record heartbeat: %w", err)
	}
	return nil
}

// StopRun records a clean stop.
func (s *Store) StopRun(ctx context.Context, run int64) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, `UPDATE runs SET heartbeat_at = COALESCE($1::timestamptz, now()),
		stopped_at = COALESCE($1::timestamptz, now()) WHERE id = $2`, s.now(), run); err != nil {
		return fmt.Errorf("record run stop: %w", err)
	}
	return nil
}

// Runs lists every recorded run, of every instance, in start order.
func (s *Store) Runs(ctx context.Context) ([]hookwarden.Run, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, instance, started_at, heartbeat_at, stopped_at, version, pid
		FROM runs ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	var out []hookwarden.Run
	for rows.Next() {
		var r hookwarden.Run
		var stop *time.Time
		if err := rows.Scan(&r.ID, &r.Instance, &r.StartedAt, &r.HeartbeatAt, &stop, &r.Version, &r.PID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read runs: %w", err)
		}
		r.StartedAt, r.HeartbeatAt = r.StartedAt.UTC(), r.HeartbeatAt.UTC()
		if stop != nil {
			r.StoppedAt = stop.UTC()
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return out, nil
}

// clock is the store's now: Options.Now, else the database's.
func (s *Store) clock(ctx context.Context) (time.Time, error) {
	if s.opts.Now != nil {
		return s.opts.Now().UTC(), nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the database's clock: %w", err)
	}
	return now.UTC(), nil
}

// Gaps lists the windows when no instance was up (kind "outage"), the
// restarts of one instance while another served (kind "restart"), as
// hookwarden.Outages finds them, and the silences of sources with an
// expect_within, by the database's clock.
func (s *Store) Gaps(ctx context.Context, opt hookwarden.GapOptions) (hookwarden.GapReport, error) {
	now, err := s.clock(ctx)
	if err != nil {
		return hookwarden.GapReport{}, err
	}
	runs, err := s.Runs(ctx)
	if err != nil {
		return hookwarden.GapReport{Now: now, Outages: []hookwarden.Outage{}, Silences: []hookwarden.Silence{}}, err
	}
	rep := hookwarden.GapsOf(runs, now, opt)
	un, err := s.unavailableMinutes(ctx, opt.Since)
	if err != nil {
		return rep, err
	}
	rep.AddUnavailable(un, opt.Since, opt.Sources)
	first := now
	if len(runs) > 0 {
		first = runs[0].StartedAt
	}
	err = rep.AddSilences(opt, func(p hookwarden.SourcePolicy) ([]hookwarden.Silence, error) {
		return s.silences(ctx, p, opt.Since, first, now)
	})
	return rep, err
}

// silences finds the gaps between consecutive requests of one source longer
// than its expect_within, and the silence since its last request, as
// sqlitestore does: from the last request retention deleted on (the time
// pruned_totals keeps), before which only some receipts remain.
func (s *Store) silences(ctx context.Context, p hookwarden.SourcePolicy, since, firstRun, now time.Time) ([]hookwarden.Silence, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var out []hookwarden.Silence
	add := func(start, end time.Time, open bool) {
		l := end.Sub(start)
		if l <= p.ExpectWithin {
			return
		}
		sl := hookwarden.Silence{Source: p.Name, Start: start, Open: open, Length: l, LengthSeconds: l.Seconds(),
			ExpectWithin: p.ExpectWithin, ExpectSeconds: p.ExpectWithin.Seconds(), BeyondRetryHorizon: l > p.RetryHorizon}
		if !open {
			sl.End = end
		}
		out = append(out, sl)
	}
	var from *time.Time // nil: all history
	if !since.IsZero() {
		from = &since
	}
	var seed time.Time
	var prunedTo *time.Time
	err := s.pool.QueryRow(ctx, `SELECT at FROM pruned_totals WHERE name = $1 AND kind = 'last_received'`,
		p.Name).Scan(&prunedTo)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	if prunedTo != nil && prunedTo.After(since) {
		seed = prunedTo.UTC()
		from = &seed
	}
	var firstAt, lastAt time.Time
	err = s.snapshot(ctx, func(tx pgx.Tx) error {
		var err error
		firstAt, lastAt, err = requestGaps(ctx, tx, p, from, now, add)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	prev := lastAt
	if !seed.IsZero() {
		if !firstAt.IsZero() {
			add(seed, firstAt, false) // from the last pruned request to the first kept one
		}
		if prev.Before(seed) {
			prev = seed
		}
	}
	if prev.IsZero() {
		// Never heard from in the window: silent since the window (or the
		// first run) began.
		prev = firstRun
		if since.After(prev) {
			prev = since
		}
	}
	add(prev, now, true)
	return out, nil
}

// maxGapSeeks bounds requestGaps' jumps; a window longer than this many
// expect_within is read request by request instead.
const maxGapSeeks = 20000

// requestGapsSQL is requestGaps' walk, inside the server (a recursive
// query: two seeks on receipts_source_time a step, no round trip per step):
// from a request at a ($2 the first), the last request of source $1 within
// (a, a + expect_within ($3)], else the first one after a.
const requestGapsSQL = `
WITH RECURSIVE walk(a) AS (
	SELECT $2::timestamptz
	UNION ALL
	SELECT COALESCE(
		(SELECT max(received_at) FROM receipts WHERE source = $1 AND received_at > walk.a AND received_at <= walk.a + $3::interval),
		(SELECT min(received_at) FROM receipts WHERE source = $1 AND received_at > walk.a))
	FROM walk WHERE walk.a IS NOT NULL)
SELECT a FROM walk WHERE a IS NOT NULL`

// requestBoundsSQL: the first and last request of source $1 at or after $2
// (NULL: of all the history), two seeks.
const requestBoundsSQL = `SELECT
	(SELECT min(received_at) FROM receipts WHERE source = $1 AND received_at >= COALESCE($2::timestamptz, '-infinity')),
	(SELECT max(received_at) FROM receipts WHERE source = $1 AND received_at >= COALESCE($2::timestamptz, '-infinity'))`

// requestGaps calls add for every gap longer than p.ExpectWithin between
// consecutive requests of p's source received at or after from (nil: all),
// and returns the first and last of them (zero: none), as sqlitestore does.
// It never reads each request: with expect_within an hour or more it reads
// a row an hour of the window (requestGapsByHour); under an hour it jumps
// on the (source, received_at) index (requestGapsWalk), a step per
// expect_within; only a window of more than maxGapSeeks expect_within
// reads every request.
func requestGaps(ctx context.Context, tx pgx.Tx, p hookwarden.SourcePolicy, from *time.Time, now time.Time,
	add func(start, end time.Time, open bool)) (first, last time.Time, err error) {
	var f, l *time.Time
	if err := tx.QueryRow(ctx, requestBoundsSQL, p.Name, from).Scan(&f, &l); err != nil || f == nil {
		return first, last, err
	}
	first, last = f.UTC(), l.UTC()
	if p.ExpectWithin >= time.Hour {
		ok, err := requestGapsByHour(ctx, tx, p, first, add)
		if err != nil || ok {
			return first, last, err
		}
	}
	if now.Sub(first)/max(p.ExpectWithin, time.Microsecond) > maxGapSeeks {
		return first, last, requestGapsByRow(ctx, tx, p, first, add)
	}
	return first, last, requestGapsWalk(ctx, tx, p, first, add)
}

// requestHoursSQL: the first and last request of source $1 in each hour
// from $2's on (request_hours, schema 14), the shards not yet folded
// merged.
const requestHoursSQL = `SELECT hour, min(first_at), max(last_at) FROM request_hours
WHERE source = $1 AND hour >= $2 GROUP BY hour ORDER BY hour`

// requestGapsByHour is requestGaps for an expect_within of an hour or
// more, on request_hours: no silence that long fits inside a clock hour,
// so the gaps that can be silences are those between one hour's last
// request and the next hour's first, a row an hour of the window. first
// is the window's first request; only the last request of its hour counts,
// as that hour's row may remember requests before the window that
// retention has deleted since (see silences). ok is false when the table
// does not tell first's hour (an hour retention.claims deleted while its
// receipts stay), and nothing was added: the caller walks the receipts.
func requestGapsByHour(ctx context.Context, tx pgx.Tx, p hookwarden.SourcePolicy, first time.Time,
	add func(start, end time.Time, open bool)) (ok bool, err error) {
	hour := first.Truncate(time.Hour)
	rows, err := tx.Query(ctx, requestHoursSQL, p.Name, hour)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	prev := first
	for rows.Next() {
		var h, a, b time.Time
		if err := rows.Scan(&h, &a, &b); err != nil {
			return false, err
		}
		if !ok {
			// first's own hour, or the table missed first.
			if !h.Equal(hour) || a.After(first) || b.Before(first) {
				return false, nil
			}
			ok, prev = true, b.UTC() // b is at or after first: the row holds it
			continue
		}
		if a.Sub(prev) > p.ExpectWithin {
			add(prev, a.UTC(), false)
		}
		prev = b.UTC()
	}
	return ok, rows.Err()
}

// requestGapsWalk is requestGaps' jump along receipts_source_time from the
// window's first request: from a request at a, the last request within
// (a, a+expect_within] is one seek and no gap before it can be a silence;
// when there is none, the next request ends one. The cost follows the
// window divided by expect_within, not the traffic.
func requestGapsWalk(ctx context.Context, tx pgx.Tx, p hookwarden.SourcePolicy, first time.Time,
	add func(start, end time.Time, open bool)) error {
	rows, err := tx.Query(ctx, requestGapsSQL, p.Name, first, p.ExpectWithin)
	if err != nil {
		return err
	}
	defer rows.Close()
	var prev time.Time
	for rows.Next() {
		var t time.Time
		if err := rows.Scan(&t); err != nil {
			return err
		}
		t = t.UTC()
		if !prev.IsZero() && t.Sub(prev) > p.ExpectWithin {
			add(prev, t, false)
		}
		prev = t
	}
	return rows.Err()
}

// requestGapsSQLByRow: LAG over the (source, received_at) index from $2,
// every request read, only the gaps longer than $3 returned.
const requestGapsByRowSQL = `
SELECT prev, received_at FROM (
	SELECT received_at, LAG(received_at) OVER (ORDER BY received_at) AS prev
	FROM receipts WHERE source = $1 AND received_at >= $2) g
WHERE prev IS NOT NULL AND received_at - prev > $3::interval`

// requestGapsByRow is requestGaps for a short expect_within: every request
// of the window from first on read once.
func requestGapsByRow(ctx context.Context, tx pgx.Tx, p hookwarden.SourcePolicy, first time.Time, add func(start, end time.Time, open bool)) error {
	rows, err := tx.Query(ctx, requestGapsByRowSQL, p.Name, first, p.ExpectWithin)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a, b time.Time
		if err := rows.Scan(&a, &b); err != nil {
			return err
		}
		add(a.UTC(), b.UTC(), false)
	}
	return rows.Err()
}
