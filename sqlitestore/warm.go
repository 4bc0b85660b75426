package sqlitestore

import (
	"context"
	"fmt"
)

// warmClaimsSQL reads every page of the claim index (events' UNIQUE
// (source, event_id)), and only those: a test checks its plan.
const warmClaimsSQL = `SELECT count(*) FROM events INDEXED BY sqlite_autoindex_events_1 WHERE source >= ''`

// WarmClaims reads the claim index once, so that its pages are in the page
// cache. A new claim whose id is random (a UUID, as GitHub's and Shopify's
// are) lands on a random page of that index: after a reboot, every such
// claim was a read from the disk until the index was cached (a 10 M-claim
// file with the file out of the cache: 543 acks/s and a p99 of 1.2 s for
// the first 10 s, against 6,500/s and 19 ms cached). Reading the index in
// key order takes seconds (at 10 M claims: 6.7 s cold and 0.4 s cached for
// one built in id order, 11.5 s cold under load for one built from ids in
// no order) and runs beside the traffic, on a read connection; while it reads, a
// checkpoint cannot pass its snapshot, so the WAL grows for those seconds.
func (s *Store) WarmClaims(ctx context.Context) (int64, error) {
	var n int64
	if err := s.rdb.QueryRowContext(ctx, warmClaimsSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the claim index: %w", err)
	}
	return n, nil
}
