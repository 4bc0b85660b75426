package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// CountAvailability adds the receiver's answers of some minutes to
// unavailable_minutes (schema 16); minutes without a 503 are not kept.
func (s *Store) CountAvailability(ctx context.Context, counts []hookwarden.AvailabilityCount) error {
	var sources []string
	var minutes []time.Time
	var requests, unavailable []int64
	for _, c := range counts {
		if c.Unavailable == 0 {
			continue
		}
		sources = append(sources, c.Source)
		minutes = append(minutes, c.Minute.Truncate(time.Minute).UTC())
		requests = append(requests, int64(c.Requests))
		unavailable = append(unavailable, int64(c.Unavailable))
	}
	if len(sources) == 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// One statement; the grouping keeps one row per key, as ON CONFLICT needs.
	if _, err := s.pool.Exec(ctx, `INSERT INTO unavailable_minutes (source, minute, requests, unavailable)
		SELECT source, minute, sum(requests), sum(unavailable)
		FROM unnest($1::text[], $2::timestamptz[], $3::bigint[], $4::bigint[]) AS c (source, minute, requests, unavailable)
		GROUP BY source, minute
		ON CONFLICT (source, minute) DO UPDATE SET requests = unavailable_minutes.requests + excluded.requests,
			unavailable = unavailable_minutes.unavailable + excluded.unavailable`,
		sources, minutes, requests, unavailable); err != nil {
		return fmt.Errorf("count unavailable answers: %w", err)
	}
	return nil
}

// unavailableMinutes reads the minutes from since on in which most of a
// source's requests were answered 503, by source and minute. A database of
// an older schema has none.
func (s *Store) unavailableMinutes(ctx context.Context, since time.Time) ([]hookwarden.AvailabilityCount, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('unavailable_minutes') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT source, minute, requests, unavailable FROM unavailable_minutes
		WHERE minute >= $1 AND 2 * unavailable > requests ORDER BY source, minute`, since.Add(-time.Minute))
	if err != nil {
		return nil, fmt.Errorf("read unavailable minutes: %w", err)
	}
	defer rows.Close()
	var out []hookwarden.AvailabilityCount
	for rows.Next() {
		var c hookwarden.AvailabilityCount
		var req, un int64
		if err := rows.Scan(&c.Source, &c.Minute, &req, &un); err != nil {
			return nil, fmt.Errorf("read unavailable minutes: %w", err)
		}
		c.Minute, c.Requests, c.Unavailable = c.Minute.UTC(), int(req), int(un)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read unavailable minutes: %w", err)
	}
	return out, nil
}
