package pgstore

// Counts read from the counters and hourly tables, which triggers keep in
// the same transaction as the rows they count (migrations/0006_counters.sql,
// 0007_counter_rows.sql), each count spread over one row per server process
// that wrote it, which a read sums: the cost of a read follows the number of
// sources, destinations and connections, not the history.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
)

// counterStats is what Stats answers: per source and destination, the
// counters plus pruned_totals (what retention removed), the last request
// (one seek on receipts_source_time, and the held requests) and the oldest
// pending job (one seek on jobs_pending_age), on the store's clock. The
// names given come first, then the others in name order.
func (s *Store) counterStats(ctx context.Context, sources, destinations []string) (hookwarden.Stats, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var st hookwarden.Stats
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT COALESCE($1::timestamptz, now())`, s.now()).Scan(&now); err != nil {
			return err
		}
		c := hookwarden.NewStatsCounter(now.UTC(), sources, destinations)
		rows, err := tx.Query(ctx, `
SELECT name, kind, n, NULL::timestamptz FROM (SELECT name, kind, sum(n)::bigint AS n FROM counters GROUP BY name, kind) c WHERE n <> 0
UNION ALL SELECT name, 'pruned-' || kind, n, at FROM pruned_totals
ORDER BY 1`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name, kind string
			var n int
			var at *time.Time
			if err := rows.Scan(&name, &kind, &n, &at); err != nil {
				return err
			}
			var t time.Time
			if at != nil {
				t = *at
			}
			c.Add(name, kind, n, t)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		refused, err := refusals(ctx, tx, hookwarden.RefusalsSince(now.UTC()))
		if err != nil {
			return err
		}
		c.AddRefusals(refused)
		st = c.Stats
		for i := range st.Sources {
			ss := &st.Sources[i]
			var last *time.Time
			if err := tx.QueryRow(ctx, `SELECT GREATEST(
	(SELECT max(received_at) FROM receipts WHERE source = $1),
	(SELECT max(last_at) FROM quarantine WHERE source = $1))`, ss.Source).Scan(&last); err != nil {
				return fmt.Errorf("of %s: %w", ss.Source, err)
			}
			if last != nil && last.After(ss.LastReceivedAt) {
				ss.LastReceivedAt = last.UTC()
			}
		}
		for i := range st.Destinations {
			ds := &st.Destinations[i]
			if ds.Pending == 0 {
				continue
			}
			oldest, err := oldestPending(ctx, tx, ds.Destination)
			if err != nil {
				return fmt.Errorf("of %s: %w", ds.Destination, err)
			}
			if oldest != nil {
				ds.OldestPendingAge = max(now.Sub(*oldest), 0)
				ds.OldestPendingSeconds = ds.OldestPendingAge.Seconds()
			}
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// oldestPendingSQL: when destination $1's oldest pending job was created
// or last replayed: one seek on jobs_pending_age, with statistics that know
// the backlog (KeepPlannerStats).
const oldestPendingSQL = `SELECT min(COALESCE(replayed_at, created_at)) FROM jobs
	WHERE state = 'pending' AND destination = $1`

// oldestPending is when the destination's oldest pending job was created or
// last replayed (nil: none).
func oldestPending(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, dest string) (*time.Time, error) {
	var oldest *time.Time
	err := q.QueryRow(ctx, oldestPendingSQL, dest).Scan(&oldest)
	return oldest, err
}

// Hourly lists each source's hours from since's on, oldest first, summing
// the hour's shard rows.
func (s *Store) Hourly(ctx context.Context, sources []string, since time.Time) (map[string][]hookwarden.HourCount, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make(map[string][]hookwarden.HourCount, len(sources))
	rows, err := s.pool.Query(ctx, `
SELECT source, hour, sum(accepted)::bigint, sum(duplicates)::bigint FROM hourly
WHERE source = ANY($1) AND hour >= date_trunc('hour', $2::timestamptz, 'UTC')
GROUP BY source, hour HAVING sum(accepted) <> 0 OR sum(duplicates) <> 0 ORDER BY source, hour`, sources, since.UTC())
	if err != nil {
		return nil, fmt.Errorf("hourly counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var src string
		var c hookwarden.HourCount
		if err := rows.Scan(&src, &c.Hour, &c.Accepted, &c.Duplicates); err != nil {
			return nil, fmt.Errorf("hourly counts: %w", err)
		}
		c.Hour = c.Hour.UTC()
		out[src] = append(out[src], c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("hourly counts: %w", err)
	}
	for _, src := range sources {
		if _, ok := out[src]; !ok {
			out[src] = nil
		}
	}
	return out, nil
}

// pruneHourly deletes the hourly counts and the request hours (gaps') of
// the hours before the claims cutoff's, as sqlitestore does: they go with
// the claims they tell of.
func (s *Store) pruneHourly(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	if opt.DryRun {
		return nil
	}
	return s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error {
		for _, table := range []string{"hourly", "request_hours"} {
			_, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE hour < date_trunc('hour', $1::timestamptz, 'UTC')`, res.ClaimCutoff)
			if err != nil {
				return fmt.Errorf("prune %s: %w", table, err)
			}
		}
		// The 503 minutes (gaps' "unavailable" windows), on the same cutoff.
		if _, err := tx.Exec(ctx, `DELETE FROM unavailable_minutes WHERE minute < $1`, res.ClaimCutoff); err != nil {
			return fmt.Errorf("prune unavailable_minutes: %w", err)
		}
		// Late arrivals go with the claims too (sequence.go): a small table.
		if _, err := tx.Exec(ctx, `DELETE FROM late_events WHERE received_at < $1`, res.ClaimCutoff); err != nil {
			return fmt.Errorf("prune late_events: %w", err)
		}
		// The refusals (stats'), as hourly's.
		if _, err := tx.Exec(ctx, `DELETE FROM refusal_hours WHERE hour < date_trunc('hour', $1::timestamptz, 'UTC')`, res.ClaimCutoff); err != nil {
			return fmt.Errorf("prune refusal_hours: %w", err)
		}
		return nil
	})
}

// pruneMinutes deletes the counts per minute before before (schema 13):
// the recent windows read the last day's. One short write on
// minutely_minute.
func (s *Store) pruneMinutes(ctx context.Context, before time.Time) error {
	return s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM minutely WHERE minute < $1`, before)
		return err
	})
}

// foldCounts folds the count rows of server processes that are gone into
// one row per count (hw_fold_counts, migrations/0007_counter_rows.sql):
// without it each new connection would add rows that every read sums.
func (s *Store) foldCounts(ctx context.Context) error {
	err := s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT hw_fold_counts()`)
		return err
	})
	if err != nil {
		return fmt.Errorf("prune: fold counts: %w", err)
	}
	return nil
}
