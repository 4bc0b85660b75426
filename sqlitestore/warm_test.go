package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
)

// uuidLike is an id in no order for claim i, as a UUID is.
func uuidLike(i int) string {
	h := fnv.New64a()
	fmt.Fprint(h, i)
	return fmt.Sprintf("%016x-%d", h.Sum64(), i)
}

// TestWarmClaimsReadsTheClaimIndex: the warm-up at start reads the claim
// index, every claim of it, and not the table (whose pages, the payloads
// among them, are ten times the size).
func TestWarmClaimsReadsTheClaimIndex(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	for i := range 30 {
		if _, err := s.Record(ctx, receipt("github", uuidLike(i), fmt.Sprintf(`{"i":%d}`, i), "stripe/app")); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.WarmClaims(ctx); err != nil || n != 30 {
		t.Fatalf("WarmClaims = %d, %v; want the 30 claims", n, err)
	}
	checkClaimPlan(t, queryPlan(t, s, warmClaimsSQL), "(source>?)")
}

// checkClaimPlan fails unless plan searches the large level of the dedup
// memory by its keys (cond says how) and reads no table but it (and the
// one row of claim_levels).
func checkClaimPlan(t *testing.T, plan []string, cond string) {
	t.Helper()
	all := strings.Join(plan, "\n")
	if !strings.Contains(all, "SEARCH claims USING PRIMARY KEY "+cond) {
		t.Errorf("plan %q: want claims searched by %s", plan, cond)
	}
	for _, l := range plan {
		if strings.Contains(l, "SCAN") && !strings.Contains(l, "SCAN CONSTANT ROW") && !strings.Contains(l, "(subquery") &&
			!strings.Contains(l, "SCAN claim_levels") {
			t.Errorf("plan %q scans", plan)
		}
		if strings.Contains(l, "events") {
			t.Errorf("plan %q reads events", plan)
		}
	}
}

// TestWarmClaimsSkipsSourcesInOrder: a source whose newest claims came with
// ids in order is not read (its new claims land on its last pages), even
// when they were committed a little out of order; the others are, each its
// part of the claim index alone; a source with too few recent claims to
// tell is read.
func TestWarmClaimsSkipsSourcesInOrder(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	record := func(source, id string) {
		t.Helper()
		if _, err := s.Record(ctx, receipt(source, id, `{}`, "stripe/app")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		// In order, as ULIDs, but each eight committed in reverse, as
		// concurrent deliveries may be.
		record("paddle", fmt.Sprintf("evt_01%08d", i/8*8+7-i%8))
		record("github", uuidLike(i))
		if i%4 == 0 {
			record("few", fmt.Sprintf("f-%03d", i)) // in order, but too few to tell
		}
	}
	moveToClaims(t, s)
	n, err := s.WarmClaims(ctx)
	if err != nil || n != 40+10 {
		t.Fatalf("WarmClaims = %d, %v; want github's 40 claims and few's 10, not paddle's", n, err)
	}
	ordered, err := s.orderedSources(ctx)
	if err != nil || len(ordered) != 1 || !ordered["paddle"] {
		t.Errorf("sources in order: %v, %v; want paddle alone", ordered, err)
	}
	checkClaimPlan(t, queryPlan(t, s, warmSourceSQL, "github"), "(source=?)")
	checkClaimPlan(t, queryPlan(t, s, warmNextSourceSQL, "few"), "(source>?)")
	plan := queryPlan(t, s, warmNewestSQL, warmSample)
	if !strings.Contains(plan[0], "SEARCH events USING INTEGER PRIMARY KEY (rowid>?)") || strings.Contains(strings.Join(plan, "\n"), "SCAN") {
		t.Errorf("%s: plan %q, want events by id and no scan", warmNewestSQL, plan)
	}
	// Once paddle's newest claims come in no order, it is read again.
	for i := range 40 {
		record("paddle", uuidLike(1000+i))
	}
	moveToClaims(t, s)
	if n, err := s.WarmClaims(ctx); err != nil || n != 130 {
		t.Errorf("WarmClaims = %d, %v; want all 130 claims", n, err)
	}
}

// moveToClaims moves every claim of the log into the large level at once,
// as a finished fold leaves them.
func moveToClaims(t *testing.T, s *Store) {
	t.Helper()
	err := s.write(context.Background(), true, func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range []string{
			`INSERT INTO claims (source, event_id, event_ref) SELECT source, event_id, event_ref FROM claims_log ORDER BY source, event_id`,
			`DELETE FROM claims_log`,
			`UPDATE claim_levels SET recent = 0`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
