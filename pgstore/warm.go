package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// warmClaimsSQL walks the claim index (events' UNIQUE (source, event_id),
// events_source_event_id_key) in an index-only scan: warmClaimsSet keeps
// the planner off the table, which it would rather read whole for a
// count. A test checks the plan.
const (
	warmClaimsSQL = `SELECT count(*) FROM events WHERE source >= ''`
	warmClaimsSet = `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL max_parallel_workers_per_gather = 0`
)

// WarmClaims reads the claim index once, so that its pages are in the
// server's shared buffers and the page cache: a new claim whose id is
// random (a UUID, as GitHub's and Shopify's are) lands on a random leaf of
// that index, and after the server restarted every such claim waited on a
// read from the disk until the index was cached. It runs beside the
// traffic, on one pooled connection, for as long as the walk takes
// (seconds at 10 M claims), without the statement bound of the other
// reads. Where the operator runs pg_prewarm's autoprewarm, the server
// brings back its own buffers and this walk finds them there.
func (s *Store) WarmClaims(ctx context.Context) (int64, error) {
	var n int64
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, warmClaimsSet); err != nil {
			return err
		}
		return tx.QueryRow(ctx, warmClaimsSQL).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("read the claim index: %w", err)
	}
	return n, nil
}
