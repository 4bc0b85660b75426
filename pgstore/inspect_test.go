package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// The operator's reads beyond storetest's ListEvents, Stats, Inspect/* and
// Quarantine/*: audit entries (their writes are the Operator's), what
// retention left, what several instances' clocks do to a time-bounded
// walk, and that a read never holds up a writer.

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

// TestEventAudit: the operator actions that changed an event are shown
// with it, oldest first, and only its own (storetest's Inspect/ShowEvent
// covers the rest of its story; the audit log's writes are the Operator's).
func TestEventAudit(t *testing.T) {
	q := setupQueue(t)
	q.add("std", "e2", `{"n":2}`, "std/app")
	first := q.audit("replay", "e2")
	q.audit("replay", "other")
	q.clock.Add(time.Second)
	second := q.audit("release", "e2", "other")
	d, err := q.s.ShowEvent(q.ctx, "std", "e2")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Audit) != 2 || d.Audit[0].ID != first || d.Audit[1].ID != second || d.Audit[0].Action != "replay" ||
		d.Audit[0].Actor != "tester" || d.Audit[0].Origin != "cli" || string(d.Audit[0].Args) != `{"force":false}` ||
		string(d.Audit[0].Result) != `{"replayed":1}` || !d.Audit[0].At.Equal(t0) || !d.Audit[1].At.Equal(t0.Add(time.Second)) {
		t.Errorf("audit %+v, want e2's two entries, oldest first", d.Audit)
	}
	if got, err := q.s.EventAudit(q.ctx, "std", "e2"); err != nil || fmt.Sprint(got) != fmt.Sprint(d.Audit) {
		t.Errorf("EventAudit = %+v %v, want %+v", got, err, d.Audit)
	}
	if got, err := q.s.EventAudit(q.ctx, "std", "none"); err != nil || len(got) != 0 {
		t.Errorf("EventAudit of an event without entries = %+v %v", got, err)
	}
}

// TestLastAcceptedAfterRetention: a source whose claims retention folded
// or deleted keeps its last accepted time (pruned_totals), the later of it
// and the receipts left (storetest's Inspect/RecentCounts covers the rest).
func TestLastAcceptedAfterRetention(t *testing.T) {
	q := setupQueue(t)
	q.recordAt(receipt("kept", "e1", `{}`), t0)
	if _, err := q.s.Pool().Exec(q.ctx, `INSERT INTO pruned_totals (name, kind, n, at)
		VALUES ('pruned', 'last_accepted', 0, $1), ('kept', 'last_accepted', 0, $2)`, t0, t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	last, err := q.s.LastAccepted(q.ctx, []string{"pruned", "kept", "silent"})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(map[string]time.Time{"kept": t0, "pruned": t0}); fmt.Sprint(last) != want {
		t.Errorf("last accepted %v, want %s", last, want)
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
