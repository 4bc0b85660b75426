package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// The operator's reads beyond storetest's ListEvents, Stats and
// Quarantine/*: an event's whole story, dead letters, the dashboard's
// windows, what several instances' clocks do to a time-bounded walk, and
// that a read never holds up a writer.

// recordAt records r received at at.
func (q *queue) recordAt(r *hookwarden.Receipt, at time.Time) hookwarden.RecordResult {
	q.t.Helper()
	r.ReceivedAt = at
	return q.record(r)
}

// attemptOf leases the job of dest (the next due) and finishes it with v.
func (q *queue) attemptOf(dest string, v hookwarden.Verdict) hookwarden.Job {
	q.t.Helper()
	jobs := q.lease(dest, 1, time.Minute)
	if len(jobs) != 1 {
		q.t.Fatalf("no due job of %s", dest)
	}
	q.finish(q.attempt(jobs[0], v))
	return jobs[0]
}

// audit links an audit entry to events, as the operator's writes do.
func (q *queue) audit(action string, events ...string) int64 {
	q.t.Helper()
	var id int64
	if err := q.s.Pool().QueryRow(q.ctx, `INSERT INTO audit (at, action, origin, actor, args, result)
		VALUES ($1, $2, 'cli', 'tester', '{"force":false}', '{"replayed":1}') RETURNING id`, q.clock.Now(), action).Scan(&id); err != nil {
		q.t.Fatal(err)
	}
	for _, ev := range events {
		if _, err := q.s.Pool().Exec(q.ctx, `INSERT INTO audit_events (source, event_id, audit_id) VALUES ('std', $1, $2)`, ev, id); err != nil {
			q.t.Fatal(err)
		}
	}
	return id
}

// TestShowEvent: one event with every receipt (a divergent copy with its
// own bytes and headers), its jobs with every attempt, and the operator
// actions that changed it.
func TestShowEvent(t *testing.T) {
	q := setupQueue(t)
	q.add("std", "e2", `{"n":2}`, "std/app")
	q.clock.Add(time.Second)
	q.recordAt(receipt("std", "e2", `{"n":2}`, "std/app"), q.clock.Now())
	q.recordAt(receipt("std", "e2", `{"n":2,"x":1}`, "std/app"), q.clock.Now())
	q.attemptOf("std/app", hookwarden.Retry)
	q.clock.Add(time.Second)
	q.attemptOf("std/app", hookwarden.Dead)
	audit := q.audit("replay", "e2")
	q.audit("replay", "other")

	d, err := q.s.ShowEvent(q.ctx, "std", "e2")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Body) != `{"n":2}` || d.ContentType != "application/json" || d.Status != hookwarden.StatusDead ||
		!d.ClaimedAt.Equal(t0) || d.BodySHA256 != fmt.Sprintf("%x", sha256.Sum256([]byte(`{"n":2}`))) {
		t.Errorf("event %+v, want the first copy's bytes, dead, claimed at %v", d.EventSummary, t0)
	}
	if d.Receipts != 3 || len(d.ReceiptLog) != 3 || !d.Divergent {
		t.Fatalf("receipts %d/%d divergent %v, want 3 and divergent", d.Receipts, len(d.ReceiptLog), d.Divergent)
	}
	if k := d.ReceiptLog[0]; k.Kind != "accepted" || k.BodySHA256 != d.BodySHA256 || !k.ReceivedAt.Equal(t0) {
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
	if a := j.Log[1]; a.Number != 2 || a.Verdict != "dead" || a.StatusCode != 422 {
		t.Errorf("attempt 2: %+v", a)
	}
	if len(d.Audit) != 1 || d.Audit[0].ID != audit || d.Audit[0].Action != "replay" || d.Audit[0].Actor != "tester" ||
		string(d.Audit[0].Args) != `{"force":false}` || string(d.Audit[0].Result) != `{"replayed":1}` || !d.Audit[0].At.Equal(q.clock.Now()) {
		t.Errorf("audit %+v, want the one replay of e2", d.Audit)
	}
	if got, err := q.s.EventAudit(q.ctx, "std", "e2"); err != nil || fmt.Sprint(got) != fmt.Sprint(d.Audit) {
		t.Errorf("EventAudit = %+v %v, want %+v", got, err, d.Audit)
	}
	if _, err := q.s.ShowEvent(q.ctx, "std", "nope"); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Errorf("missing event: %v, want ErrNotFound", err)
	}
	held := q.record(receipt("std", "", `{"no":"id"}`))
	for _, c := range []struct {
		source string
		id     int64
		want   bool
	}{{"std", held.ReceiptID, true}, {"gh", held.ReceiptID, false}, {"std", d.ReceiptLog[0].ID, false}} {
		if got, err := q.s.QuarantinedReceipt(q.ctx, c.source, c.id); err != nil || got != c.want {
			t.Errorf("QuarantinedReceipt(%s, %d) = %v %v, want %v", c.source, c.id, got, err, c.want)
		}
	}
}

