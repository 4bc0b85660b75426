package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// CountRefusals adds the receiver's refusals to refusal_hours (schema 17)
// in one statement: serve calls it every few seconds, never per request.
func (s *Store) CountRefusals(ctx context.Context, counts []hookwarden.RefusalCount) error {
	var sources, reasons []string
	var hours []time.Time
	var ns []int64
	for _, c := range counts {
		if c.N <= 0 {
			continue
		}
		sources = append(sources, c.Source)
		hours = append(hours, c.Hour.UTC().Truncate(time.Hour))
		reasons = append(reasons, c.Reason)
		ns = append(ns, int64(c.N))
	}
	if len(sources) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// The grouping keeps one row per key, as ON CONFLICT needs.
	if _, err := s.pool.Exec(ctx, `INSERT INTO refusal_hours (source, hour, reason, n)
		SELECT source, hour, reason, sum(n) FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::bigint[]) AS c (source, hour, reason, n)
		GROUP BY source, hour, reason
		ON CONFLICT (source, hour, reason) DO UPDATE SET n = refusal_hours.n + excluded.n`,
		sources, hours, reasons, ns); err != nil {
		return fmt.Errorf("count refusals: %w", err)
	}
	return nil
}

// refusals reads the refusals per source, hour and reason from since's
// hour on. A database of an older schema has none.
func refusals(ctx context.Context, tx pgx.Tx, since time.Time) ([]hookwarden.RefusalCount, error) {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass('refusal_hours') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT source, hour, reason, n FROM refusal_hours
		WHERE hour >= date_trunc('hour', $1::timestamptz, 'UTC') ORDER BY source, hour, reason`, since)
	if err != nil {
		return nil, fmt.Errorf("read refusals: %w", err)
	}
	defer rows.Close()
	var out []hookwarden.RefusalCount
	for rows.Next() {
		var c hookwarden.RefusalCount
		var n int64
		if err := rows.Scan(&c.Source, &c.Hour, &c.Reason, &n); err != nil {
			return nil, fmt.Errorf("read refusals: %w", err)
		}
		c.Hour, c.N = c.Hour.UTC(), int(n)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read refusals: %w", err)
	}
	return out, nil
}
