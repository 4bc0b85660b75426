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
	err := s.pool.QueryRow(ctx, `INSERT INTO runs (instance, started_at, heartbeat_at, version, pid)
		VALUES ($1, COALESCE($2::timestamptz, now()), COALESCE($2::timestamptz, now()), $3, $4) RETURNING id`,
		s.instance(), s.now(), version, os.Getpid()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("record run start: %w", err)
	}
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
	// LAG over the (source, received_at) index: only the gaps come back.
	rows, err := s.pool.Query(ctx, `
SELECT prev, received_at FROM (
	SELECT received_at, LAG(received_at) OVER (ORDER BY received_at) AS prev
	FROM receipts WHERE source = $1 AND ($2::timestamptz IS NULL OR received_at >= $2)) g
WHERE prev IS NOT NULL AND received_at - prev > $3::interval`, p.Name, from, p.ExpectWithin)
	if err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	for rows.Next() {
		var a, b time.Time
		if err := rows.Scan(&a, &b); err != nil {
			rows.Close()
			return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
		}
		add(a.UTC(), b.UTC(), false)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	var firstAt, lastAt *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT min(received_at), max(received_at) FROM receipts
		WHERE source = $1 AND ($2::timestamptz IS NULL OR received_at >= $2)`, p.Name, from).Scan(&firstAt, &lastAt); err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	var prev time.Time
	if lastAt != nil {
		prev = lastAt.UTC()
	}
	if !seed.IsZero() {
		if firstAt != nil {
			add(seed, firstAt.UTC(), false) // from the last pruned request to the first kept one
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
