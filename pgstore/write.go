package pgstore

// Helpers of the operator's writes: bounded transactions run again after a
// deadlock, pauses between batches, id lists.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
)

// write runs fn in one transaction bounded by Options.Timeout, and runs it
// again (a fresh transaction) when the server broke a deadlock by aborting
// it. fn must start from scratch each time: reset what it reports.
func (s *Store) write(ctx context.Context, fn func(context.Context, pgx.Tx) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return runAgain(ctx, func() error {
		return s.inTx(ctx, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

// queryer is the pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryIDs runs q, which selects one bigint column, and returns the ids in
// row order.
func queryIDs(ctx context.Context, db queryer, q string, args ...any) ([]int64, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read ids: %w", err)
	}
	return ids, nil
}

// sortedKeys is m's keys in order: the order in which a transaction
// touches rows named by them, so that two transactions never wait for
// each other in a circle.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
