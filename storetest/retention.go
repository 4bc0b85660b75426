package storetest

// Retention: payloads, claims and held requests, each on its own clock,
// and the counts that outlive them.

import (
	"errors"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

const day = 24 * time.Hour

// testRetentionPayloads: an event delivered everywhere is folded into its
// claim once past retention.payloads; dead letters, pending events and held
// requests keep their payloads. The claim still dedupes, and stats do not
// move.
func testRetentionPayloads(t *testing.T, h Harness) {
	f := setup(t, h)
	f.record("std", "A", `{"a":1}`, "std/a")
	f.finish("std/a", "A", hookwarden.Delivered)
	f.record("std", "B", `{"b":1}`, "std/b")
	f.finish("std/b", "B", hookwarden.Dead)
	f.record("std", "C", `{"c":1}`, "std/c") // stays pending
	f.record("std", "", `{"no":"id"}`)       // held
	f.clock.Add(35 * day)
	ret := Retention{Payloads: 30 * day}
	stats := f.statsText()

	dry := f.prune(PruneOptions{Retention: ret, DryRun: true})
	if dry.PayloadsPruned != 1 || dry.HeldDead != 1 || dry.HeldPending != 1 || dry.HeldQuarantined != 1 {
		t.Fatalf("dry run: %+v, want A pruned, B, C and the held request kept", dry)
	}
	if d := f.show("std", "A"); d.Body == nil || d.PayloadPruned {
		t.Fatal("the dry run pruned A")
	}
	res := f.prune(PruneOptions{Retention: ret, BatchSize: 1})
	if res.PayloadsPruned != 1 || res.HeldDead != 1 || res.HeldPending != 1 || res.HeldQuarantined != 1 {
		t.Fatalf("prune: %+v, want A pruned, B, C and the held request kept", res)
	}
	if got := f.statsText(); got != stats {
		t.Errorf("stats moved across the prune:\n%s\n%s", stats, got)
	}
	a := f.show("std", "A")
	if a.Body != nil || !a.PayloadPruned || !a.SummaryOnly || a.PrunedAt.IsZero() || a.Receipts != 1 ||
		a.Delivered != 1 || a.Status != StatusDelivered {
		t.Fatalf("A after pruning: %+v body %q, want a summary without payload", a.EventSummary, a.Body)
	}
	for id, body := range map[string]string{"B": `{"b":1}`, "C": `{"c":1}`} {
		if d := f.show("std", id); string(d.Body) != body || d.PayloadPruned {
			t.Errorf("%s lost its payload: %q pruned=%v", id, d.Body, d.PayloadPruned)
		}
	}
	if items := f.held("std"); len(items) != 1 {
		t.Errorf("held requests after pruning payloads: %d, want 1", len(items))
	}
	if res := f.replay(ReplaySelector{Source: "std", EventIDs: []string{"A", "B"}}, ReplayOptions{}); res.Replayed != 1 ||
		skips(res) != "[A:payload_pruned]" {
		t.Fatalf("replay after pruning: %+v (skips %s), want B replayed, A pruned", res, skips(res))
	}
	if r := f.record("std", "A", `{"a":1}`, "std/a"); r.Outcome != hookwarden.Duplicate {
		t.Fatalf("a copy of a folded event: %+v, want duplicate", r)
	}
	if jobs := f.lease("std/a", 5, time.Minute); len(jobs) != 0 {
		t.Fatalf("a copy of a folded event created jobs: %+v", jobs)
	}
	// A later pass counts the events it holds as they are now: B, replayed,
	// is pending, no longer dead.
	if again := f.prune(PruneOptions{Retention: ret}); again.PayloadsPruned != 0 || again.HeldDead != 0 ||
		again.HeldPending != 2 || again.HeldQuarantined != 1 {
		t.Errorf("second prune: %+v, want nothing folded, B and C pending, the request held", again)
	}
	if dry := f.prune(PruneOptions{Retention: ret, DryRun: true}); dry.HeldDead != 0 || dry.HeldPending != 2 || dry.HeldQuarantined != 1 {
		t.Errorf("dry run after it: %+v, want B and C pending, the request held", dry)
	}
}

// testRetentionClaims: a claim finished longer ago than retention.claims
// goes, with its body key: a later copy is a new event. Dead and pending
// events stay, and stats keep counting what went.
func testRetentionClaims(t *testing.T, h Harness) {
	f := setup(t, h)
	f.record("std", "A", `{"a":1}`, "std/a")
	f.record("std", "A", `{"a":1}`, "std/a") // a duplicate, counted
	f.finish("std/a", "A", hookwarden.Delivered)
	f.mustRecord(f.keyed("K", `{"k":1}`)) // no destination: finished at once
	f.record("std", "B", `{"b":1}`, "std/b")
	f.finish("std/b", "B", hookwarden.Dead)
	f.record("std", "C", `{"c":1}`, "std/c")
	f.clock.Add(100 * day)
	stats := f.statsText()

	res := f.prune(PruneOptions{Retention: Retention{Claims: 90 * day}, BatchSize: 1})
	if res.EventsDeleted != 2 || res.BodyKeysDeleted != 1 {
		t.Fatalf("prune: %+v, want A's and K's claims and K's body key deleted", res)
	}
	if got := f.statsText(); got != stats {
		t.Errorf("stats moved across the prune:\n%s\n%s", stats, got)
	}
	for _, k := range [][2]string{{"std", "A"}, {"gh", "K"}} {
		if _, err := f.s.ShowEvent(f.ctx, k[0], k[1]); !errors.Is(err, hookwarden.ErrNotFound) {
			t.Errorf("%s/%s after claims retention: %v, want ErrNotFound", k[0], k[1], err)
		}
	}
	for _, id := range []string{"B", "C"} {
		if d := f.show("std", id); d.Body == nil {
			t.Errorf("%s lost its payload", id)
		}
	}
	if r := f.record("std", "A", `{"a":1}`, "std/a"); r.Outcome != hookwarden.Accepted || r.Events[0].Jobs != 1 {
		t.Fatalf("a copy after its claim went: %+v, want accepted again", r)
	}
	if r := f.mustRecord(f.keyed("K2", `{"k":1}`)); r.Outcome != hookwarden.Accepted {
		t.Fatalf("K's body under a new id after its key went: %+v, want accepted", r)
	}
}

// testRetentionQuarantine: a held request goes once its last copy is older
// than retention.quarantine, a released one that long after its release;
// the released event stays, and stats keep counting.
func testRetentionQuarantine(t *testing.T, h Harness) {
	f := setup(t, h)
	old := f.record("std", "", `{"old":1}`)
	f.clock.Add(40 * day)
	recent := f.record("std", "", `{"new":1}`)
	ret := Retention{Quarantine: 30 * day}

	if res := f.prune(PruneOptions{Retention: ret}); res.QuarantineDeleted != 1 {
		t.Fatalf("prune: %+v, want the old request deleted", res)
	}
	if _, err := f.s.ShowQuarantined(f.ctx, old.ReceiptID); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("old held request: %v, want gone", err)
	}
	if _, err := f.s.ShowQuarantined(f.ctx, recent.ReceiptID); err != nil {
		t.Fatalf("recent held request: %v, want kept", err)
	}
	if _, err := f.s.ReleaseQuarantined(f.ctx, Release{ReceiptID: recent.ReceiptID, EventID: "r-1"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(31 * day)
	if res := f.prune(PruneOptions{Retention: ret}); res.QuarantineDeleted != 1 {
		t.Fatalf("prune after release: %+v, want the released request deleted", res)
	}
	if items := f.held("std"); len(items) != 0 {
		t.Fatalf("held after retention: %+v", items)
	}
	if d := f.show("std", "r-1"); string(d.Body) != `{"new":1}` {
		t.Fatalf("released event lost its body: %q", d.Body)
	}
	if s := f.stats([]string{"std"}, nil).Sources[0]; s.Quarantined != 2 {
		t.Errorf("stats %+v, want 2 quarantined still counted", s)
	}
}