// TestShowBatchEvent: an element of batches is shown with its own bytes,
// each batch that carried it as a receipt.
func TestShowBatchEvent(t *testing.T) {
	q := setupQueue(t)
	q.record(batch(element("a"), element("b")))
	q.record(batch(element("b"), element("c")))
	d, err := q.s.ShowEvent(q.ctx, "sg", "b")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Body) != element("b")[1] || d.ContentType != "application/json" || d.Receipts != 2 || len(d.ReceiptLog) != 2 ||
		!d.ReceiptLog[0].Batch || d.ReceiptLog[0].Kind != "accepted" || d.ReceiptLog[1].Kind != "duplicate" ||
		string(d.ReceiptLog[0].Body) != "[batch]" || d.Status != hookwarden.StatusPending || d.Jobs != 1 {
		t.Fatalf("batch element: %+v", d)
	}
}

// TestListDead: dead letters newest first, by source, destination and
// time, in pages.
func TestListDead(t *testing.T) {
	q := setupQueue(t)
	for _, id := range []string{"d1", "d2", "d3"} {
		q.add("std", id, `{}`, "std/app")
	}
	q.add("gh", "g1", `{}`, "gh/app")
	q.add("std", "ok", `{}`, "std/ops")
	for range 3 {
		q.attemptOf("std/app", hookwarden.Dead)
		q.clock.Add(time.Minute)
	}
	q.attemptOf("gh/app", hookwarden.Dead)
	q.attemptOf("std/ops", hookwarden.Delivered)
	list := func(f hookwarden.DeadFilter) (string, int64) {
		t.Helper()
		items, next, err := q.s.ListDead(q.ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range items {
			if d.Attempts != 1 || d.DeadCount != 1 || d.LastError != "unprocessable" || d.Type != "t.created" || !d.ClaimedAt.Equal(t0) {
				t.Errorf("dead letter %+v", d)
			}
			out = append(out, d.EventID)
		}
		return fmt.Sprint(out), next
	}
	for _, c := range []struct {
		name string
		f    hookwarden.DeadFilter
		want string
	}{
		{"all", hookwarden.DeadFilter{}, "[g1 d3 d2 d1]"},
		{"source", hookwarden.DeadFilter{Source: "std"}, "[d3 d2 d1]"},
		{"destination", hookwarden.DeadFilter{Destination: "gh/app"}, "[g1]"},
		{"since", hookwarden.DeadFilter{Since: t0.Add(90 * time.Second)}, "[g1 d3]"},
		{"none", hookwarden.DeadFilter{Destination: "std/ops"}, "[]"},
	} {
		if got, _ := list(c.f); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	got, next := list(hookwarden.DeadFilter{Limit: 3})
	rest, last := list(hookwarden.DeadFilter{Limit: 3, Cursor: next})
	if got != "[g1 d3 d2]" || rest != "[d1]" || last != 0 {
		t.Errorf("pages of 3: %s then %s (next %d), want [g1 d3 d2] then [d1]", got, rest, last)
	}
}

// TestRecentCountsAndLastAccepted: the dashboard's windows count new
// claims and repeats (batch elements included); the last accepted time is
// the last request that claimed something, a batch's new element included.
func TestRecentCountsAndLastAccepted(t *testing.T) {
	q := setupQueue(t)
	now := t0.Add(48 * time.Hour)
	stripe := func(id, body string) *hookwarden.Receipt { return receipt("stripe", id, body) }
	// Received in time order, as receivers stamp them.
	q.recordAt(stripe("evt_old", `{"n":0}`), now.Add(-48*time.Hour)) // outside both windows
	q.recordAt(stripe("evt_dup", `{}`), now.Add(-30*time.Hour))
	q.recordAt(stripe("evt_old", `{"n":0}`), now.Add(-3*time.Hour))     // a day-old duplicate of it
	q.recordAt(stripe("evt_day", `{"n":1}`), now.Add(-5*time.Hour))     // accepted in the day
	q.recordAt(stripe("evt_hour", `{"n":2}`), now.Add(-10*time.Minute)) // accepted in the hour
	q.recordAt(stripe("evt_hour", `{"n":3}`), now.Add(-5*time.Minute))  // divergent duplicate, in the hour
	q.recordAt(stripe("", `{}`), now.Add(-time.Minute))                 // quarantined: neither
	q.recordAt(receipt("github", "gh_1", `{}`), now.Add(-time.Minute))
	b := stripe("", `[{"id":"evt_b1"},{"id":"evt_day"}]`) // one new element, one repeat of evt_day
	b.QuarantineReason = ""
	for _, id := range []string{"evt_b1", "evt_day"} {
		el := []byte(`{"id":"` + id + `"}`)
		b.Events = append(b.Events, hookwarden.Event{ID: id, Body: el, BodySHA256: sha256.Sum256(el)})
	}
	q.recordAt(b, now.Add(-2*time.Minute))
	q.recordAt(stripe("evt_dup", `{}`), now.Add(-time.Minute)) // a late duplicate claims nothing

	got, err := q.s.RecentCounts(q.ctx, []string{"stripe", "github", "silent"}, now.Add(-time.Hour), now.Add(-24*time.Hour))
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
	last, err := q.s.LastAccepted(q.ctx, []string{"stripe", "github", "silent"})
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(-2 * time.Minute); !last["stripe"].Equal(want) || !last["github"].Equal(now.Add(-time.Minute)) {
		t.Errorf("last accepted %v, want stripe at %v (the batch's new element), github a minute ago", last, want)
	}
	if _, ok := last["silent"]; ok {
		t.Error("a source without events has a last accepted time")
	}
	// What retention folded is known from pruned_totals.
	if _, err := q.s.Pool().Exec(q.ctx, `INSERT INTO pruned_totals (name, kind, n, at) VALUES ('silent', 'last_accepted', 0, $1)`,
		t0); err != nil {
		t.Fatal(err)
	}
	if last, err := q.s.LastAccepted(q.ctx, []string{"silent"}); err != nil || !last["silent"].Equal(t0) {
		t.Errorf("last accepted of a pruned source: %v %v, want %v", last, err, t0)
	}
}

// TestWindowsAcrossInstanceClocks: claimed_at is the receipt's time on the
// instance that took it, ids the order of insert. An event inserted after
// another with an earlier time (a clock a little behind, a slow request)
// must not hide the events before it from a time-bounded listing or count.
func TestWindowsAcrossInstanceClocks(t *testing.T) {
	q := setupQueue(t)
	since := t0.Add(time.Hour)
	q.recordAt(receipt("std", "before", `{}`), since.Add(-10*time.Minute))
	q.recordAt(receipt("std", "in1", `{}`), since.Add(time.Second))
	q.recordAt(receipt("std", "behind", `{}`), since.Add(-time.Second)) // inserted later, stamped earlier
	q.recordAt(receipt("std", "in2", `{}`), since.Add(2*time.Second))
	items, _, err := q.s.ListEvents(q.ctx, hookwarden.EventFilter{Since: since})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, it.EventID)
	}
	if fmt.Sprint(ids) != "[in2 in1]" {
		t.Errorf("events since %v: %v, want [in2 in1]", since, ids)
	}
	got, err := q.s.RecentCounts(q.ctx, []string{"std"}, since, since)
	if err != nil {
		t.Fatal(err)
	}
	if got["std"][1].Accepted != 2 {
		t.Errorf("accepted since %v: %+v, want 2", since, got["std"])
	}
}

