package pgstore

// Counts over the whole store (stats, /api/stats) and over recent windows
// (the dashboard, the metrics' absence clock), with sqlitestore's
// semantics. Reads only, no locks.

import (
	"context"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// statsSourcesSQL counts per source: claims, receipts by kind, batch
// elements that repeated a claim, held copies, and what retention deleted
// (pruned_totals), with the last request's time.
const statsSourcesSQL = `
SELECT source, 'events', count(*), NULL::timestamptz FROM events GROUP BY source
UNION ALL SELECT source, kind, count(*), max(received_at) FROM receipts GROUP BY source, kind
UNION ALL SELECT r.source, 'batch-' || re.kind, count(*), NULL
	FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.kind <> 'accepted' GROUP BY r.source, re.kind
UNION ALL SELECT source, 'quarantine', sum(count), max(last_at) FROM quarantine GROUP BY source
UNION ALL SELECT name, 'pruned-' || kind, n, CASE WHEN kind = 'last_received' THEN at END FROM pruned_totals WHERE kind <> 'delivered'
ORDER BY 1`

// statsDestinationsSQL counts jobs per destination and state, the oldest
// pending one's age from its creation or last replay, and the deliveries
// retention folded away.
const statsDestinationsSQL = `
SELECT destination, state, count(*), min(CASE WHEN state = 'pending' THEN COALESCE(replayed_at, created_at) END)
FROM jobs GROUP BY destination, state
UNION ALL SELECT name, kind, n, NULL FROM pruned_totals WHERE kind = 'delivered'
ORDER BY 1`

// Stats counts per source and per destination over the whole store, from
// one snapshot. What retention deleted still counts (pruned_totals keeps
// its totals). The names given come first, with zeros, then any other name
// found. At is the store's clock.
//
// It reads every row: a full count, as sqlitestore's; serve's metrics read
// OutboxStats instead.
func (s *Store) Stats(ctx context.Context, sources, destinations []string) (hookwarden.Stats, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var st hookwarden.Stats
	err := s.snapshot(ctx, func(tx pgx.Tx) error {
		st = hookwarden.Stats{}
		if err := tx.QueryRow(ctx, `SELECT COALESCE($1::timestamptz, now())`, s.now()).Scan(&st.At); err != nil {
			return fmt.Errorf("read the clock: %w", err)
		}
		st.At = st.At.UTC()
		if err := statsSources(ctx, tx, &st, sources); err != nil {
			return fmt.Errorf("per source: %w", err)
		}
		if err := statsDestinations(ctx, tx, &st, destinations); err != nil {
			return fmt.Errorf("per destination: %w", err)
		}
		return nil
	})
	if err != nil {
		return hookwarden.Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

func statsSources(ctx context.Context, tx pgx.Tx, st *hookwarden.Stats, names []string) error {
	idx := map[string]int{}
	src := func(name string) *hookwarden.SourceStats {
		i, ok := idx[name]
		if !ok {
			i = len(st.Sources)
			idx[name] = i
			st.Sources = append(st.Sources, hookwarden.SourceStats{Source: name})
		}
		return &st.Sources[i]
	}
	for _, n := range names {
		src(n)
	}
	rows, err := tx.Query(ctx, statsSourcesSQL)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, kind string
		var n int
		var last *time.Time
		if err := rows.Scan(&name, &kind, &n, &last); err != nil {
			return err
		}
		ss := src(name)
		switch kind {
		case "events", "pruned-accepted":
			ss.Accepted += n
		case "duplicate", "batch-duplicate", "pruned-duplicate":
			ss.Duplicates += n
		case "divergent", "batch-divergent", "pruned-divergent":
			ss.Duplicates += n
			ss.Divergent += n
		case "quarantine", "pruned-quarantined":
			ss.Quarantined += n
		}
		if t := utc(last); t.After(ss.LastReceivedAt) {
			ss.LastReceivedAt = t
		}
	}
	return rows.Err()
}

func statsDestinations(ctx context.Context, tx pgx.Tx, st *hookwarden.Stats, names []string) error {
	idx := map[string]int{}
	dst := func(name string) *hookwarden.OutboxStat {
		i, ok := idx[name]
		if !ok {
			i = len(st.Destinations)
			idx[name] = i
			st.Destinations = append(st.Destinations, hookwarden.OutboxStat{Destination: name})
		}
		return &st.Destinations[i]
	}
	for _, n := range names {
		dst(n)
	}
	rows, err := tx.Query(ctx, statsDestinationsSQL)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, state string
		var n int
		var oldest *time.Time
		if err := rows.Scan(&name, &state, &n, &oldest); err != nil {
			return err
		}
		ds := dst(name)
		switch state {
		case "pending":
			ds.Pending = n
			if oldest != nil {
				ds.OldestPendingAge = max(st.At.Sub(*oldest), 0)
				ds.OldestPendingSeconds = ds.OldestPendingAge.Seconds()
			}
		case "delivered": // live jobs, and those retention folded away
			ds.Delivered += n
		case "dead":
			ds.Dead = n
		}
	}
	return rows.Err()
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
