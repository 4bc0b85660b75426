package pgstore

// A synthetic history, written in bulk through the store's own tables, for
// the benchmark's history phase (make bench): hookwarden.History, the same
// rows sqlitestore.FillHistory writes.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// historyChunk is the claims written per transaction. Small on purpose: the
// triggers update the same few counter and hourly rows for every row of a
// transaction, and each update of a row adds a version that the next one
// must step over until the transaction commits.
const historyChunk = 2000

// historyWorkers is how many transactions FillHistory runs at once.
const historyWorkers = 4

// historyRows generates claims $1 to $2: id i, its source ($3 most), its
// event id (eid: eight hex digits in no order, so that the claims land all
// over the claim index as UUIDs do, then i for uniqueness; sqlitestore
// writes the same ids), type and
// claim time (Unix seconds $4 + trunc((i - $5) * $6)).
const historyRows = `WITH g AS (SELECT i,
	CASE WHEN i % 1000 = 0 THEN 'rare' WHEN i % 4 = 1 THEN 'other' ELSE $3::text END AS source,
	lpad(to_hex((i * 2654435761) % 4294967291), 8, '0') || '-' || i AS eid,
	CASE WHEN i % 5000 = 7 THEN 'rare.type' ELSE 'type.' || (i % 20) END AS type,
	to_timestamp($4::bigint + trunc((i - $5::bigint) * $6::float8)) AS at
	FROM generate_series($1::bigint, $2::bigint) AS i)
`

// FillHistory writes h into an empty store, historyChunk claims per
// transaction (historyWorkers at once) through the store's tables, so the
// triggers keep the counters and hourly counts as for any write; then it
// moves the id sequences past the ids written, sets prune's cursor where
// folding the old claims would have left it, folds its connections' count
// rows into shard 0 (Prune would have, hour by hour, on a store that old)
// and vacuums and analyzes the tables, as autovacuum would have long since.
// progress, if set, is called after each transaction with the claims
// written so far.
func (s *Store) FillHistory(ctx context.Context, h hookwarden.History, progress func(done int)) error {
	h = h.WithDefaults()
	var any bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events)`).Scan(&any); err != nil {
		return fmt.Errorf("fill history: %w", err)
	}
	if any {
		return fmt.Errorf("fill history: %s already holds events", s.address)
	}
	now, err := s.clock(ctx)
	if err != nil {
		return fmt.Errorf("fill history: %w", err)
	}
	now = now.Truncate(time.Second)
	l := h.Layout(now)
	// historyWorkers transactions at once: each row's triggers cost more
	// than its insert, and each connection counts into its own shard.
	g, gctx := errgroup.WithContext(ctx)
	chunks := make(chan int)
	var done atomic.Int64
	var mu sync.Mutex
	for range historyWorkers {
		g.Go(func() error {
			for lo := range chunks {
				hi := min(lo+historyChunk-1, h.Claims)
				err := s.write(gctx, func(ctx context.Context, tx pgx.Tx) error {
					if lo <= l.Folded {
						if err := fillFolded(ctx, tx, h, lo, min(hi, l.Folded), l.FoldStart.Unix(), l.FoldStep, now); err != nil {
							return err
						}
					}
					if hi > l.Folded {
						return fillPayloads(ctx, tx, h, max(lo, l.Folded+1), hi, l.Folded+1, l.PayStart.Unix(), l.PayStep)
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("fill history: claims %d-%d: %w", lo, hi, err)
				}
				n := done.Add(int64(hi - lo + 1))
				if progress != nil {
					mu.Lock()
					progress(int(n))
					mu.Unlock()
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(chunks)
		for lo := 1; lo <= h.Claims; lo += historyChunk {
			select {
			case chunks <- lo:
			case <-gctx.Done():
				return nil
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	err = s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// Where Prune's walk would stand after folding the old claims.
		if _, err := tx.Exec(ctx, `UPDATE prune_cursor SET id = $1 WHERE name = 'events'`, l.Folded); err != nil {
			return err
		}
		// The counts per minute a prune would have left.
		if _, err := tx.Exec(ctx, `DELETE FROM minutely WHERE minute < $1`, now.Add(-hookwarden.MinuteCountsKeep)); err != nil {
			return err
		}
		// The ids were given: the next claim takes the one after.
		for _, t := range []string{"events", "receipts", "jobs", "attempts"} {
			if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('`+t+`', 'id'), (SELECT max(id) FROM `+t+`))
				WHERE EXISTS (SELECT 1 FROM `+t+`)`); err != nil {
				return fmt.Errorf("sequence of %s: %w", t, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fill history: %w", err)
	}
	if err := s.foldAllCounts(ctx); err != nil {
		return fmt.Errorf("fill history: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) events, receipts, jobs, attempts, counters, hourly, minutely, request_hours, pruned_totals`); err != nil {
		return fmt.Errorf("fill history: vacuum: %w", err)
	}
	return nil
}

// fillFolded writes claims lo to hi as retention.payloads leaves them, and
// what it removed of them into pruned_totals: their deliveries, and the
// times of the last request.
func fillFolded(ctx context.Context, tx pgx.Tx, h hookwarden.History, lo, hi int, t0 int64, step float64, prunedAt time.Time) error {
	args := []any{lo, hi, h.Source, t0, 1, step, prunedAt}
	if _, err := tx.Exec(ctx, historyRows+`
INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256, pruned_at, receipts, jobs, attempts, last_received_at, delivered_at)
SELECT i, source, eid, type, at, '', $7, 1, 1, 1, at, at FROM g`, args...); err != nil {
		return fmt.Errorf("folded claims: %w", err)
	}
	_, err := tx.Exec(ctx, historyRows+`
INSERT INTO pruned_totals (name, kind, n, at)
SELECT name, kind, sum(n), max(at) FROM (
	SELECT source || '/app' AS name, 'delivered' AS kind, count(*) AS n, NULL::timestamptz AS at FROM g GROUP BY source
	UNION ALL SELECT source, 'last_received', 0, max(at) FROM g GROUP BY source
	UNION ALL SELECT source, 'last_accepted', 0, max(at) FROM g GROUP BY source) t
GROUP BY name, kind
`+totalsUpsert, args[:6]...)
	if err != nil {
		return fmt.Errorf("folded totals: %w", err)
	}
	return nil
}

// fillPayloads writes claims lo to hi whole: receipt id 2i (accepted, a
// Body-byte body) and 2i+1 (its duplicate, for one claim in five), job id
// i (delivered; dead for one in a thousand), attempt id i. first is the
// first payload claim, whose time is t0.
func fillPayloads(ctx context.Context, tx pgx.Tx, h hookwarden.History, lo, hi, first int, t0 int64, step float64) error {
	args := []any{lo, hi, h.Source, t0, first, step, h.Body}
	for _, q := range []string{
		historyRows + `INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256)
SELECT i, source, eid, type, at, sha256(int8send(i)) FROM g WHERE $7::int > 0`,
		// A body that does not compress: hashes of the claim and a counter.
		historyRows + `INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
SELECT 2 * i, source, i, 'accepted', at, '127.0.0.1:40000',
	'Content-Type: application/json' || chr(10) || 'Webhook-Id: ' || eid || chr(10),
	substring((SELECT string_agg(sha256(int8send(i * 4096 + k)), '') FROM generate_series(0, $7::int / 32) AS k) FROM 1 FOR $7::int),
	'' FROM g`,
		historyRows + `INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
SELECT 2 * i + 1, source, i, 'duplicate', at, '127.0.0.1:40000', 'Webhook-Id: ' || eid || chr(10), NULL, ''
FROM g WHERE i % 5 = 0 AND $7::int > 0`,
		historyRows + `INSERT INTO jobs (id, event_ref, destination, state, attempts, dead_count, next_at, created_at, finished_at, last_error)
SELECT i, i, source || '/app', CASE WHEN i % 1000 = 3 THEN 'dead' ELSE 'delivered' END, 1, (i % 1000 = 3)::int, at, at, at,
	CASE WHEN i % 1000 = 3 THEN 'HTTP 422' END FROM g WHERE $7::int > 0`,
		historyRows + `INSERT INTO attempts (id, job_id, number, started_at, duration_us, status_code, verdict)
SELECT i, i, 1, at, 1500, CASE WHEN i % 1000 = 3 THEN 422 ELSE 200 END, CASE WHEN i % 1000 = 3 THEN 'dead' ELSE 'delivered' END
FROM g WHERE $7::int > 0`,
	} {
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("payload claims: %w", err)
		}
	}
	return nil
}

