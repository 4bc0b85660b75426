package storetest

import (
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testLateArrivals: after an outage, the events whose own time lies inside
// the window and that arrived after it are counted on the window's entry
// for their source, with the last arrival and the longest lag; live
// events, events timed outside the window, duplicates and backfilled ones
// are not.
func testLateArrivals(t *testing.T, h Harness) {
	f := setup(t, h)
	timed := func(id string, at time.Time) *hookwarden.Receipt {
		r := f.receipt("st", id, `{"id":"`+id+`"}`)
		r.Events[0].EventTime = at
		return r
	}
	run1 := f.startRun()
	f.mustRecord(timed("live", f.clock.Now().Add(-time.Second))) // a live event: not late
	f.clock.Add(5 * time.Second)
	f.heartbeat(run1)
	start := f.clock.Now()
	f.clock.Add(time.Hour) // run1 died: an hour's outage
	end := f.clock.Now()
	run2 := f.startRun()
	opt := hookwarden.GapOptions{Stale: 24 * time.Hour, Sources: []hookwarden.SourcePolicy{{Name: "st", RetryHorizon: 72 * time.Hour, EventTime: true},
		{Name: "plain", RetryHorizon: 72 * time.Hour}}}
	entry := func() (st, plain hookwarden.SourceRecovery) {
		t.Helper()
		rep, err := hookwarden.GapsWithRecovery(f.ctx, f.s, opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Outages) != 1 || len(rep.Outages[0].Sources) != 2 {
			t.Fatalf("gaps: %+v, want one outage with two sources", rep.Outages)
		}
		return rep.Outages[0].Sources[0], rep.Outages[0].Sources[1]
	}
	if st, plain := entry(); st.RecoveredByRetries == nil || *st.RecoveredByRetries != 0 || st.LastLateArrival != nil ||
		plain.RecoveredByRetries != nil {
		t.Fatalf("before any retry: st %+v plain %+v, want st 0 and no last arrival, plain without the count", st, plain)
	}
	f.clock.Add(10 * time.Minute)
	maxLag := f.clock.Now().Sub(start.Add(time.Minute)) // r1's, the longest
	f.mustRecord(timed("r1", start.Add(time.Minute)))
	f.mustRecord(timed("r1", start.Add(time.Minute))) // a duplicate: counted once
	bf := timed("bf", start.Add(2*time.Minute))
	bf.Backfill = true
	f.mustRecord(bf)                                     // recovered by backfill, not by retries
	f.mustRecord(timed("before", start.Add(-time.Hour))) // from before the window
	f.clock.Add(20 * time.Minute)
	last := f.clock.Now()
	f.mustRecord(timed("r2", end.Add(-time.Minute)))
	f.mustRecord(timed("r3", start.Add(30*time.Minute)))
	st, _ := entry()
	if st.RecoveredByRetries == nil || *st.RecoveredByRetries != 3 || st.LastLateArrival == nil || !st.LastLateArrival.Equal(last) ||
		st.MaxLag == nil || *st.MaxLag != maxLag.Seconds() {
		t.Fatalf("after the retries: %+v (n %d, max lag %v), want 3 recovered, the last at %v, max lag %v", st, *st.RecoveredByRetries, *st.MaxLag, last, maxLag)
	}
	// A platform's batch (one receipt, several events: the stores' batch
	// path) keeps its late events too: two new ones, and r2 again.
	b := f.batch("st", "st/app", element("b1"), element("b2"), element("r2"))
	for i := range b.Events {
		b.Events[i].EventTime = start.Add(40 * time.Minute)
	}
	f.mustRecord(b)
	if st, _ := entry(); st.RecoveredByRetries == nil || *st.RecoveredByRetries != 5 {
		t.Fatalf("after a batch of two new late events and a duplicate: %+v, want 5 recovered", st)
	}
	// Retention of claims takes the late arrivals with it.
	f.clock.Add(10 * 24 * time.Hour)
	f.heartbeat(run2)
	f.prune(PruneOptions{Retention: Retention{Payloads: 24 * time.Hour, Claims: 5 * 24 * time.Hour}})
	if st, _ := entry(); st.RecoveredByRetries == nil || *st.RecoveredByRetries != 0 {
		t.Fatalf("after retention.claims passed them: %+v, want 0 recovered", st)
	}
}
