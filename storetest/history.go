package storetest

// The benchmark's bulk history (hookwarden.History): a store filled by the
// harness's FillHistory reads like any other.

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testFillHistory: counts, listings and hourly counts equal what the
// history wrote; a prune pass with the same retention has nothing to do;
// the counters equal a full count; the next request after it claims and
// records as usual, with the ids after the history's.
func testFillHistory(t *testing.T, h Harness) {
	if h.FillHistory == nil {
		t.Skip("the harness has no FillHistory")
	}
	f := setup(t, h)
	// The history's 90 days inside the suite's hourly reads (from 2026-01-01).
	f.clock.Add(100 * 24 * time.Hour)
	start := time.Now()
	if err := h.FillHistory(t, f.s, hookwarden.History{Claims: 50000, Payloads: 10000, Source: "bench", Body: 64}); err != nil {
		t.Fatal(err)
	}
	t.Logf("50,000 claims in %s", time.Since(start))
	srcs := []string{"bench", "other", "rare"}
	st := f.stats(srcs, []string{"bench/app"})
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
	items, _, err := f.s.ListEvents(f.ctx, hookwarden.EventFilter{Source: "rare", Type: "type.0", Limit: 5})
	if err != nil || len(items) != 5 || items[0].Source != "rare" || items[0].Type != "type.0" || items[0].Ref != 50000 {
		t.Fatalf("list rare type.0: %+v %v", items, err)
	}
	if items, _, err := f.s.ListEvents(f.ctx, hookwarden.EventFilter{Status: hookwarden.StatusDead}); err != nil || len(items) != 10 {
		t.Fatalf("dead events: %d %v", len(items), err)
	}
	if d := f.show("bench", hookwarden.HistoryEventID(49998)); len(d.ReceiptLog) != 1 || len(d.ReceiptLog[0].Body) != 64 || d.Status != hookwarden.StatusDelivered {
		t.Fatalf("show a payload event: %+v", d)
	}
	if d := f.show("bench", hookwarden.HistoryEventID(6)); d.Ref != 6 || d.EventID != hookwarden.HistoryEventID(6) {
		t.Fatalf("show a folded event: %+v", d)
	}
	res := f.prune(PruneOptions{Retention: hookwarden.Retention{Payloads: 30 * 24 * time.Hour, Claims: 90 * 24 * time.Hour}})
	if res.PayloadsPruned != 0 || res.EventsDeleted != 0 || res.HeldDead != 0 {
		t.Errorf("a prune of the fresh history did something: %+v", res)
	}
	after := f.stats(srcs, []string{"bench/app"})
	after.At = st.At
	if fmt.Sprint(after) != fmt.Sprint(st) {
		t.Errorf("stats moved across the prune:\n%+v\n%+v", st, after)
	}
	hours, err := f.s.Hourly(f.ctx, []string{"bench"}, f.clock.Now().Add(-7*24*time.Hour))
	if err != nil || len(hours["bench"]) < 160 {
		t.Errorf("hourly of the last 7 days: %d hours, %v; want about 168", len(hours["bench"]), err)
	}
	// The store counted every row the history wrote (the folded ones as
	// retention keeps them), hour by hour.
	if h.FullCount != nil {
		f.checkCounts("the history")
	}
	// The next claim after the history.
	if res := f.record("bench", "after", `{}`, "bench/app"); res.Events[0].Outcome != hookwarden.Accepted || res.Events[0].Jobs != 1 {
		t.Fatalf("record after the history: %+v", res)
	}
	if d := f.show("bench", "after"); d.Ref != 50001 || len(d.ReceiptLog) != 1 || d.ReceiptLog[0].ID != 100002 {
		t.Fatalf("the claim after the history: %+v, want event 50001, receipt 100002", d)
	}
	// The history's claims are remembered, the oldest as the newest (on
	// SQLite with folding on, in the large level and the recent one).
	for _, i := range []int{6, 44444, 49998} {
		if res := f.record("bench", hookwarden.HistoryEventID(i), `{}`, "bench/app"); res.Events[0].Outcome != hookwarden.Duplicate || res.Events[0].Jobs != 0 {
			t.Errorf("history claim %d re-sent: %+v, want a duplicate", i, res.Events[0])
		}
	}
}
