package sqlitestore

// A synthetic history, written in bulk through the store's writer, for the
// benchmark's history phase (make bench): a file that looks like one a busy
// source leaves after months, built in minutes instead of months.

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// historyChunk is the claims written per transaction.
const historyChunk = 20000

// FillHistory writes h (hookwarden.History says what it holds) into an
// empty store through its writer, in
// transactions of historyChunk claims. The triggers keep the counters and
// hourly counts as for any write. progress, if set, is called after each
// transaction with the claims written so far.
func (s *Store) FillHistory(ctx context.Context, h hookwarden.History, progress func(done int)) error {
	h = h.WithDefaults()
	var n int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM events LIMIT 1)`).Scan(&n); err != nil {
		return fmt.Errorf("fill history: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("fill history: %s already holds events", s.path)
	}
	now := s.now().UTC().Truncate(time.Second)
	l := h.Layout(now)
	folded, foldStart, payStart, foldStep, payStep := l.Folded, l.FoldStart, l.PayStart, l.FoldStep, l.PayStep
	prunedAt := fmtTime(now)
	// The dedup memory as the writer's folds keep it (fold.go): the newest
	// max(FoldMin, claims/9) claims recent, every older one folded. Each
	// chunk's older claims are moved as the chunk is written, as in a store
	// that folded all along. (Folding them all at the end, with one delete
	// of millions of keys, left the recent level's pages all over the file:
	// 0.68-0.71 of a fresh store's acks against 0.73-0.74, and 494 s
	// against 409 s for 10 M claims.)
	lastFolded := int64(h.Claims) - max(s.foldMin(), int64(h.Claims)/(foldRatio+1))
	for lo := 1; lo <= h.Claims; lo += historyChunk {
		hi := min(lo+historyChunk-1, h.Claims)
		err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
			s.forgetFilter() // claims receives keys the fold does not move
			if lo <= folded {
				if err := fillFolded(ctx, tx, h, lo, min(hi, folded), foldStart.Unix(), foldStep, prunedAt); err != nil {
					return err
				}
			}
			if hi > folded {
				from := max(lo, folded+1)
				if err := fillPayloads(ctx, tx, h, from, hi, folded, payStart.Unix(), payStep); err != nil {
					return err
				}
			}
			if int64(lo) > lastFolded {
				return nil
			}
			return foldHistory(ctx, tx, int64(lo), min(int64(hi), lastFolded))
		})
		if err != nil {
			return fmt.Errorf("fill history: claims %d-%d: %w", lo, hi, err)
		}
		if progress != nil {
			progress(hi)
		}
	}
	return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		s.forgetFilter() // a build begun since the last chunk is incomplete
		// Where Prune's walks would stand after folding the old claims, and
		// the counts per minute it would have left.
		if _, err := tx.ExecContext(ctx, `UPDATE prune_cursor SET id = ? WHERE name = 'events'`, folded); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM minutely WHERE minute < ?`, minuteOf(now.Add(-hookwarden.MinuteCountsKeep)))
		return err
	})
}