// TestListQuarantinePages: held requests newest first, by source, in
// pages; a missing one is ErrNotFound.
func TestListQuarantinePages(t *testing.T) {
	q := setupQueue(t)
	var ids []int64
	for i := range 3 {
		ids = append(ids, q.record(receipt("std", "", fmt.Sprintf(`{"held":%d}`, i))).ReceiptID)
	}
	q.record(receipt("gh", "", `{}`))
	items, next, err := q.s.ListQuarantine(q.ctx, hookwarden.QuarantineFilter{Source: "std", Limit: 2})
	if err != nil || len(items) != 2 || items[0].ReceiptID != ids[2] || items[1].ReceiptID != ids[1] || next != ids[1] {
		t.Fatalf("page 1: %+v next %d %v", items, next, err)
	}
	items, next, err = q.s.ListQuarantine(q.ctx, hookwarden.QuarantineFilter{Source: "std", Limit: 2, Cursor: next})
	if err != nil || len(items) != 1 || items[0].ReceiptID != ids[0] || next != 0 {
		t.Fatalf("page 2: %+v next %d %v", items, next, err)
	}
	if it := items[0]; !it.ReceivedAt.Equal(t0) || !it.LastAt.Equal(t0) || it.Detail != "no event id at json:id" || it.ReleasedAt != nil {
		t.Errorf("held %+v", it)
	}
	listed, _, err := q.s.ListEvents(q.ctx, hookwarden.EventFilter{Status: hookwarden.StatusQuarantined, Limit: 3})
	if err != nil || len(listed) != 3 || listed[0].Source != "gh" || listed[0].Receipt == 0 || listed[0].Count != 1 {
		t.Fatalf("events --status quarantined: %+v %v", listed, err)
	}
	if _, err := q.s.ShowQuarantined(q.ctx, ids[2]+100); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Errorf("show a missing held request: %v, want ErrNotFound", err)
	}
}

