package sqlitestore

import (
	"context"
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
	if plan := queryPlan(t, s, warmClaimsSQL); len(plan) != 1 || !strings.Contains(plan[0], "COVERING INDEX sqlite_autoindex_events_1") {
		t.Errorf("the warm-up reads %q, want the claim index alone", plan)
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
	n, err := s.WarmClaims(ctx)
	if err != nil || n != 40+10 {
		t.Fatalf("WarmClaims = %d, %v; want github's 40 claims and few's 10, not paddle's", n, err)
	}
	ordered, err := s.orderedSources(ctx)
	if err != nil || len(ordered) != 1 || !ordered["paddle"] {
		t.Errorf("sources in order: %v, %v; want paddle alone", ordered, err)
	}
	for _, q := range []struct {
		sql  string
		args []any
		want string
	}{
		{warmSourceSQL, []any{"github"}, "COVERING INDEX sqlite_autoindex_events_1 (source=?)"},
		{warmNextSourceSQL, []any{"few"}, "COVERING INDEX sqlite_autoindex_events_1 (source>?)"},
		{warmNewestSQL, []any{warmSample}, "SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"},
	} {
		plan := queryPlan(t, s, q.sql, q.args...)
		if !strings.Contains(plan[0], q.want) || strings.Contains(strings.Join(plan, "\n"), "SCAN") {
			t.Errorf("%s: plan %q, want %s and no scan", q.sql, plan, q.want)
		}
	}
	// Once paddle's newest claims come in no order, it is read again.
	for i := range 40 {
		record("paddle", uuidLike(1000+i))
	}
	if n, err := s.WarmClaims(ctx); err != nil || n != 130 {
		t.Errorf("WarmClaims = %d, %v; want all 130 claims", n, err)
	}
}
