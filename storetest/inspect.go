package storetest

// The operator's reads beyond the listing and the counts: one event's whole
// story, dead letters, the dashboard's recent windows and the absence
// clock's seed, pages of held requests.

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testShowEvent: an event with every request that carried it (an
// identical copy without a body of its own, a divergent one with its own
// bytes and headers), its job with every attempt, on the store's clock; a
// missing event is ErrNotFound, and a held request's receipt id is told
// from an event's.
func testShowEvent(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.clock.Now()
	f.record("std", "e2", `{"n":2}`, "std/app")
	f.clock.Add(time.Second)
	f.record("std", "e2", `{"n":2}`, "std/app")
	f.record("std", "e2", `{"n":2,"x":1}`, "std/app")
	f.finish("std/app", "e2", hookwarden.Retry)
	f.clock.Add(time.Second)
	f.finish("std/app", "e2", hookwarden.Dead)

	d := f.show("std", "e2")
	if string(d.Body) != `{"n":2}` || d.ContentType != "application/json" || d.Status != StatusDead ||
		!d.ClaimedAt.Equal(t0) || d.BodySHA256 != fmt.Sprintf("%x", sha256.Sum256([]byte(`{"n":2}`))) {
		t.Errorf("event %+v, want the first copy's bytes, dead, claimed at %v", d.EventSummary, t0)
	}
	if d.Receipts != 3 || len(d.ReceiptLog) != 3 || !d.Divergent || d.Jobs != 1 || d.Dead != 1 {
		t.Fatalf("receipts %d/%d divergent %v jobs %d; want 3 receipts, divergent, 1 dead job",
			d.Receipts, len(d.ReceiptLog), d.Divergent, d.Jobs)
	}
	if k := d.ReceiptLog[0]; k.Kind != "accepted" || k.BodySHA256 != d.BodySHA256 || !k.ReceivedAt.Equal(t0) || k.Batch {
		t.Errorf("accepted receipt %+v, want the event's hash and time", k)
	}
	if k := d.ReceiptLog[1]; k.Kind != "duplicate" || k.Body != nil {
		t.Errorf("identical duplicate %+v, want no body of its own", k)
	}
	if k := d.ReceiptLog[2]; k.Kind != "divergent" || string(k.Body) != `{"n":2,"x":1}` || k.Header.Get("Webhook-Id") != "e2" ||
		k.RemoteAddr != "127.0.0.1:5555" || !k.ReceivedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("divergent receipt: %+v", k)
	}
	if len(d.JobLog) != 1 {
		t.Fatalf("jobs: %+v", d.JobLog)
	}
	j := d.JobLog[0]
	if j.State != "dead" || j.Attempts != 2 || j.DeadCount != 1 || j.LastError != "unprocessable" || j.Destination != "std/app" ||
		!j.CreatedAt.Equal(t0) || !j.FinishedAt.Equal(t0.Add(2*time.Second)) || !j.LeasedUntil.IsZero() || len(j.Log) != 2 {
		t.Fatalf("job %+v", j)
	}
	if a := j.Log[0]; a.Number != 1 || a.Verdict != "retry" || a.StatusCode != 503 || a.Error != "HTTP 503" || a.ExitCode != nil ||
		a.DurationMS != 1 || !a.StartedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("attempt 1: %+v", a)
	}
	if a := j.Log[1]; a.Number != 2 || a.Verdict != "dead" || a.StatusCode != 422 || !a.StartedAt.Equal(t0.Add(2*time.Second)) {
		t.Errorf("attempt 2: %+v", a)
	}
	if _, err := f.s.ShowEvent(f.ctx, "std", "nope"); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Errorf("missing event: %v, want ErrNotFound", err)
	}
	held := f.record("std", "", `{"no":"id"}`)
	for _, c := range []struct {
		source string
		id     int64
		want   bool
	}{{"std", held.ReceiptID, true}, {"gh", held.ReceiptID, false}, {"std", d.ReceiptLog[0].ID, false}} {
		if got, err := f.s.QuarantinedReceipt(f.ctx, c.source, c.id); err != nil || got != c.want {
			t.Errorf("QuarantinedReceipt(%s, %d) = %v %v, want %v", c.source, c.id, got, err, c.want)
		}
	}
}

// testShowBatchElement: an element of batches is shown with its own
// bytes as JSON, each batch that carried it as one of its receipts.
func testShowBatchElement(t *testing.T, h Harness) {
	f := setup(t, h)
	f.mustRecord(f.batch("sg", "sg/app", element("a"), element("b")))
	f.mustRecord(f.batch("sg", "sg/app", element("b"), element("c")))
	d := f.show("sg", "b")
	if string(d.Body) != element("b")[1] || d.ContentType != "application/json" || d.Receipts != 2 || len(d.ReceiptLog) != 2 ||
		d.Status != StatusPending || d.Jobs != 1 {
		t.Fatalf("batch element: %+v", d)
	}
	for i, kind := range []string{"accepted", "duplicate"} {
		if k := d.ReceiptLog[i]; !k.Batch || k.Kind != kind || string(k.Body) != "[batch]" {
			t.Errorf("receipt %d: %+v, want the batch, %s", i, k, kind)
		}
	}
}