// foldAllCounts folds every count row into shard 0, the live connections'
// too (right at any time: see migrations/0007_counter_rows.sql).
func (s *Store) foldAllCounts(ctx context.Context) error {
	return s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `WITH g AS (DELETE FROM counters WHERE shard <> 0 RETURNING name, kind, n)
INSERT INTO counters (name, kind, shard, n) SELECT name, kind, 0, sum(n) FROM g GROUP BY name, kind
ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n`); err != nil {
			return fmt.Errorf("fold counters: %w", err)
		}
		if _, err := tx.Exec(ctx, `WITH g AS (DELETE FROM hourly WHERE shard <> 0
	RETURNING source, hour, accepted, duplicates, first_ref)
INSERT INTO hourly (source, hour, shard, accepted, duplicates, first_ref)
SELECT source, hour, 0, sum(accepted), sum(duplicates), min(first_ref) FROM g GROUP BY source, hour
ON CONFLICT (source, hour, shard) DO UPDATE SET accepted = hourly.accepted + excluded.accepted,
	duplicates = hourly.duplicates + excluded.duplicates, first_ref = LEAST(hourly.first_ref, excluded.first_ref)`); err != nil {
			return fmt.Errorf("fold hourly counts: %w", err)
		}
		if _, err := tx.Exec(ctx, `WITH g AS (DELETE FROM request_hours WHERE shard <> 0 RETURNING source, hour, first_at, last_at)
INSERT INTO request_hours (source, hour, shard, first_at, last_at)
SELECT source, hour, 0, min(first_at), max(last_at) FROM g GROUP BY source, hour
ON CONFLICT (source, hour, shard) DO UPDATE SET first_at = LEAST(request_hours.first_at, excluded.first_at),
	last_at = GREATEST(request_hours.last_at, excluded.last_at)`); err != nil {
			return fmt.Errorf("fold request hours: %w", err)
		}
		return nil
	})
}
