package pgstore

// Backfill runs across instances (table backfill_runs), on the database's
// clock. A run's start takes a transaction-scoped advisory lock on its
// source, so two instances cannot both find no run going and start one; an
// automatic run's window is a unique key, so it runs on one instance only.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

var _ hookwarden.BackfillLog = (*Store)(nil)

// StartBackfill records a run starting (see hookwarden.BackfillLog).
func (s *Store) StartBackfill(ctx context.Context, run hookwarden.BackfillRun) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var id int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('hookwarden backfill ' || $1, 0))`, run.Source); err != nil {
			return err
		}
		var running bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM backfill_runs WHERE source = $1 AND finished_at IS NULL
			AND touched_at > COALESCE($2::timestamptz, now()) - $3::interval)`,
			run.Source, s.now(), hookwarden.BackfillStale).Scan(&running); err != nil {
			return err
		}
		if running {
			return hookwarden.ErrBackfillRunning
		}
		err := tx.QueryRow(ctx, `INSERT INTO backfill_runs
			(source, window_from, window_to, auto, origin, actor, dry_run, method, started_at, touched_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, COALESCE($9::timestamptz, now()), COALESCE($9::timestamptz, now()))
			ON CONFLICT DO NOTHING RETURNING id`,
			run.Source, run.From.UTC(), run.To.UTC(), run.Auto, nullable(run.Origin), nullable(run.Actor),
			run.DryRun, run.Method, s.now()).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return hookwarden.ErrBackfillDone
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record backfill start: %w", err)
	}
	return id, nil
}

// UpdateBackfill writes the run's counts and touches it.
func (s *Store) UpdateBackfill(ctx context.Context, run hookwarden.BackfillRun) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var finished, bfrom, bto any
	if run.Finished() {
		finished = run.FinishedAt.UTC()
	}
	if b := run.BeyondHistory; b != nil {
		bfrom, bto = b.From.UTC(), b.To.UTC()
	}
	if _, err := s.pool.Exec(ctx, `UPDATE backfill_runs SET touched_at = COALESCE($1::timestamptz, now()), finished_at = $2,
		listed = $3, already_claimed = $4, recovered = $5, requested = $6, failed = $7, beyond_from = $8, beyond_to = $9, error = $10
		WHERE id = $11`,
		s.now(), finished, run.Listed, run.AlreadyClaimed, run.Recovered, run.Requested, run.Failed, bfrom, bto, run.Error, run.ID); err != nil {
		return fmt.Errorf("record backfill progress: %w", err)
	}
	return nil
}

// BackfillRuns lists the runs of sources whose window ends at or after since.
func (s *Store) BackfillRuns(ctx context.Context, sources []string, since time.Time) ([]hookwarden.BackfillRun, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, source, window_from, window_to, auto, COALESCE(origin, ''), COALESCE(actor, ''),
		dry_run, method, started_at, finished_at, listed, already_claimed, recovered, requested, failed, beyond_from, beyond_to, error
		FROM backfill_runs WHERE window_to >= $1 AND (COALESCE(cardinality($2::text[]), 0) = 0 OR source = ANY($2))
		ORDER BY id`, since.UTC(), sources)
	if err != nil {
		return nil, fmt.Errorf("list backfill runs: %w", err)
	}
	defer rows.Close()
	var runs []hookwarden.BackfillRun
	for rows.Next() {
		var r hookwarden.BackfillRun
		var finished, bfrom, bto *time.Time
		if err := rows.Scan(&r.ID, &r.Source, &r.From, &r.To, &r.Auto, &r.Origin, &r.Actor, &r.DryRun, &r.Method,
			&r.StartedAt, &finished, &r.Listed, &r.AlreadyClaimed, &r.Recovered, &r.Requested, &r.Failed, &bfrom, &bto, &r.Error); err != nil {
			return nil, fmt.Errorf("list backfill runs: %w", err)
		}
		r.From, r.To, r.StartedAt = r.From.UTC(), r.To.UTC(), r.StartedAt.UTC()
		if finished != nil {
			r.FinishedAt = finished.UTC()
		}
		if bfrom != nil && bto != nil {
			r.BeyondHistory = &hookwarden.Span{From: bfrom.UTC(), To: bto.UTC()}
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list backfill runs: %w", err)
	}
	return runs, nil
}

// Claimed reports which of the ids of source are claimed.
func (s *Store) Claimed(ctx context.Context, source string, ids []string) (map[string]bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	have := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return have, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT event_id FROM events WHERE source = $1 AND event_id = ANY($2::text[])`, source, ids)
	if err != nil {
		return nil, fmt.Errorf("look up claims: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("look up claims: %w", err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up claims: %w", err)
	}
	return have, nil
}
