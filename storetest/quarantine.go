package storetest

// Held requests: no event id, a signed body replayed under a fresh id, and
// what an operator does with them.

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testQuarantineNoID: a request without an event id is held, not claimed;
// copies of the same body only count on the first one.
func testQuarantineNoID(t *testing.T, h Harness) {
	f := setup(t, h)
	var first int64
	for i := range 5 {
		res := f.record("std", "", `{"no":"id"}`)
		if res.Outcome != hookwarden.Quarantined || res.QuarantineKind != hookwarden.QuarantineNoEventID || len(res.Events) != 0 {
			t.Fatalf("copy %d: %+v, want quarantined no_event_id", i, res)
		}
		if i == 0 {
			first = res.ReceiptID
		} else if res.ReceiptID != first {
			t.Fatalf("copy %d held as receipt %d, want the first copy's %d", i, res.ReceiptID, first)
		}
	}
	other := f.record("std", "", `{"no":"id","other":1}`)
	if other.Outcome != hookwarden.Quarantined || other.ReceiptID == first {
		t.Fatalf("another body: %+v, want held on its own", other)
	}
	items := f.held("std")
	if len(items) != 2 {
		t.Fatalf("held %d requests, want 2: %+v", len(items), items)
	}
	for _, it := range items {
		want := 0
		if it.ReceiptID == first {
			want = 4
		}
		if it.Repeats != want || it.Reason != hookwarden.QuarantineNoEventID || it.ReleasedAt != nil || it.Source != "std" {
			t.Errorf("held %+v, want %d repeats, no_event_id, not released", it, want)
		}
	}
	d, err := f.s.ShowQuarantined(f.ctx, first)
	if err != nil || string(d.Body) != `{"no":"id"}` || d.Header.Get("Content-Type") != "application/json" ||
		d.RemoteAddr != "127.0.0.1:5555" {
		t.Fatalf("show held: %+v %v, want its exact body and headers", d, err)
	}
	listed, _, err := f.s.ListEvents(f.ctx, EventFilter{Status: StatusQuarantined})
	if err != nil || len(listed) != 2 {
		t.Fatalf("events --status quarantined: %+v %v", listed, err)
	}
	if s := f.stats([]string{"std"}, nil).Sources[0]; s.Quarantined != 6 || s.Accepted != 0 {
		t.Errorf("stats %+v, want 6 quarantined (repeats counted), none accepted", s)
	}
	if _, ok, _ := f.s.NextDue(f.ctx, "std/app"); ok {
		t.Error("a held request created a job")
	}
}

// testBodyReplayed: when the signature does not cover the id, a body
// already claimed under another id is held (body_replayed), never
// accepted; the same id again is the provider's retry.
func testBodyReplayed(t *testing.T, h Harness) {
	f := setup(t, h)
	body := `{"zen":"Keep it logically awesome."}`
	if res := f.mustRecord(f.keyed("d-1", body, "gh/app")); res.Outcome != hookwarden.Accepted {
		t.Fatalf("first: %+v", res)
	}
	res := f.mustRecord(f.keyed("d-2", body, "gh/app"))
	if res.Outcome != hookwarden.Quarantined || res.QuarantineKind != hookwarden.QuarantineBodyReplayed || len(res.Events) != 0 {
		t.Fatalf("same body, fresh id: %+v, want quarantined body_replayed", res)
	}
	if r := f.mustRecord(f.keyed("d-1", body, "gh/app")); r.Outcome != hookwarden.Duplicate {
		t.Fatalf("same id, same body: %+v, want duplicate", r)
	}
	if r := f.mustRecord(f.keyed("d-3", body, "gh/app")); r.Outcome != hookwarden.Quarantined || r.ReceiptID != res.ReceiptID {
		t.Fatalf("third copy under another id: %+v, want a repeat of receipt %d", r, res.ReceiptID)
	}
	if _, err := f.s.ShowEvent(f.ctx, "gh", "d-2"); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("replayed id: %v, want not claimed", err)
	}
	items := f.held("gh")
	if len(items) != 1 {
		t.Fatalf("held: %+v, want 1", items)
	}
	if it := items[0]; it.Reason != hookwarden.QuarantineBodyReplayed || it.CandidateEventID != "d-2" ||
		it.OriginalEventID != "d-1" || it.Repeats != 1 || it.ReceiptID != res.ReceiptID {
		t.Errorf("held %+v, want body_replayed, candidate d-2, original d-1, 1 repeat", it)
	}
	// Without the check (the signature covers the id) it is a new event.
	if r := f.record("gh", "d-4", body, "gh/app"); r.Outcome != hookwarden.Accepted {
		t.Fatalf("no check: %+v, want accepted", r)
	}
	if jobs := f.lease("gh/app", 10, time.Minute); len(jobs) != 2 {
		t.Fatalf("leased %d jobs, want 2 (d-1, d-4)", len(jobs))
	}
}

// testConcurrentBodyReplays: 64 concurrent copies of one body under 64
// ids: exactly one is accepted, whatever the interleaving.
func testConcurrentBodyReplays(t *testing.T, h Harness) {
	f := setup(t, h)
	rs := make([]*hookwarden.Receipt, 64)
	for i := range rs {
		rs[i] = f.keyed(fmt.Sprint("d-", i), `{"action":"released"}`, "gh/app")
	}
	got := map[hookwarden.Outcome]int{}
	for _, res := range f.recordAll(rs) {
		got[res.Outcome]++
	}
	if got[hookwarden.Accepted] != 1 || got[hookwarden.Quarantined] != 63 {
		t.Fatalf("outcomes %v, want 1 accepted and 63 quarantined", got)
	}
	if jobs := f.lease("gh/app", 100, time.Minute); len(jobs) != 1 {
		t.Fatalf("leased %d jobs, want 1", len(jobs))
	}
	if items := f.held("gh"); len(items) != 1 || items[0].Repeats != 62 {
		t.Fatalf("held %+v, want one request with 62 repeats", items)
	}
}