// testListDead: dead letters newest first, by source, destination and the
// time they died, in pages.
func testListDead(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.clock.Now()
	for _, id := range []string{"d1", "d2", "d3"} {
		f.record("std", id, `{}`, "std/app")
	}
	f.record("gh", "g1", `{}`, "gh/app")
	f.record("std", "ok", `{}`, "std/ops")
	for _, id := range []string{"d1", "d2", "d3"} {
		f.finish("std/app", id, hookwarden.Dead)
		f.clock.Add(time.Minute)
	}
	f.finish("gh/app", "g1", hookwarden.Dead)
	f.finish("std/ops", "ok", hookwarden.Delivered)
	list := func(fl DeadFilter) (string, int64) {
		t.Helper()
		items, next, err := f.s.ListDead(f.ctx, fl)
		if err != nil {
			t.Fatalf("list dead %+v: %v", fl, err)
		}
		var out []string
		for _, d := range items {
			if d.DeadCount != 1 || d.LastError != "unprocessable" || d.Type != "t.created" || !d.ClaimedAt.Equal(t0) || d.DeadAt.IsZero() {
				t.Errorf("dead letter %+v", d)
			}
			out = append(out, d.EventID)
		}
		return fmt.Sprint(out), next
	}
	for _, c := range []struct {
		name string
		f    DeadFilter
		want string
	}{
		{"all", DeadFilter{}, "[g1 d3 d2 d1]"},
		{"source", DeadFilter{Source: "std"}, "[d3 d2 d1]"},
		{"destination", DeadFilter{Destination: "gh/app"}, "[g1]"},
		{"since", DeadFilter{Since: t0.Add(90 * time.Second)}, "[g1 d3]"},
		{"none", DeadFilter{Destination: "std/ops"}, "[]"},
	} {
		if got, _ := list(c.f); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	got, next := list(DeadFilter{Limit: 3})
	rest, last := list(DeadFilter{Limit: 3, Cursor: next})
	if got != "[g1 d3 d2]" || rest != "[d1]" || last != 0 {
		t.Errorf("pages of 3: %s then %s (next %d), want [g1 d3 d2] then [d1]", got, rest, last)
	}
}

// testRecentCountsOffTheHour: with bounds inside an hour and a minute, the
// windows count from the start of the bound's minute
// (hookwarden.WindowStart): a claim or a repeat earlier in the bound's hour
// is out, one in the bound's minute (before the bound or at it) is in, a
// second before that minute is out, whether it falls in the minutes of the
// first hour or in the whole hours after it.
func testRecentCountsOffTheHour(t *testing.T, h Harness) {
	f := setup(t, h)
	f.clock.Add(48*time.Hour + 37*time.Minute + 15*time.Second)
	now := f.clock.Now()
	hour, day := now.Add(-time.Hour), now.Add(-24*time.Hour)
	hourMinute, dayMinute := hour.Truncate(time.Minute), day.Truncate(time.Minute)
	at := func(when time.Time, r *hookwarden.Receipt) {
		t.Helper()
		r.ReceivedAt = when
		f.mustRecord(r)
	}
	// In time order, as receivers stamp them.
	at(day.Add(-10*time.Minute), f.receipt("stripe", "d_before", `{"n":0}`)) // the day's first hour, before it
	at(day.Add(-10*time.Minute), f.receipt("stripe", "d_before", `{"n":0}`)) // its duplicate, out too
	at(dayMinute.Add(-time.Second), f.receipt("github", "gh_0", `{}`))       // a second before the day's minute
	at(day.Add(-time.Second), f.receipt("github", "gh_0b", `{}`))            // in the day's minute, before the bound
	at(day, f.receipt("stripe", "d_at", `{"n":1}`))                          // at the bound: in
	at(day.Add(5*time.Minute), f.batch("stripe", "stripe/app", element("b1"), element("d_at")))
	at(day.Add(33*time.Minute), f.receipt("stripe", "d_before", `{"n":9}`)) // divergent, in the whole hours
	at(hour.Add(-time.Minute), f.receipt("stripe", "h_before", `{"n":2}`))  // the hour's first hour, before it
	at(hourMinute.Add(-time.Second), f.receipt("github", "gh_1", `{}`))     // out of the hour, in the day
	at(hour.Add(-time.Second), f.receipt("github", "gh_1b", `{}`))          // in the hour's minute
	at(hour, f.receipt("stripe", "h_at", `{"n":3}`))
	at(hour.Add(10*time.Minute), f.receipt("stripe", "h_before", `{"n":2}`)) // a duplicate in the first hour's part
	at(hour.Add(11*time.Minute), f.receipt("stripe", "", `{}`))              // held: neither
	at(now.Add(-30*time.Minute), f.receipt("github", "gh_2", `{}`))
	at(now.Add(-10*time.Minute), f.receipt("stripe", "h_new", `{"n":4}`))

	got, err := f.s.RecentCounts(f.ctx, []string{"stripe", "github", "silent"}, hour, day)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source string
		want   [2]hookwarden.WindowCounts
	}{
		{"stripe", [2]hookwarden.WindowCounts{{Accepted: 2, Duplicates: 1}, {Accepted: 5, Duplicates: 3}}},
		{"github", [2]hookwarden.WindowCounts{{Accepted: 2}, {Accepted: 4}}},
		{"silent", [2]hookwarden.WindowCounts{}},
	} {
		if got[c.source] != c.want {
			t.Errorf("%s: got %+v, want %+v", c.source, got[c.source], c.want)
		}
	}
}

