package pgstore

// LastAccepted, which serve reads at start to seed the absence clock. The
// rest of the Inspector is being built beside it (events, stats, ...):
// when that lands with its own LastAccepted, this file goes.

import (
	"context"
	"fmt"
	"time"
)

// LastAccepted is when each source last claimed a new event (absent:
// never), what retention removed included, as sqlitestore reads it.
func (s *Store) LastAccepted(ctx context.Context, sources []string) (map[string]time.Time, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make(map[string]time.Time, len(sources))
	for _, src := range sources {
		var at, pruned *time.Time
		err := s.pool.QueryRow(ctx, `
SELECT
	(SELECT r.received_at FROM receipts r WHERE r.source = $1
		AND (r.kind = 'accepted' OR (r.kind = 'batch'
			AND EXISTS (SELECT 1 FROM receipt_events re WHERE re.receipt_id = r.id AND re.kind = 'accepted')))
		ORDER BY r.received_at DESC LIMIT 1),
	(SELECT at FROM pruned_totals WHERE name = $1 AND kind = 'last_accepted')`, src).Scan(&at, &pruned)
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		var t time.Time
		if at != nil {
			t = at.UTC()
		}
		if pruned != nil && pruned.After(t) {
			t = pruned.UTC()
		}
		if !t.IsZero() {
			out[src] = t
		}
	}
	return out, nil
}