// testRelease: an operator releases a held request under its candidate id
// or one given; an id claimed already is refused and the request stays
// held; a released request cannot be released twice.
func testRelease(t *testing.T, h Harness) {
	f := setup(t, h)
	body := `{"ping":true}`
	f.mustRecord(f.keyed("d-1", body, "gh/app"))
	replayed := f.mustRecord(f.keyed("d-2", body, "gh/app"))
	noID := f.record("gh", "", `{"no":"id"}`)

	_, err := f.s.ReleaseQuarantined(f.ctx, Release{ReceiptID: replayed.ReceiptID, EventID: "d-1", Destinations: []string{"gh/app"}})
	if !errors.Is(err, ErrAlreadyClaimed) {
		t.Fatalf("release under a claimed id: %v, want ErrAlreadyClaimed", err)
	}
	if d, err := f.s.ShowQuarantined(f.ctx, replayed.ReceiptID); err != nil || d.ReleasedAt != nil {
		t.Fatalf("after a refused release: %+v %v, want still held", d, err)
	}
	if jobs := f.lease("gh/app", 10, time.Minute); len(jobs) != 1 || jobs[0].EventID != "d-1" {
		t.Fatalf("a refused release created jobs: %+v", jobs)
	}

	// Without an event id: the candidate's, skipping the body check.
	rel, err := f.s.ReleaseQuarantined(f.ctx, Release{ReceiptID: replayed.ReceiptID, EventType: "ping",
		Destinations: []string{"gh/app"}, Audit: cliAudit()})
	if err != nil || rel.EventID != "d-2" || rel.Jobs != 1 || rel.Source != "gh" {
		t.Fatalf("release: %+v %v, want d-2 with 1 job", rel, err)
	}
	d := f.show("gh", "d-2")
	if string(d.Body) != body || d.Pending != 1 || d.Type != "ping" {
		t.Fatalf("released event: body %q pending %d type %q", d.Body, d.Pending, d.Type)
	}
	if jobs := f.lease("gh/app", 10, time.Minute); len(jobs) != 1 || jobs[0].EventID != "d-2" || string(jobs[0].Body) != body {
		t.Fatalf("released job: %+v", jobs)
	}
	audit, err := f.s.EventAudit(f.ctx, "gh", "d-2")
	if err != nil || len(audit) != 1 || audit[0].Action != "release" || audit[0].Actor != "storetest" ||
		audit[0].ReceiptID != replayed.ReceiptID {
		t.Fatalf("audit of the release: %+v %v", audit, err)
	}
	if h, err := f.s.ShowQuarantined(f.ctx, replayed.ReceiptID); err != nil || h.ReleasedAt == nil || h.ReleasedEventID != "d-2" {
		t.Fatalf("released request: %+v %v", h, err)
	}
	if _, err := f.s.ReleaseQuarantined(f.ctx, Release{ReceiptID: replayed.ReceiptID}); !errors.Is(err, ErrReleased) {
		t.Fatalf("second release: %v, want ErrReleased", err)
	}

	// No id in the request: one must be given.
	if _, err := f.s.ReleaseQuarantined(f.ctx, Release{ReceiptID: noID.ReceiptID}); err == nil {
		t.Fatal("release of a request without an id, none given: succeeded")
	}
	rel, err = f.s.ReleaseQuarantined(f.ctx, Release{ReceiptID: noID.ReceiptID, EventID: "manual-1", Destinations: []string{"gh/app"}})
	if err != nil || rel.EventID != "manual-1" || rel.Jobs != 1 {
		t.Fatalf("release with an id: %+v %v", rel, err)
	}
	if d := f.show("gh", "manual-1"); string(d.Body) != `{"no":"id"}` {
		t.Fatalf("released body %q", d.Body)
	}
	if items, _, _ := f.s.ListEvents(f.ctx, EventFilter{Status: StatusQuarantined}); len(items) != 0 {
		t.Fatalf("still listed as quarantined after release: %+v", items)
	}
	if _, err := f.s.ReleaseQuarantined(f.ctx, Release{ReceiptID: 1 << 40}); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("release of an unknown request: %v, want ErrNotFound", err)
	}
}

// testDrop: a dropped request is gone, but its copies stay counted in stats
// (as after retention); dropping it again is not found.
func testDrop(t *testing.T, h Harness) {
	f := setup(t, h)
	keep := f.record("std", "", `{"keep":1}`)
	drop := f.record("std", "", `{"drop":1}`)
	f.record("std", "", `{"drop":1}`) // a repeat: counted on the same row
	if s := f.stats([]string{"std"}, nil).Sources[0]; s.Quarantined != 3 {
		t.Fatalf("quarantined before drop: %d, want 3", s.Quarantined)
	}
	if err := f.s.DropQuarantined(f.ctx, drop.ReceiptID, cliAudit()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.ShowQuarantined(f.ctx, drop.ReceiptID); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("after drop: %v, want ErrNotFound", err)
	}
	if items := f.held("std"); len(items) != 1 || items[0].ReceiptID != keep.ReceiptID {
		t.Fatalf("held after drop: %+v, want only the other request", items)
	}
	if s := f.stats([]string{"std"}, nil).Sources[0]; s.Quarantined != 3 {
		t.Fatalf("quarantined after drop: %d, want 3 (stats count what was received)", s.Quarantined)
	}
	if err := f.s.DropQuarantined(f.ctx, drop.ReceiptID, nil); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("second drop: %v, want ErrNotFound", err)
	}
}
