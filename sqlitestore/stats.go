package sqlitestore

// Counts over the whole file (stats, /api/stats) and over recent windows
// (the dashboard, the metrics' absence clock). Reads only.

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// Stats counts per source and per destination over the whole file. What
// retention deleted still counts (pruned_totals keeps its totals), so the
// numbers do not drop when receipts and jobs are pruned. The
// names given come first, with zeros, then any other name found in the file.
func (s *Store) Stats(ctx context.Context, sources, destinations []string) (hookwarden.Stats, error) {
	st := hookwarden.Stats{At: s.now().UTC()}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	srcIdx := map[string]int{}
	src := func(name string) *hookwarden.SourceStats {
		i, ok := srcIdx[name]
		if !ok {
			i = len(st.Sources)
			srcIdx[name] = i
			st.Sources = append(st.Sources, hookwarden.SourceStats{Source: name})
		}
		return &st.Sources[i]
	}
	for _, n := range sources {
		src(n)
	}
	err = eachRow(ctx, tx, `
SELECT source, 'events', count(*), NULL FROM events GROUP BY source
UNION ALL SELECT source, kind, count(*), max(received_at) FROM receipts GROUP BY source, kind
UNION ALL SELECT r.source, 'batch-' || re.kind, count(*), NULL
	FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.kind != 'accepted' GROUP BY r.source, re.kind
UNION ALL SELECT source, 'quarantine', sum(count), max(last_at) FROM quarantine GROUP BY source
UNION ALL SELECT name, 'pruned-' || kind, n, CASE WHEN kind = 'last_received' THEN at END FROM pruned_totals WHERE kind != 'delivered'
ORDER BY 1`,
		func(rows *sql.Rows) error {
			var name, kind string
			var n int
			var last sql.NullString
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
			if t, err := parseNullTime(last); err == nil && t.After(ss.LastReceivedAt) {
				ss.LastReceivedAt = t
			}
			return nil
		})
	if err != nil {
		return st, fmt.Errorf("stats per source: %w", err)
	}

	dstIdx := map[string]int{}
	dst := func(name string) *hookwarden.OutboxStat {
		i, ok := dstIdx[name]
		if !ok {
			i = len(st.Destinations)
			dstIdx[name] = i
			st.Destinations = append(st.Destinations, hookwarden.OutboxStat{Destination: name})
		}
		return &st.Destinations[i]
	}
	for _, n := range destinations {
		dst(n)
	}
	err = eachRow(ctx, tx, `
SELECT destination, state, count(*), min(CASE WHEN state = 'pending' THEN COALESCE(replayed_at, created_at) END)
FROM jobs GROUP BY destination, state
UNION ALL SELECT name, kind, n, NULL FROM pruned_totals WHERE kind = 'delivered'
ORDER BY 1`,
		func(rows *sql.Rows) error {
			var name, state string
			var n int
			var oldest sql.NullString
			if err := rows.Scan(&name, &state, &n, &oldest); err != nil {
				return err
			}
			ds := dst(name)
			switch state {
			case "pending":
				ds.Pending = n
				if t, err := parseNullTime(oldest); err == nil && !t.IsZero() {
					ds.OldestPendingAge = max(st.At.Sub(t), 0)
					ds.OldestPendingSeconds = ds.OldestPendingAge.Seconds()
				}
			case "delivered": // live jobs, and those retention folded away
				ds.Delivered += n
			case "dead":
				ds.Dead = n
			}
			return nil
		})
	if err != nil {
		return st, fmt.Errorf("stats per destination: %w", err)
	}
	return st, nil
}

// LastAccepted returns, for each source named, when it last claimed a new
// event (absent when it never did). It seeds
// hookwarden_last_accepted_timestamp_seconds at start, so a restart does not
// reset the absence alert's clock. One walk per source, newest first, on the
// (source, received_at) index of receipts, stopping at the first request
// that claimed something (duplicates in between are skipped); events already
// folded by retention.payloads are known from pruned_totals.
func (s *Store) LastAccepted(ctx context.Context, sources []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(sources))
	for _, src := range sources {
		var at, pruned sql.NullString
		err := s.rdb.QueryRowContext(ctx, `
SELECT
	(SELECT r.received_at FROM receipts r WHERE r.source = ?1
		AND (r.kind = 'accepted' OR (r.kind = 'batch'
			AND EXISTS (SELECT 1 FROM receipt_events re WHERE re.receipt_id = r.id AND re.kind = 'accepted')))
		ORDER BY r.received_at DESC LIMIT 1),
	(SELECT at FROM pruned_totals WHERE name = ?1 AND kind = 'last_accepted')`, src).Scan(&at, &pruned)
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		t, err := parseNullTime(at)
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		p, err := parseNullTime(pruned)
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		if p.After(t) {
			t = p
		}
		if !t.IsZero() {
			out[src] = t
		}
	}
	return out, nil
}

// RecentCounts counts each source's accepted events and duplicates since
// hour ([0]) and since day ([1]), for the dashboard. The cost follows the
// day's traffic, not the history: events are walked newest first by id down
// to the last one claimed before day (ids grow with time, so the window is
// exact to within one writer batch), receipts on (source, received_at).
// Counts older than retention.payloads are not in these windows' reach.
func (s *Store) RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]hookwarden.WindowCounts, error) {
	out := make(map[string][2]hookwarden.WindowCounts, len(sources))
	h, d := fmtTime(hour), fmtTime(day)
	var from int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT `+idBefore("?"), d).Scan(&from); err != nil {
		return nil, fmt.Errorf("recent counts: %w", err)
	}
	for _, src := range sources {
		var accD, accH, dupD, dupH, batD, batH int
		err := s.rdb.QueryRowContext(ctx, `
SELECT a.n, a.h, r.n, r.h, b.n, b.h FROM
	(SELECT count(*) AS n, coalesce(sum(claimed_at >= ?2), 0) AS h
		FROM events WHERE id > ?4 AND claimed_at >= ?3 AND +source = ?1) a,
	(SELECT count(*) AS n, coalesce(sum(received_at >= ?2), 0) AS h
		FROM receipts WHERE source = ?1 AND received_at >= ?3 AND kind IN ('duplicate', 'divergent')) r,
	(SELECT count(*) AS n, coalesce(sum(r.received_at >= ?2), 0) AS h
		FROM receipts r JOIN receipt_events re ON re.receipt_id = r.id
		WHERE r.source = ?1 AND r.received_at >= ?3 AND r.kind = 'batch' AND re.kind != 'accepted') b`,
			src, h, d, from).Scan(&accD, &accH, &dupD, &dupH, &batD, &batH)
		if err != nil {
			return nil, fmt.Errorf("recent counts of %s: %w", src, err)
		}
		out[src] = [2]hookwarden.WindowCounts{
			{Accepted: accH, Duplicates: dupH + batH},
			{Accepted: accD, Duplicates: dupD + batD},
		}
	}
	return out, nil
}
