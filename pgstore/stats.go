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
// the counters the triggers keep (migrations/0006_counters.sql, 0007) plus
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
// repeats received since the hour ($2) and the day ($3). The claims are
// walked once for all sources, newest first by id down to the last one
// claimed before the day (less idSlack); the repeats on receipts' (source,
// received_at) index: the cost follows the day's traffic, not the history.
var recentCountsSQL = `
WITH a AS (
	SELECT source, count(*) AS n, count(*) FILTER (WHERE claimed_at >= $2) AS h
	FROM events WHERE id > ` + idBefore("$3") + ` AND claimed_at >= $3 AND source = ANY($1)
	GROUP BY source)
SELECT s, COALESCE(a.n, 0), COALESCE(a.h, 0), r.n, r.h, b.n, b.h
FROM unnest($1::text[]) AS s
	LEFT JOIN a ON a.source = s
	CROSS JOIN LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE received_at >= $2) AS h
		FROM receipts WHERE source = s AND received_at >= $3 AND kind IN ('duplicate', 'divergent')) r
	CROSS JOIN LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE r.received_at >= $2) AS h
		FROM receipts r JOIN receipt_events re ON re.receipt_id = r.id
		WHERE r.source = s AND r.received_at >= $3 AND r.kind = 'batch' AND re.kind <> 'accepted') b`

// RecentCounts counts each source's accepted events and duplicates since
// hour ([0]) and since day ([1]), for the dashboard. Counts older than
// retention.payloads are not in these windows' reach.
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
		var accD, accH, dupD, dupH, batD, batH int
		if err := rows.Scan(&src, &accD, &accH, &dupD, &dupH, &batD, &batH); err != nil {
			return nil, fmt.Errorf("recent counts: %w", err)
		}
		out[src] = [2]hookwarden.WindowCounts{
			{Accepted: accH, Duplicates: dupH + batH},
			{Accepted: accD, Duplicates: dupD + batD},
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recent counts: %w", err)
	}
	return out, nil
}
