package storetest

// Backfill: recovered events take the live claim, and the run log.

import (
	"errors"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testBackfillRecorded: a receipt recovered by a backfill claims like a live
// one and its job carries the API's bytes; a live copy after it, and a
// backfill copy after a live claim, are duplicates, never divergent, though
// their bytes differ; Claimed tells claimed ids from the rest.
func testBackfillRecorded(t *testing.T, h Harness) {
	f := setup(t, h)
	bf := func(id, body string) *hookwarden.Receipt {
		r := f.receipt("stripe", id, body, "stripe/app")
		r.Backfill = true
		return r
	}
	res := f.mustRecord(bf("evt_1", `{"id":"evt_1","api":true}`))
	if res.Outcome != hookwarden.Accepted || res.Events[0].Jobs != 1 {
		t.Fatalf("backfilled event: %+v, want accepted with its job", res)
	}
	if res := f.mustRecord(bf("evt_1", `{"id":"evt_1","api":true}`)); res.Outcome != hookwarden.Duplicate || res.Events[0].Jobs != 0 {
		t.Fatalf("second backfill of it: %+v, want a duplicate without jobs", res)
	}
	// The webhook's bytes differ from the API's JSON: still no flag.
	res = f.record("stripe", "evt_1", `{"id":"evt_1","live":true}`, "stripe/app")
	if res.Outcome != hookwarden.Duplicate || res.Events[0].Divergent || res.Events[0].Jobs != 0 {
		t.Fatalf("live copy after the backfill: %+v, want a duplicate, not divergent", res)
	}
	// The other way round: live first, then the backfill's copy.
	f.record("stripe", "evt_2", `{"id":"evt_2","live":true}`, "stripe/app")
	if res := f.mustRecord(bf("evt_2", `{"id":"evt_2","api":true}`)); res.Outcome != hookwarden.Duplicate || res.Events[0].Divergent {
		t.Fatalf("backfill copy of a live event: %+v, want a duplicate, not divergent", res)
	}
	// A live duplicate with other bytes of a live claim is still flagged.
	if res := f.record("stripe", "evt_2", `{"id":"evt_2","other":true}`, "stripe/app"); !res.Events[0].Divergent {
		t.Fatalf("live copy with other bytes of a live claim: %+v, want divergent", res)
	}
	jobs := f.lease("stripe/app", 10, time.Minute)
	if len(jobs) != 2 {
		t.Fatalf("leased %d jobs, want one per event (2)", len(jobs))
	}
	for _, j := range jobs {
		if j.EventID == "evt_1" && (string(j.Body) != `{"id":"evt_1","api":true}` || j.ContentType != "application/json") {
			t.Errorf("backfilled job: body %q, type %q; want the API's bytes as application/json", j.Body, j.ContentType)
		}
	}
	have, err := f.s.Claimed(f.ctx, "stripe", []string{"evt_1", "evt_2", "evt_3"})
	if err != nil {
		t.Fatal(err)
	}
	if !have["evt_1"] || !have["evt_2"] || have["evt_3"] || len(have) != 2 {
		t.Fatalf("claimed %v, want evt_1 and evt_2 only", have)
	}
	d := f.show("stripe", "evt_1")
	kinds := map[string]int{}
	for _, r := range d.ReceiptLog {
		kinds[r.Kind]++
	}
	if kinds["backfill"] != 1 || kinds["duplicate"] != 2 || d.Divergent || string(d.Body) != `{"id":"evt_1","api":true}` {
		t.Errorf("event shows kinds %v, divergent %v, body %q; want 1 backfill and 2 duplicates, not divergent, the API's body",
			kinds, d.Divergent, d.Body)
	}
}

// testBackfillRuns: one run of a source at a time (until it finishes or is
// left untouched for BackfillStale); an automatic run of a window once;
// runs read back with their counts.
func testBackfillRuns(t *testing.T, h Harness) {
	f := setup(t, h)
	from := f.clock.Now().Add(-2 * time.Hour)
	to := f.clock.Now().Add(-time.Hour)
	run := hookwarden.BackfillRun{Source: "stripe", From: from, To: to, Method: "list", Origin: hookwarden.AuditCLI, Actor: "ops"}
	id, err := f.s.StartBackfill(f.ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.StartBackfill(f.ctx, run); !errors.Is(err, hookwarden.ErrBackfillRunning) {
		t.Fatalf("second start while one runs: %v, want ErrBackfillRunning", err)
	}
	other, err := f.s.StartBackfill(f.ctx, hookwarden.BackfillRun{Source: "svix", From: from, To: to, Method: "redeliver", Auto: true})
	if err != nil {
		t.Fatalf("another source: %v", err)
	}
	listed, claimed := 10, 4
	run.ID = id
	run.Listed, run.AlreadyClaimed, run.Recovered, run.Failed = &listed, &claimed, 5, 1
	run.BeyondHistory = &hookwarden.Span{From: from, To: from.Add(time.Minute)}
	run.Error = "page 2 (cursor evt_9): malformed page"
	run.FinishedAt = f.clock.Now()
	if err := f.s.UpdateBackfill(f.ctx, run); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.StartBackfill(f.ctx, run); err != nil {
		t.Fatalf("start after the run finished: %v", err)
	}
	// The svix run's process died: once stale, another may start.
	auto := hookwarden.BackfillRun{Source: "svix", From: from, To: to, Method: "redeliver", Auto: true}
	if _, err := f.s.StartBackfill(f.ctx, auto); !errors.Is(err, hookwarden.ErrBackfillRunning) {
		t.Fatalf("start while svix runs: %v, want ErrBackfillRunning", err)
	}
	f.clock.Add(hookwarden.BackfillStale + time.Second)
	if _, err := f.s.StartBackfill(f.ctx, auto); !errors.Is(err, hookwarden.ErrBackfillDone) {
		t.Fatalf("second automatic run of a window: %v, want ErrBackfillDone", err)
	}
	auto.Auto = false
	if _, err := f.s.StartBackfill(f.ctx, auto); err != nil {
		t.Fatalf("manual run after a stale one: %v", err)
	}

	runs, err := f.s.BackfillRuns(f.ctx, []string{"stripe", "svix"}, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("%d runs, want 4: %+v", len(runs), runs)
	}
	got := runs[0]
	if got.ID != id || got.Source != "stripe" || !got.From.Equal(from) || !got.To.Equal(to) || got.Auto || got.Method != "list" ||
		got.Origin != hookwarden.AuditCLI || got.Actor != "ops" || !got.Finished() ||
		got.Listed == nil || *got.Listed != 10 || got.AlreadyClaimed == nil || *got.AlreadyClaimed != 4 ||
		got.Recovered != 5 || got.Failed != 1 || got.Error != run.Error ||
		got.BeyondHistory == nil || !got.BeyondHistory.To.Equal(from.Add(time.Minute)) {
		t.Errorf("run read back as %+v, want what was written (%+v)", got, run)
	}
	if r := runs[1]; r.ID != other || !r.Auto || r.Listed != nil || r.AlreadyClaimed != nil || r.Finished() {
		t.Errorf("svix run %+v: want auto, unfinished, counts unknown (nil)", r)
	}
	if runs, err := f.s.BackfillRuns(f.ctx, []string{"svix"}, to.Add(time.Second)); err != nil || len(runs) != 0 {
		t.Errorf("runs ending before since: %d (%v), want none", len(runs), err)
	}
	if all, err := f.s.BackfillRuns(f.ctx, nil, time.Time{}); err != nil || len(all) != 4 {
		t.Errorf("runs of every source: %d (%v), want 4", len(all), err)
	}
}
