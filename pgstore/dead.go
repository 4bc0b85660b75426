package pgstore

// Dead letters: the jobs a destination refused for good.

import (
	"context"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// ListDead lists dead letters, most recently created job first. The walk
// is on the partial index of dead jobs: as long as the dead letters, not
// the history.
func (s *Store) ListDead(ctx context.Context, f hookwarden.DeadFilter) (items []hookwarden.DeadLetter, next int64, err error) {
	q, args, limit := deadQuery(f)
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d hookwarden.DeadLetter
		var deadAt *time.Time
		var claimed time.Time
		if err := rows.Scan(&d.JobID, &d.Source, &d.EventID, &d.Type, &d.Destination, &d.Attempts, &d.DeadCount,
			&d.LastError, &deadAt, &claimed); err != nil {
			return nil, 0, fmt.Errorf("list dead letters: %w", err)
		}
		d.DeadAt, d.ClaimedAt = utc(deadAt), claimed.UTC()
		items = append(items, d)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	items, next = page(items, limit, func(d hookwarden.DeadLetter) int64 { return d.JobID })
	return items, next, nil
}

// deadQuery is ListDead's statement for f, which fetches one row more than
// the page's limit.
func deadQuery(f hookwarden.DeadFilter) (q string, args []any, limit int) {
	var w where
	w.add("j.state = 'dead'")
	if f.Destination != "" {
		w.add("j.destination = " + w.arg(f.Destination))
	}
	if f.Source != "" {
		w.add("e.source = " + w.arg(f.Source))
	}
	if !f.Since.IsZero() {
		w.add("j.finished_at >= " + w.arg(f.Since.UTC()))
	}
	if f.Cursor > 0 {
		w.add("j.id < " + w.arg(f.Cursor))
	}
	limit = limitOf(f.Limit)
	q = `
SELECT j.id, e.source, e.event_id, e.event_type, j.destination, j.attempts, j.dead_count, COALESCE(j.last_error, ''),
	j.finished_at, e.claimed_at
FROM jobs j JOIN events e ON e.id = j.event_ref` + w.String() + ` ORDER BY j.id DESC LIMIT ` + w.arg(limit+1)
	return q, w.args, limit
}