// TestReadsDoNotHoldWriters: while a read's snapshot is open, requests are
// recorded and jobs leased and finished: the operator's reads take no lock
// a writer waits for.
func TestReadsDoNotHoldWriters(t *testing.T) {
	q := setupQueue(t)
	q.add("std", "e1", `{}`, "std/app")
	q.attemptOf("std/app", hookwarden.Retry)
	err := q.s.snapshot(q.ctx, func(tx pgx.Tx) error {
		// What ShowEvent reads, in its snapshot.
		var d hookwarden.EventDetail
		if err := scanEvent(tx.QueryRow(q.ctx, "SELECT "+eventColumns+" FROM "+eventFrom+" WHERE e.event_id = 'e1'"), &d.EventSummary); err != nil {
			return err
		}
		if err := errors.Join(loadReceipts(q.ctx, tx, &d), loadJobs(q.ctx, tx, &d)); err != nil {
			return err
		}
		if len(d.JobLog) != 1 || len(d.JobLog[0].Log) != 1 {
			return fmt.Errorf("read %+v, want e1's job and its attempt", d.JobLog)
		}
		// The writes, each bounded by a deadline far above their cost: a
		// lock wait would run into it.
		ctx, cancel := context.WithTimeout(q.ctx, 30*time.Second)
		defer cancel()
		if _, err := q.s.Record(ctx, receipt("std", "e2", `{}`, "std/app")); err != nil {
			return fmt.Errorf("record during a read: %w", err)
		}
		jobs, err := q.s.Lease(ctx, "std/app", 10, time.Minute)
		if err != nil || len(jobs) != 2 {
			return fmt.Errorf("lease during a read: %d jobs, %v", len(jobs), err)
		}
		for _, j := range jobs {
			if err := q.s.Finish(ctx, q.attempt(j, hookwarden.Delivered)); err != nil {
				return fmt.Errorf("finish during a read: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := q.stats(); st != "p0 d2" {
		t.Fatalf("after the read: %s, want both delivered", st)
	}
}

// stats is std/app's pending and delivered counts.
func (q *queue) stats() string {
	q.t.Helper()
	st, err := q.s.Stats(q.ctx, nil, []string{"std/app"})
	if err != nil {
		q.t.Fatal(err)
	}
	d := st.Destinations[0]
	return fmt.Sprintf("p%d d%d", d.Pending, d.Delivered)
}
