package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// CountRefusals adds the receiver's refusals to refusal_hours (schema 22),
// one upsert per source, hour and reason: serve calls it every few seconds,
// never per request.
func (s *Store) CountRefusals(ctx context.Context, counts []hookwarden.RefusalCount) error {
	if !anyRefusal(counts) {
		return nil
	}
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		for _, c := range counts {
			if c.N <= 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO refusal_hours (source, hour, reason, n) VALUES (?, ?, ?, ?)
				ON CONFLICT (source, hour, reason) DO UPDATE SET n = n + excluded.n`,
				c.Source, fmtTime(c.Hour.Truncate(time.Hour)), c.Reason, c.N); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count refusals: %w", err)
	}
	return nil
}

func anyRefusal(counts []hookwarden.RefusalCount) bool {
	for _, c := range counts {
		if c.N > 0 {
			return true
		}
	}
	return false
}

// refusals reads the refusals per source, hour and reason from since's
// hour on. A file of an older schema (a read-only open) has none.
func refusals(ctx context.Context, q querier, since time.Time) ([]hookwarden.RefusalCount, error) {
	var exists bool
	if err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'refusal_hours')`).
		Scan(&exists); err != nil || !exists {
		return nil, err
	}
	var out []hookwarden.RefusalCount
	err := eachRow(ctx, q, `SELECT source, hour, reason, n FROM refusal_hours WHERE hour >= ? ORDER BY source, hour, reason`,
		func(rows *sql.Rows) error {
			var c hookwarden.RefusalCount
			var h string
			if err := rows.Scan(&c.Source, &h, &c.Reason, &c.N); err != nil {
				return err
			}
			if err := parseInto(&c.Hour, h); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		}, fmtTime(since.UTC().Truncate(time.Hour)))
	if err != nil {
		return nil, fmt.Errorf("read refusals: %w", err)
	}
	return out, nil
}
