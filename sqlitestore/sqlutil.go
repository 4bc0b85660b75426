package sqlitestore

// Helpers of every query file: row walks, limits, time columns.

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/hookwarden/hookwarden"
)

func limitOf(n int) int {
	if n <= 0 {
		return hookwarden.DefaultLimit
	}
	return min(n, hookwarden.MaxLimit)
}

// querier is a pool or a transaction.
type querier interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// eachRow runs q and calls fn for every row, closing the rows in every case.
func eachRow(ctx context.Context, q querier, query string, fn func(*sql.Rows) error, args ...any) error {
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

// selectIDs runs query, which selects one id column, on q (the read pool or
// a write transaction) and returns the ids in row order. It is the one way
// the query files collect ids: the batches of prune and replay, the events
// held back by the payload walk.
func selectIDs(ctx context.Context, q querier, query string, args ...any) ([]int64, error) {
	return selectColumn[int64](ctx, q, query, args...)
}

// selectStrings is selectIDs for a text column.
func selectStrings(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	return selectColumn[string](ctx, q, query, args...)
}

func selectColumn[T any](ctx context.Context, q querier, query string, args ...any) ([]T, error) {
	var out []T
	err := eachRow(ctx, q, query, func(rows *sql.Rows) error {
		var v T
		if err := rows.Scan(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	}, args...)
	return out, err
}

// idSet is ids as a JSON array, for `IN (SELECT value FROM json_each(?))`
// ("[]" when empty: json_each('null') would be one NULL row). Written by
// hand, not by json.Marshal: it is on the lease path of every delivery.
func idSet(ids []int64) string {
	b := make([]byte, 0, 12*len(ids)+2)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}
