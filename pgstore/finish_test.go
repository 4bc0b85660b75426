package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// TestFinishMany: one statement of many finishes does what each Finish
// alone does: delivered, retried and dead jobs, a stale attempt logged
// without touching its job, NULL and odd values kept, and the counters
// following the states.
func TestFinishMany(t *testing.T) {
	q := setupQueue(t)
	for i := range 7 {
		q.add("std", fmt.Sprint("e", i), `{}`, "std/app")
	}
	jobs := q.lease("std/app", 7, time.Minute)
	if len(jobs) != 7 {
		t.Fatalf("leased %d jobs, want 7", len(jobs))
	}
	stale := q.attempt(jobs[6], hookwarden.Delivered)
	stale.Number = jobs[6].Attempt - 1 // an attempt of an earlier lease
	retry := q.attempt(jobs[1], hookwarden.Retry)
	retry.RetryAt = q.clock.Now().Add(time.Hour)
	retry.Error = "HTTP 503: bad \x00 byte \xff"
	cmd := q.attempt(jobs[3], hookwarden.Delivered)
	cmd.StatusCode, cmd.ExitCode, cmd.Response = 0, 0, []byte("ok\n")
	batch := []hookwarden.Attempt{
		q.attempt(jobs[0], hookwarden.Delivered), retry, q.attempt(jobs[2], hookwarden.Dead), cmd,
		q.attempt(jobs[4], hookwarden.Delivered), q.attempt(jobs[5], hookwarden.Retry), stale,
	}
	calls := make([]*finishCall, len(batch))
	for i, a := range batch {
		calls[i] = &finishCall{a: a}
	}
	if err := q.s.finishMany(q.ctx, calls); err != nil {
		t.Fatal(err)
	}
	want := []string{"delivered 1 0 none", "pending 1 0 HTTP 503: bad  byte \uFFFD", "dead 1 1 unprocessable",
		"delivered 1 0 none", "delivered 1 0 none", "pending 1 0 HTTP 503", "pending 1 0 none"}
	for i, j := range jobs {
		row := q.job("std", j.EventID, "std/app")
		last := "none"
		if row.LastError != nil {
			last = *row.LastError
		}
		if got := fmt.Sprintf("%s %d %d %s", row.State, row.Attempts, row.DeadCount, last); got != want[i] {
			t.Errorf("job %d: %s, want %s", i, got, want[i])
		}
		if i != 6 && row.LeasedUntil != nil {
			t.Errorf("job %d still leased: %s", i, row)
		}
	}
	if row := q.job("std", jobs[6].EventID, "std/app"); row.LeasedUntil == nil {
		t.Errorf("the stale attempt ended the current lease: %s", row)
	}
	if row := q.job("std", jobs[1].EventID, "std/app"); !row.NextAt.Equal(retry.RetryAt) {
		t.Errorf("retried job due %v, want %v", row.NextAt, retry.RetryAt)
	}
	if got := q.attemptLog(jobs[6].ID); len(got) != 1 || got[0] != "0:delivered:200" {
		t.Errorf("stale attempt log %v, want [0:delivered:200]", got)
	}
	var exit *int
	var resp []byte
	var status *int
	if err := q.s.Pool().QueryRow(q.ctx, `SELECT status_code, exit_code, response FROM attempts WHERE job_id = $1`,
		jobs[3].ID).Scan(&status, &exit, &resp); err != nil {
		t.Fatal(err)
	}
	if status != nil || exit == nil || *exit != 0 || string(resp) != "ok\n" {
		t.Errorf("command attempt: status %v exit %v response %q, want NULL, 0, \"ok\\n\"", status, exit, resp)
	}
	var n int
	if err := q.s.Pool().QueryRow(q.ctx, `SELECT count(*) FROM attempts WHERE response IS NULL`).Scan(&n); err != nil || n != 6 {
		t.Errorf("%d attempts without a response (%v), want 6", n, err)
	}
	st, err := q.s.counterStats(q.ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := fullCount(t, q.s, q.clock.Now())
	if got, want := countsText(st, nil), countsText(full, nil); got != want {
		t.Errorf("counters\n%s\nwant the full count\n%s", got, want)
	}
}

// TestFinishOneRoundTrip: a Finish that changes no flow state costs one
// round trip (BEGIN, two writes and COMMIT before), and Finishes under way
// at once share statements: never more round trips than Finishes.
func TestFinishOneRoundTrip(t *testing.T) {
	t.Parallel()
	trace := &roundTrips{}
	c := &clock{t: t0}
	s := open(t, pgtest.Database(t), Options{Now: c.Now, tracer: trace})
	q := &queue{fixture: &fixture{t: t, s: s}, clock: c, ctx: context.Background()}
	const n = 40
	for i := range n {
		q.add("std", fmt.Sprint("e", i), `{}`, "std/app")
	}
	jobs := q.lease("std/app", n, time.Minute)
	if len(jobs) != n {
		t.Fatalf("leased %d jobs, want %d", len(jobs), n)
	}
	trace.n.Store(0)
	q.finish(q.attempt(jobs[0], hookwarden.Delivered))
	if got := trace.n.Load(); got != 1 {
		t.Errorf("one Finish: %d round trips, want 1", got)
	}
	trace.n.Store(0)
	var wg sync.WaitGroup
	for _, j := range jobs[1:] {
		wg.Go(func() {
			v := hookwarden.Delivered
			if j.ID%3 == 0 {
				v = hookwarden.Retry
			}
			if err := s.Finish(q.ctx, q.attempt(j, v)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := trace.n.Load(); got > n-1 {
		t.Errorf("%d Finishes at once: %d round trips, want at most %d", n-1, got, n-1)
	}
	t.Logf("%d Finishes at once: %d round trips", n-1, trace.n.Load())
	var attempts, leased int
	if err := s.Pool().QueryRow(q.ctx, `SELECT (SELECT count(*) FROM attempts), (SELECT count(*) FROM jobs WHERE leased_until IS NOT NULL)`).
		Scan(&attempts, &leased); err != nil || attempts != n || leased != 0 {
		t.Errorf("%d attempts, %d jobs leased (%v); want %d and 0", attempts, leased, err, n)
	}
}

// TestFinishAndLeaseSwap: a chained FinishAndLease of one job skips the
// count of leases in flight only when the lease it ends was live, so
// counted by every other lease: one whose lease had expired must count,
// and takes nothing while another instance's lease fills the concurrency.
func TestFinishAndLeaseSwap(t *testing.T) {
	q := setupQueue(t)
	if err := q.s.SetFlow(q.ctx, []hookwarden.FlowPolicy{{Destination: "std/app", Concurrency: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"A", "B", "C", "D"} {
		q.add("std", id, `{}`, "std/app")
	}
	inflight := func() int {
		t.Helper()
		var n int
		if err := q.s.Pool().QueryRow(q.ctx, `SELECT count(*) FROM jobs WHERE state = 'pending' AND leased_until > $1`,
			q.clock.Now()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := q.lease("std/app", 1, time.Minute)
	if len(a) != 1 || a[0].EventID != "A" {
		t.Fatalf("leased %+v, want A", a)
	}
	// A live lease ended, one taken: B.
	next, err := q.s.FinishAndLease(q.ctx, q.attempt(a[0], hookwarden.Delivered), "std/app", 1, time.Second)
	if err != nil || len(next) != 1 || next[0].EventID != "B" {
		t.Fatalf("FinishAndLease of A: %+v %v, want B", next, err)
	}
	if n := inflight(); n != 1 {
		t.Fatalf("%d in flight after the swap, want 1", n)
	}
	// B's lease expires; another instance leases C (the concurrency is
	// full again without B); B's late finish must not take D.
	q.clock.Add(2 * time.Second)
	if _, err := q.s.Pool().Exec(q.ctx, `UPDATE jobs SET attempts = attempts + 1, leased_until = $1
		WHERE id = (SELECT j.id FROM jobs j JOIN events e ON e.id = j.event_ref WHERE e.event_id = 'C')`,
		q.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	more, err := q.s.FinishAndLease(q.ctx, q.attempt(next[0], hookwarden.Delivered), "std/app", 1, time.Minute)
	if err != nil || len(more) != 0 {
		t.Fatalf("FinishAndLease of B after its lease: %+v %v, want nothing (C fills the concurrency)", more, err)
	}
	if n := inflight(); n != 1 {
		t.Errorf("%d in flight, want 1", n)
	}
	if row := q.job("std", "B", "std/app"); row.State != "delivered" {
		t.Errorf("B: %s, want delivered", row)
	}
}

// TestFinishWaiterGivesUp: a Finish waiting for a writer whose caller gives
// up leaves with its context's error and nothing of it written; the
// writers' Finishes are not disturbed.
func TestFinishWaiterGivesUp(t *testing.T) {
	q := setupQueue(t)
	for _, id := range []string{"X", "Y", "Z"} {
		q.add("std", id, `{}`, "std/app")
	}
	jobs := q.lease("std/app", 3, time.Minute)
	if len(jobs) != 3 {
		t.Fatalf("leased %d jobs, want 3", len(jobs))
	}
	// Hold X and Y: both writers wait on their rows.
	tx, err := q.s.Pool().Begin(q.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(q.ctx)
	if _, err := tx.Exec(q.ctx, `SELECT 1 FROM jobs WHERE id = ANY($1) FOR UPDATE`, []int64{jobs[0].ID, jobs[1].ID}); err != nil {
		t.Fatal(err)
	}
	g := &q.s.finishes
	state := func() (writers, waiting int) {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.writers, len(g.waiting)
	}
	var wg sync.WaitGroup
	for _, j := range jobs[:2] {
		wg.Go(func() {
			if err := q.s.Finish(q.ctx, q.attempt(j, hookwarden.Delivered)); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("two writers", func() bool { w, _ := state(); return w == 2 })
	ctx, cancel := context.WithCancel(q.ctx)
	done := make(chan error, 1)
	go func() { done <- q.s.Finish(ctx, q.attempt(jobs[2], hookwarden.Delivered)) }()
	waitFor("a waiting Finish", func() bool { _, n := state(); return n == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the waiter that gave up: %v, want context.Canceled", err)
	}
	if got := q.attemptLog(jobs[2].ID); len(got) != 0 {
		t.Errorf("Z's attempts %v, want none written", got)
	}
	if err := tx.Rollback(q.ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, j := range jobs {
		want := "delivered"
		if i == 2 {
			want = "pending"
		}
		if row := q.job("std", j.EventID, "std/app"); row.State != want {
			t.Errorf("%s: %s, want %s", j.EventID, row, want)
		}
	}
	if w, n := state(); w != 0 || n != 0 {
		t.Errorf("%d writers, %d waiting after all, want none", w, n)
	}
}
