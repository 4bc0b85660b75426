package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// CountAvailability adds the receiver's answers of some minutes to
// unavailable_minutes; minutes without a 503 are not kept.
func (s *Store) CountAvailability(ctx context.Context, counts []hookwarden.AvailabilityCount) error {
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		for _, c := range counts {
			if c.Unavailable == 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO unavailable_minutes (source, minute, requests, unavailable) VALUES (?, ?, ?, ?)
				ON CONFLICT (source, minute) DO UPDATE SET requests = requests + excluded.requests, unavailable = unavailable + excluded.unavailable`,
				c.Source, fmtTime(c.Minute.Truncate(time.Minute)), c.Requests, c.Unavailable); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count unavailable answers: %w", err)
	}
	return nil
}

// unavailableMinutes reads the minutes from since on in which most of a
// source's requests were answered 503, by source and minute. A file of an
// older schema (a read-only open) has none.
func (s *Store) unavailableMinutes(ctx context.Context, since time.Time) ([]hookwarden.AvailabilityCount, error) {
	var exists bool
	if err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'unavailable_minutes')`).
		Scan(&exists); err != nil || !exists {
		return nil, err
	}
	var out []hookwarden.AvailabilityCount
	err := eachRow(ctx, s.rdb, `SELECT source, minute, requests, unavailable FROM unavailable_minutes
		WHERE minute >= ? AND 2 * unavailable > requests ORDER BY source, minute`,
		func(rows *sql.Rows) error {
			var c hookwarden.AvailabilityCount
			var m string
			if err := rows.Scan(&c.Source, &m, &c.Requests, &c.Unavailable); err != nil {
				return err
			}
			if err := parseInto(&c.Minute, m); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		}, fmtTime(since.Add(-time.Minute)))
	if err != nil {
		return nil, fmt.Errorf("read unavailable minutes: %w", err)
	}
	return out, nil
}
