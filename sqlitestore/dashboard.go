package sqlitestore

// Narrow reads for the metrics and the dashboard (issue 5). The operator
// reads (dead letters, replay, gaps, stats) live with the CLI's in their own
// files; only what those do not cover is here.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// LastAccepted returns, for each source named, when it last claimed a new
// event (absent when it never did). It seeds
// hookwarden_last_accepted_timestamp_seconds at start, so a restart does not
// reset the absence alert's clock. One indexed walk per source, newest first
// (events_claimed), so a busy source answers at once; run it at start, not
// per scrape.
func (s *Store) LastAccepted(ctx context.Context, sources []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(sources))
	for _, src := range sources {
		var at string
		err := s.rdb.QueryRowContext(ctx,
			`SELECT claimed_at FROM events WHERE source = ? ORDER BY claimed_at DESC LIMIT 1`, src).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		t, err := parseTime(at)
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		out[src] = t
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
// day's traffic, not the history: events are walked on their claimed_at
// index ("+source" keeps the planner off the (source, event_id) index, which
// would visit every event the source ever sent), receipts on
// (source, received_at).
func (s *Store) RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]WindowCounts, error) {
	out := make(map[string][2]WindowCounts, len(sources))
	h, d := fmtTime(hour), fmtTime(day)
	for _, src := range sources {
		var accD, accH, dupD, dupH, batD, batH int
		err := s.rdb.QueryRowContext(ctx, `
SELECT a.n, a.h, r.n, r.h, b.n, b.h FROM
	(SELECT count(*) AS n, coalesce(sum(claimed_at >= ?2), 0) AS h
		FROM events WHERE claimed_at >= ?3 AND +source = ?1) a,
	(SELECT count(*) AS n, coalesce(sum(received_at >= ?2), 0) AS h
		FROM receipts WHERE source = ?1 AND received_at >= ?3 AND kind IN ('duplicate', 'divergent')) r,
	(SELECT count(*) AS n, coalesce(sum(r.received_at >= ?2), 0) AS h
		FROM receipts r JOIN receipt_events re ON re.receipt_id = r.id
		WHERE r.source = ?1 AND r.received_at >= ?3 AND r.kind = 'batch' AND re.kind != 'accepted') b`,
			src, h, d).Scan(&accD, &accH, &dupD, &dupH, &batD, &batH)
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
