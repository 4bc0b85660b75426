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
// repeats received in each window (w 0: the hour, from $2 with whole hours
// from $3; w 1: the day, $4 and $5; hookwarden.WindowStart): the whole
// hours from hourly, the minutes before them from minutely, each a range
// of its key per source.
const recentCountsSQL = `
SELECT s, x.w, h.a + m.a, h.d + m.d
FROM unnest($1::text[]) AS s
	CROSS JOIN (VALUES (0, $2::timestamptz, $3::timestamptz), (1, $4::timestamptz, $5::timestamptz)) AS x(w, start, whole)
	CROSS JOIN LATERAL (SELECT COALESCE(sum(accepted), 0)::bigint AS a, COALESCE(sum(duplicates), 0)::bigint AS d
		FROM hourly WHERE source = s AND hour >= x.whole) h
	CROSS JOIN LATERAL (SELECT COALESCE(sum(accepted), 0)::bigint AS a, COALESCE(sum(duplicates), 0)::bigint AS d
		FROM minutely WHERE source = s AND minute >= x.start AND minute < x.whole) m`

// RecentCounts counts each source's accepted events and duplicates since
// hour ([0]) and since day ([1]), for the dashboard, from the start of each
// bound's minute (hookwarden.WindowStart): the whole hours of a window
// from hourly, the minutes of its first hour from minutely (schema 13),
// never the rows of that hour. Both only add: a repeat in the window whose
// receipt retention has deleted since still counts, as on SQLite.
func (s *Store) RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]hookwarden.WindowCounts, error) {
	out := make(map[string][2]hookwarden.WindowCounts, len(sources))
	if len(sources) == 0 {
		return out, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := time.Now()
	if s.opts.Now != nil {
		now = s.opts.Now()
	}
	hs, hw := hookwarden.WindowStart(now, hour)
	ds, dw := hookwarden.WindowStart(now, day)
	rows, err := s.pool.Query(ctx, recentCountsSQL, sources, hs, hw, ds, dw)
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