// foldHistory moves the claims of events lo-hi from the log into the large
// level, in key order.
func foldHistory(ctx context.Context, tx *sql.Tx, lo, hi int64) error {
	// Not the fold's insert: no kept filter holds these keys, whatever
	// generation the fold is at (claims_filter_stale keeps those of
	// log_seq >= gen_max).
	if _, err := tx.ExecContext(ctx, `DELETE FROM claims_filter`); err != nil {
		return fmt.Errorf("fold the history's claims %d-%d: %w", lo, hi, err)
	}
	for _, q := range []string{
		`INSERT INTO claims (source, event_id, event_ref) SELECT source, event_id, event_ref FROM claims_log
			WHERE event_ref BETWEEN ?1 AND ?2 ORDER BY source, event_id`,
		`DELETE FROM claims_log WHERE event_ref BETWEEN ?1 AND ?2`,
	} {
		if _, err := tx.ExecContext(ctx, q, lo, hi); err != nil {
			return fmt.Errorf("fold the history's claims %d-%d: %w", lo, hi, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE claim_levels SET recent = recent - changes()`); err != nil {
		return fmt.Errorf("fold the history's claims %d-%d: %w", lo, hi, err)
	}
	return nil
}

// historyRows are the generated columns shared by both kinds of claims: id
// i, its source, its event id (eid: eight hex digits in no order, i times a
// constant modulo a prime, so that like GitHub's and Shopify's UUIDs the
// claims land all over the claim index, then i for uniqueness), type and
// claim time (Unix seconds t0 + (i-lo) * step).
const historyRows = `WITH RECURSIVE c(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM c WHERE i < ?2),
g AS (SELECT i,
	CASE WHEN i % 1000 = 0 THEN 'rare' WHEN i % 4 = 1 THEN 'other' ELSE ?3 END AS source,
	printf('%08x', (i * 2654435761) % 4294967291) || '-' || i AS eid,
	CASE WHEN i % 5000 = 7 THEN 'rare.type' ELSE 'type.' || (i % 20) END AS type,
	strftime('%Y-%m-%dT%H:%M:%S.000000Z', ?4 + CAST((i - ?5) * ?6 AS INTEGER), 'unixepoch') AS at
	FROM c)
`

func fillFolded(ctx context.Context, tx *sql.Tx, h hookwarden.History, lo, hi int, t0 int64, step float64, prunedAt string) error {
	if _, err := tx.ExecContext(ctx, historyRows+`
INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256, pruned_at, receipts, jobs, attempts, last_received_at, delivered_at)
SELECT i, source, eid, type, at, x'', ?7, 1, 1, 1, at, at FROM g`, lo, hi, h.Source, t0, 1, step, prunedAt); err != nil {
		return fmt.Errorf("folded claims: %w", err)
	}
	// What retention removed: their deliveries, and the last request.
	_, err := tx.ExecContext(ctx, historyRows+`
INSERT INTO pruned_totals (name, kind, n, at)
SELECT name, kind, sum(n), max(at) FROM (
	SELECT source || '/app' AS name, 'delivered' AS kind, count(*) AS n, NULL AS at FROM g GROUP BY source
	UNION ALL SELECT source, 'last_received', 0, max(at) FROM g GROUP BY source
	UNION ALL SELECT source, 'last_accepted', 0, max(at) FROM g GROUP BY source)
WHERE true GROUP BY name, kind
`+totalsUpsert, lo, hi, h.Source, t0, 1, step)
	if err != nil {
		return fmt.Errorf("folded totals: %w", err)
	}
	return nil
}

func fillPayloads(ctx context.Context, tx *sql.Tx, h hookwarden.History, lo, hi, first int, t0 int64, step float64) error {
	// Rows of one claim: receipt id 2i (accepted) and 2i+1 (its duplicate,
	// for one claim in five), job id i, attempt id i.
	args := []any{lo, hi, h.Source, t0, first + 1, step, h.Body}
	for _, q := range []string{
		historyRows + `INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256)
SELECT i, source, eid, type, at, randomblob(32) FROM g WHERE ?7 > 0`,
		historyRows + `INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
SELECT 2 * i, source, i, 'accepted', at, '127.0.0.1:40000',
	'Content-Type: application/json' || char(10) || 'Webhook-Id: ' || eid || char(10), randomblob(?7), x'' FROM g`,
		historyRows + `INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
SELECT 2 * i + 1, source, i, 'duplicate', at, '127.0.0.1:40000', 'Webhook-Id: ' || eid || char(10), NULL, x'' FROM g WHERE i % 5 = 0 AND ?7 > 0`,
		historyRows + `INSERT INTO jobs (id, event_ref, destination, state, attempts, dead_count, next_at, created_at, finished_at, last_error)
SELECT i, i, source || '/app', CASE WHEN i % 1000 = 3 THEN 'dead' ELSE 'delivered' END, 1, i % 1000 = 3, at, at, at,
	CASE WHEN i % 1000 = 3 THEN 'HTTP 422' END FROM g WHERE ?7 > 0`,
		historyRows + `INSERT INTO attempts (id, job_id, number, started_at, duration_us, status_code, verdict)
SELECT i, i, 1, at, 1500, CASE WHEN i % 1000 = 3 THEN 422 ELSE 200 END, CASE WHEN i % 1000 = 3 THEN 'dead' ELSE 'delivered' END FROM g WHERE ?7 > 0`,
	} {
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("payload claims: %w", err)
		}
	}
	return nil
}
