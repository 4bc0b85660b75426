package pgstore

// Counts over the whole store (stats, /api/stats) and over recent windows
// (the dashboard, the metrics' absence clock), with sqlitestore's
// semantics. Reads only, no locks.

import (
	"context"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// Stats counts per source and per destination over the whole store, from
// the counters the triggers keep (migrations/0006_counters.sql, 0007_counter_rows.sql) plus
// pruned_totals: a few rows per name and connection, whatever the history holds (it read
// every row before). The names given come first, with zeros, then any other
// name found. At is the store's clock.
func (s *Store) Stats(ctx context.Context, sources, destinations []string) (hookwarden.Stats, error) {
	return s.counterStats(ctx, sources, destinations)
}

// lastAcceptedSQL: per source ($1), the newest request that claimed
// something, walked newest first on receipts' (source, received_at) index
// and stopping at the first (duplicates in between are skipped), and the
// time retention kept for the events it folded or deleted.
const lastAcceptedSQL = `
SELECT s,
	(SELECT r.received_at FROM receipts r WHERE r.source = s
		AND (r.kind = 'accepted' OR (r.kind = 'batch'
			AND EXISTS (SELECT 1 FROM receipt_events re WHERE re.receipt_id = r.id AND re.kind = 'accepted')))
		ORDER BY r.received_at DESC LIMIT 1),
	(SELECT at FROM pruned_totals WHERE name = s AND kind = 'last_accepted')
FROM unnest($1::text[]) AS s`

// LastAccepted returns, for each source named, when it last claimed a new
// event (absent when it never did). It seeds
// hookwarden_last_accepted_timestamp_seconds at start, so a restart does not
// reset the absence alert's clock.
func (s *Store) LastAccepted(ctx context.Context, sources []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(sources))
	if len(sources) == 0 {
		return out, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, lastAcceptedSQL, sources)
	if err != nil {
		return nil, fmt.Errorf("last accepted: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var src string
		var at, pruned *time.Time
		if err := rows.Scan(&src, &at, &pruned); err != nil {
			return nil, fmt.Errorf("last accepted: %w", err)
		}
		t := utc(at)
		if p := utc(pruned); p.After(t) {
			t = p
		}
		if !t.IsZero() {
			out[src] = t
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("last accepted: %w", err)
	}
	return out, nil
}

// recentCountsSQL counts, per source ($1), the events claimed and the
// repeats received since each bound ($2: the hour, $3: the day; w is 0 and
// 1). The whole hours of a window come from hourly (a range of its key per
// source); only the part of its first hour after the bound, when the bound
// is not on the hour, is counted from rows: the events from the least
// first_ref of that hour on, up to the first claim two hours later, in one
// walk of the primary key for all sources; the repeats on receipts'
// (source, received_at) index. Each walk is at most two hours of traffic,
// whatever the history holds.
const recentCountsSQL = `
WITH x AS (
	SELECT w, since, first, CASE WHEN first = since THEN first ELSE first + interval '1 hour' END AS whole
	FROM (VALUES (0, $2::timestamptz), (1, $3::timestamptz)) AS v(w, since)
		CROSS JOIN LATERAL (SELECT date_trunc('hour', since, 'UTC') AS first) f),
b AS (
	SELECT w, since, whole,
		(SELECT min(first_ref) FROM hourly WHERE source = ANY ($1::text[]) AND hour = x.first) AS lo,
		COALESCE((SELECT min(first_ref) FROM hourly WHERE hour >= x.first + interval '2 hours'), 9223372036854775807) AS hi
	FROM x WHERE whole > since),
e AS (
	SELECT b.w, ev.source, count(*) AS n
	FROM b JOIN events ev ON ev.id >= b.lo AND ev.id < b.hi
	WHERE ev.claimed_at >= b.since AND ev.claimed_at < b.whole AND ev.source = ANY ($1::text[])
	GROUP BY b.w, ev.source)
SELECT s, x.w, h.a + COALESCE(e.n, 0), h.d + r.n + bt.n
FROM unnest($1::text[]) AS s
	CROSS JOIN x
	LEFT JOIN e ON e.w = x.w AND e.source = s
	CROSS JOIN LATERAL (SELECT COALESCE(sum(accepted), 0)::bigint AS a, COALESCE(sum(duplicates), 0)::bigint AS d
		FROM hourly WHERE source = s AND hour >= x.whole) h
	CROSS JOIN LATERAL (SELECT count(*) AS n FROM receipts
		WHERE source = s AND received_at >= x.since AND received_at < x.whole
			AND kind IN ('duplicate', 'divergent')) r
	CROSS JOIN LATERAL (SELECT count(*) AS n FROM receipts rb JOIN receipt_events re ON re.receipt_id = rb.id
		WHERE rb.source = s AND rb.received_at >= x.since AND rb.received_at < x.whole
			AND rb.kind = 'batch' AND re.kind <> 'accepted') bt`

// RecentCounts counts each source's accepted events and duplicates since
// hour ([0]) and since day ([1]), for the dashboard, from the hourly counts
// and at most an hour of rows per window (recentCountsSQL). The hourly
// counts only add: a repeat in the window whose receipt retention has
// deleted since still counts, as on SQLite. The part of the first hour is
// counted from rows, so a window's edge is exact to the microsecond, not
// rounded to its hour; its walk relies on ids growing with time to within
// two hours (an instance's clock skew plus its delay from receipt to
// insert must stay under that).
func (s *Store) RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]hookwarden.WindowCounts, error) {
	out := make(map[string][2]hookwarden.WindowCounts, len(sources))
	if len(sources) == 0 {
		return out, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, recentCountsSQL, sources, hour.UTC(), day.UTC())
	if err != nil {
		return nil, fmt.Errorf("recent counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var src string
		var w, acc, dup int
		if err := rows.Scan(&src, &w, &acc, &dup); err != nil {
			return nil, fmt.Errorf("recent counts: %w", err)
		}
		c := out[src]
		c[w] = hookwarden.WindowCounts{Accepted: acc, Duplicates: dup}
		out[src] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recent counts: %w", err)
	}
	return out, nil
}
