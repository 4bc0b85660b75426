package sqlitestore

// Dead letters: the jobs a destination refused for good.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/hookwarden/hookwarden"
)

func deadWhere(f hookwarden.DeadFilter) ([]string, []any) {
	where := []string{"j.state = 'dead'"}
	var args []any
	if f.Destination != "" {
		where, args = append(where, "j.destination = ?"), append(args, f.Destination)
	}
	if f.Source != "" {
		where, args = append(where, "e.source = ?"), append(args, f.Source)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "j.finished_at >= ?"), append(args, fmtTime(f.Since))
	}
	return where, args
}

// deadListSQL is ListDead's query. INDEXED BY: for ORDER BY j.id the
// planner would walk every job of the history newest first looking for the
// dead ones; jobs_dead_id (schema 13) holds only those, in that order, so a
// page looks up its own events and stops (jobs_dead, by destination and
// time, read every letter and sorted them).
func deadListSQL(where []string) string {
	return `
SELECT j.id, e.source, e.event_id, e.event_type, j.destination, j.attempts, j.dead_count, COALESCE(j.last_error, ''),
	j.finished_at, e.claimed_at
FROM jobs j INDEXED BY jobs_dead_id CROSS JOIN events e ON e.id = j.event_ref
WHERE ` + strings.Join(where, " AND ") + ` ORDER BY j.id DESC LIMIT ?`
}

// ListDead lists dead letters, most recently created job first.
func (s *Store) ListDead(ctx context.Context, f hookwarden.DeadFilter) (items []hookwarden.DeadLetter, next int64, err error) {
	where, args := deadWhere(f)
	if f.Cursor > 0 {
		where, args = append(where, "j.id < ?"), append(args, f.Cursor)
	}
	limit := limitOf(f.Limit)
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, deadListSQL(where), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d hookwarden.DeadLetter
		var deadAt sql.NullString
		var claimed string
		if err := rows.Scan(&d.JobID, &d.Source, &d.EventID, &d.Type, &d.Destination, &d.Attempts, &d.DeadCount,
			&d.LastError, &deadAt, &claimed); err != nil {
			return nil, 0, fmt.Errorf("list dead letters: %w", err)
		}
		if err := errors.Join(parseNullInto(&d.DeadAt, deadAt), parseInto(&d.ClaimedAt, claimed)); err != nil {
			return nil, 0, fmt.Errorf("list dead letters: %w", err)
		}
		items = append(items, d)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	if len(items) > limit {
		items = items[:limit]
		next = items[limit-1].JobID
	}
	return items, next, nil
}
