package pgstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestFillHistory: the benchmark's bulk history is a store the store reads
// like any other (its counts, listings and hourly counts equal what was
// written; a prune pass with the same retention has nothing to do), and
// the next request after it claims and records as usual.
func TestFillHistory(t *testing.T) {
	q := setupQueue(t)
	q.clock.Add(100 * 24 * time.Hour)
	s, ctx := q.s, q.ctx
	start := time.Now()
	if err := s.FillHistory(ctx, hookwarden.History{Claims: 50000, Payloads: 10000, Source: "bench", Body: 64}, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("50,000 claims in %s", time.Since(start))
	st, err := s.Stats(ctx, []string{"bench", "other", "rare"}, []string{"bench/app"})
	if err != nil {
		t.Fatal(err)
	}
	var acc, dup int
	for _, ss := range st.Sources {
		acc, dup = acc+ss.Accepted, dup+ss.Duplicates
	}
	if acc != 50000 || dup != 2000 {
		t.Errorf("accepted %d, duplicates %d; want 50000 and 2000", acc, dup)
	}
	var delivered, dead int
	for _, d := range st.Destinations {
		delivered, dead = delivered+d.Delivered, dead+d.Dead
	}
	if delivered != 50000-10 || dead != 10 {
		t.Errorf("delivered %d, dead %d; want 49990 and 10", delivered, dead)
	}
	items, _, err := s.ListEvents(ctx, hookwarden.EventFilter{Source: "rare", Type: "type.0", Limit: 5})
	if err != nil || len(items) != 5 || items[0].Source != "rare" || items[0].Type != "type.0" || items[0].Ref != 50000 {
		t.Fatalf("list rare type.0: %+v %v", items, err)
	}
	if items, _, err := s.ListEvents(ctx, hookwarden.EventFilter{Status: hookwarden.StatusDead}); err != nil || len(items) != 10 {
		t.Fatalf("dead events: %d %v", len(items), err)
	}
	d, err := s.ShowEvent(ctx, "bench", "hist_49998")
	if err != nil || len(d.ReceiptLog) != 1 || len(d.ReceiptLog[0].Body) != 64 || d.Status != hookwarden.StatusDelivered {
		t.Fatalf("show a payload event: %+v %v", d, err)
	}
	res, err := s.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: 30 * 24 * time.Hour, Claims: 90 * 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if res.PayloadsPruned != 0 || res.EventsDeleted != 0 || res.HeldDead != 0 {
		t.Errorf("a prune of the fresh history did something: %+v", res)
	}
	after, err := s.Stats(ctx, []string{"bench", "other", "rare"}, []string{"bench/app"})
	if err != nil {
		t.Fatal(err)
	}
	after.At = st.At
	if fmt.Sprint(after) != fmt.Sprint(st) {
		t.Errorf("stats moved across the prune:\n%+v\n%+v", st, after)
	}
	hours, err := s.Hourly(ctx, []string{"bench"}, q.clock.Now().Add(-7*24*time.Hour))
	if err != nil || len(hours["bench"]) < 160 {
		t.Errorf("hourly of the last 7 days: %d hours, %v; want about 168", len(hours["bench"]), err)
	}
	// The triggers counted every row the history wrote (folded ones in
	// pruned_totals), hour by hour.
	cs, err := s.counterStats(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hours, err = s.Hourly(ctx, []string{"bench", "other", "rare"}, q.clock.Now().Add(-100*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	full, fullHours := fullCount(t, s, q.clock.Now())
	if got, want := countsText(cs, hours), countsText(full, fullHours); got != want {
		t.Errorf("counters\n%s\nwant the full count\n%s", got, want)
	}
	// The next claim after the history.
	r := receipt("bench", "after", `{}`)
	r.Events[0].Destinations = []string{"bench/app"}
	if res, err := s.Record(ctx, r); err != nil || res.Events[0].Outcome != hookwarden.Accepted || res.Events[0].Jobs != 1 {
		t.Fatalf("record after the history: %+v %v", res, err)
	}
	if d, err := s.ShowEvent(ctx, "bench", "after"); err != nil || d.Ref != 50001 || len(d.ReceiptLog) != 1 || d.ReceiptLog[0].ID != 100002 {
		t.Fatalf("the claim after the history: %+v %v, want event 50001, receipt 100002", d, err)
	}
}
