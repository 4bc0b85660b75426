package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// warmClaimsSQL reads every page of the claim index (events' UNIQUE
// (source, event_id), events_source_event_id_key) and nothing else. The
// condition on event_id, which no id meets (no string sorts before the empty one), is
// checked inside the index on each entry: no entry reaches the executor,
// so none costs a look at the visibility map or the table. A count of the
// claims did, one buffer per claim: with ids in no order each entry's row
// is on another page of the table than the last one's (at 10 M claims:
// 8.8 M buffers and 7 s, against 72,000, the index's pages, and 0.8 s).
// warmClaimsSet keeps the planner on the index, which it would rather not
// walk for a count it expects to be 0, and JIT off for a plan of one scan.
// A test checks the plan and what it reads.
const (
	warmClaimsSQL = `SELECT count(*) FROM events WHERE source >= '' AND event_id < ''`
	warmClaimsSet = `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL max_parallel_workers_per_gather = 0; SET LOCAL jit = off`
)

// WarmUpNeeded says whether serve reads the claim index at start: only
// when no other run of serve started since the database server did. The
// read fills the server's shared buffers and the kernel's page cache,
// which only a restart of the server (or of its machine) empties; after
// that, the traffic keeps them as warm as it needs. Read again on every
// restart of serve (a deploy, one of several instances), it walks every
// page of the index through shared buffers smaller than the index (570 MB
// at 10 M claims against PostgreSQL's default 128 MB), evicting the pages
// the claims were using: it cost each round of the history phase a
// second of a core and the buffers of every instance on that server. The
// run log says which runs started when (StartRun records this one before
// serve asks). A crash of one backend, which the server recovers from
// without restarting, also empties the buffers and is not seen here.
func (s *Store) WarmUpNeeded() (bool, string) {
	ctx, cancel := s.bound(context.Background())
	defer cancel()
	var since bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE started_at >= pg_postmaster_start_time() AND id <> $1)`,
		s.run.Load()).Scan(&since)
	if err != nil || !since {
		return true, "" // cannot tell: read it, as before
	}
	return false, "another run of serve started since the database server did: its buffers and page cache hold what the traffic reads"
}

func (s *Store) WarmClaims(ctx context.Context) (int64, error) {
	var n int64
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, warmClaimsSet); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, warmClaimsSQL).Scan(new(int64)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT pg_relation_size('events_source_event_id_key') / current_setting('block_size')::bigint`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("read the claim index: %w", err)
	}
	return n, nil
}