// testRecentCounts: the dashboard's windows count new claims and repeats
// (batch elements included, held requests not); the last accepted time is
// the last request that claimed something, a batch's new element
// included, a late duplicate not.
func testRecentCounts(t *testing.T, h Harness) {
	f := setup(t, h)
	f.clock.Add(48 * time.Hour)
	now := f.clock.Now()
	at := func(d time.Duration, r *hookwarden.Receipt) {
		t.Helper()
		r.ReceivedAt = now.Add(-d)
		f.mustRecord(r)
	}
	// In time order, as receivers stamp them.
	at(48*time.Hour, f.receipt("stripe", "evt_old", `{"n":0}`)) // outside both windows
	at(30*time.Hour, f.receipt("stripe", "evt_dup", `{}`))
	at(5*time.Hour, f.receipt("stripe", "evt_day", `{"n":1}`))                  // accepted in the day
	at(3*time.Hour, f.receipt("stripe", "evt_old", `{"n":0}`))                  // a duplicate in the day
	at(10*time.Minute, f.receipt("stripe", "evt_hour", `{"n":2}`))              // accepted in the hour
	at(5*time.Minute, f.receipt("stripe", "evt_hour", `{"n":3}`))               // divergent duplicate, in the hour
	b := f.batch("stripe", "stripe/app", element("evt_b1"), element("evt_day")) // one new element, one repeat
	at(2*time.Minute, b)
	at(time.Minute, f.receipt("stripe", "", `{}`)) // held: neither
	at(time.Minute, f.receipt("stripe", "evt_dup", `{}`))
	at(time.Minute, f.receipt("github", "gh_1", `{}`))

	got, err := f.s.RecentCounts(f.ctx, []string{"stripe", "github", "silent"}, now.Add(-time.Hour), now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source string
		want   [2]hookwarden.WindowCounts
	}{
		{"stripe", [2]hookwarden.WindowCounts{{Accepted: 2, Duplicates: 3}, {Accepted: 3, Duplicates: 4}}},
		{"github", [2]hookwarden.WindowCounts{{Accepted: 1}, {Accepted: 1}}},
		{"silent", [2]hookwarden.WindowCounts{}},
	} {
		if got[c.source] != c.want {
			t.Errorf("%s: got %+v, want %+v", c.source, got[c.source], c.want)
		}
	}
	last, err := f.s.LastAccepted(f.ctx, []string{"stripe", "github", "silent"})
	if err != nil {
		t.Fatal(err)
	}
	if !last["stripe"].Equal(now.Add(-2*time.Minute)) || !last["github"].Equal(now.Add(-time.Minute)) {
		t.Errorf("last accepted %v, want stripe at %v (the batch's new element), github a minute ago", last, now.Add(-2*time.Minute))
	}
	if _, ok := last["silent"]; ok {
		t.Error("a source without events has a last accepted time")
	}
}

// testQuarantinePages: held requests newest first, by source, in pages,
// with their times and detail; a missing one is ErrNotFound.
func testQuarantinePages(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.clock.Now()
	var ids []int64
	for i := range 3 {
		ids = append(ids, f.record("std", "", fmt.Sprintf(`{"held":%d}`, i)).ReceiptID)
	}
	f.record("gh", "", `{}`)
	items, next, err := f.s.ListQuarantine(f.ctx, QuarantineFilter{Source: "std", Limit: 2})
	if err != nil || len(items) != 2 || items[0].ReceiptID != ids[2] || items[1].ReceiptID != ids[1] || next != ids[1] {
		t.Fatalf("page 1: %+v next %d %v", items, next, err)
	}
	items, next, err = f.s.ListQuarantine(f.ctx, QuarantineFilter{Source: "std", Limit: 2, Cursor: next})
	if err != nil || len(items) != 1 || items[0].ReceiptID != ids[0] || next != 0 {
		t.Fatalf("page 2: %+v next %d %v", items, next, err)
	}
	if it := items[0]; !it.ReceivedAt.Equal(t0) || !it.LastAt.Equal(t0) || it.Detail != "no event id at json:id" || it.ReleasedAt != nil {
		t.Errorf("held %+v", it)
	}
	listed, next, err := f.s.ListEvents(f.ctx, EventFilter{Status: StatusQuarantined, Limit: 3})
	if err != nil || len(listed) != 3 || listed[0].Source != "gh" || listed[0].Receipt == 0 || listed[0].Count != 1 || next == 0 {
		t.Fatalf("events --status quarantined: %+v next %d %v", listed, next, err)
	}
	if _, err := f.s.ShowQuarantined(f.ctx, ids[2]+100); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Errorf("show a missing held request: %v, want ErrNotFound", err)
	}
}
