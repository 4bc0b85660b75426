package sqlitestore

// Helpers of every query file: row walks, limits, time columns.

import (
	"context"
	"database/sql"
	"time"

	"github.com/hookwarden/hookwarden"
)

// unixTime reads a Unix-seconds column; NULL is the zero time.
func unixTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.Unix(v.Int64, 0).UTC()
}

func limitOf(n int) int {
	if n <= 0 {
		return hookwarden.DefaultLimit
	}
	return min(n, hookwarden.MaxLimit)
}

// idBefore is a scalar subquery: the id of the newest event claimed before
// the time bound (0 if none). It walks the events newest first and stops
// there, so its cost follows the window, not the history.
func idBefore(bound string) string {
	return "COALESCE((SELECT id FROM events WHERE claimed_at < " + bound + " ORDER BY id DESC LIMIT 1), 0)"
}

// eachRow runs q and calls fn for every row, closing the rows in every case.
func eachRow(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, fn func(*sql.Rows) error, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func parseNullTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return parseTime(s.String)
}

func parseInto(dst *time.Time, s string) error {
	t, err := parseTime(s)
	*dst = t
	return err
}

func parseNullInto(dst *time.Time, s sql.NullString) error {
	t, err := parseNullTime(s)
	*dst = t
	return err
}
