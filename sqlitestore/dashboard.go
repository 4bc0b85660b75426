package sqlitestore

// Narrow reads for the metrics and the dashboard (issue 5). The operator
// reads (dead letters, replay, gaps, stats) live with the CLI's in their own
// files; only what those do not cover is here.

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

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

// WindowCounts are a source's events in a recent window: new events claimed
// and repeats of claimed ones (divergent repeats and batch elements
// included), counted as Stats counts them.
type WindowCounts struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// RecentCounts counts each source's accepted events and duplicates since
// hour ([0]) and since day ([1]), for the dashboard. The cost follows the
// day's traffic, not the history: events are walked newest first by id down
// to the last one claimed before day (ids grow with time, so the window is
// exact to within one writer batch), receipts on (source, received_at).
// Counts older than retention.payloads are not in these windows' reach.
func (s *Store) RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]WindowCounts, error) {
	out := make(map[string][2]WindowCounts, len(sources))
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
		out[src] = [2]WindowCounts{
			{Accepted: accH, Duplicates: dupH + batH},
			{Accepted: accD, Duplicates: dupD + batD},
		}
	}
	return out, nil
}
