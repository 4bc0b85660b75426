package sqlitestore

// Backfill runs (table backfill_runs) and the claim look-ups a backfill
// makes before it records anything.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
)

var _ hookwarden.BackfillLog = (*Store)(nil)

// StartBackfill records a run starting. The writer is one connection, so
// the check for a running run and the insert cannot interleave with
// another start.
func (s *Store) StartBackfill(ctx context.Context, run hookwarden.BackfillRun) (int64, error) {
	var id int64
	var fail error // a refusal commits nothing, but is no write failure
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		id, fail = 0, nil
		now := s.now()
		var running int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM backfill_runs
			WHERE source = ? AND finished_at IS NULL AND touched_at > ?`,
			run.Source, fmtTime(now.Add(-hookwarden.BackfillStale))).Scan(&running); err != nil {
			return err
		}
		if running > 0 {
			fail = hookwarden.ErrBackfillRunning
			return nil
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO backfill_runs
			(source, window_from, window_to, auto, origin, actor, dry_run, method, started_at, touched_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			run.Source, fmtTime(run.From), fmtTime(run.To), run.Auto, nullable(run.Origin), nullable(run.Actor),
			run.DryRun, run.Method, fmtTime(now), fmtTime(now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			fail = hookwarden.ErrBackfillDone
			return nil
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record backfill start: %w", err)
	}
	return id, fail
}

// UpdateBackfill writes the run's counts and touches it.
func (s *Store) UpdateBackfill(ctx context.Context, run hookwarden.BackfillRun) error {
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		var finished, bfrom, bto any
		if run.Finished() {
			finished = fmtTime(run.FinishedAt)
		}
		if b := run.BeyondHistory; b != nil {
			bfrom, bto = fmtTime(b.From), fmtTime(b.To)
		}
		_, err := tx.ExecContext(ctx, `UPDATE backfill_runs SET touched_at = ?, finished_at = ?, listed = ?, already_claimed = ?,
			recovered = ?, requested = ?, failed = ?, beyond_from = ?, beyond_to = ?, error = ? WHERE id = ?`,
			fmtTime(s.now()), finished, intOrNull(run.Listed), intOrNull(run.AlreadyClaimed),
			run.Recovered, run.Requested, run.Failed, bfrom, bto, run.Error, run.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record backfill progress: %w", err)
	}
	return nil
}

// BackfillRuns lists the runs of sources whose window ends at or after since.
func (s *Store) BackfillRuns(ctx context.Context, sources []string, since time.Time) ([]hookwarden.BackfillRun, error) {
	q := `SELECT id, source, window_from, window_to, auto, COALESCE(origin, ''), COALESCE(actor, ''), dry_run, method,
		started_at, finished_at, listed, already_claimed, recovered, requested, failed, beyond_from, beyond_to, error
		FROM backfill_runs WHERE window_to >= ?`
	args := []any{fmtTime(since)}
	if len(sources) > 0 {
		q += ` AND source IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(sources)), ", ") + `)`
		for _, src := range sources {
			args = append(args, src)
		}
	}
	var runs []hookwarden.BackfillRun
	err := eachRow(ctx, s.rdb, q+` ORDER BY id`, func(rows *sql.Rows) error {
		var r hookwarden.BackfillRun
		var from, to, started string
		var finished, bfrom, bto sql.NullString
		var listed, claimed sql.NullInt64
		if err := rows.Scan(&r.ID, &r.Source, &from, &to, &r.Auto, &r.Origin, &r.Actor, &r.DryRun, &r.Method,
			&started, &finished, &listed, &claimed, &r.Recovered, &r.Requested, &r.Failed, &bfrom, &bto, &r.Error); err != nil {
			return err
		}
		for _, p := range []struct {
			dst *time.Time
			s   string
		}{{&r.From, from}, {&r.To, to}, {&r.StartedAt, started}} {
			if err := parseInto(p.dst, p.s); err != nil {
				return err
			}
		}
		if err := parseNullInto(&r.FinishedAt, finished); err != nil {
			return err
		}
		r.Listed, r.AlreadyClaimed = intPtr(listed), intPtr(claimed)
		if bfrom.Valid && bto.Valid {
			var b hookwarden.Span
			if err := parseInto(&b.From, bfrom.String); err != nil {
				return err
			}
			if err := parseInto(&b.To, bto.String); err != nil {
				return err
			}
			r.BeyondHistory = &b
		}
		runs = append(runs, r)
		return nil
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("list backfill runs: %w", err)
	}
	return runs, nil
}

// Claimed reports which of the ids of source are claimed. A writable
// store reads the claims log's index first (backfill asks page after page).
func (s *Store) Claimed(ctx context.Context, source string, ids []string) (map[string]bool, error) {
	if s.wdb != nil {
		if err := s.buildClaimIndex(ctx); err != nil {
			return nil, fmt.Errorf("look up claims: %w", err)
		}
	}
	have := make(map[string]bool, len(ids))
	for _, id := range ids {
		_, ok, err := s.findClaim(ctx, source, id)
		if err != nil {
			return nil, fmt.Errorf("look up claims: %w", err)
		}
		if ok {
			have[id] = true
		}
	}
	return have, nil
}

func intOrNull(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func intPtr(n sql.NullInt64) *int {
	if !n.Valid {
		return nil
	}
	v := int(n.Int64)
	return &v
}
