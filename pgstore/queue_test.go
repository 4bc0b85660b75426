package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// The queue's tests mirror storetest's (storetest/queue.go, and the outbox
// half of its stats test) on a real cluster, with a clock moved by hand,
// plus what only several instances can break: concurrent leases.

// clock is a test clock moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// queue is one test's store, clock and helpers.
type queue struct {
	*fixture
	clock *clock
	ctx   context.Context
}

func setupQueue(t *testing.T) *queue { return newQueue(t, nil) }

// tracedQueue is setupQueue's store with every statement it runs logged.
func tracedQueue(t *testing.T) (*queue, *statementLog) {
	trace := &statementLog{}
	return newQueue(t, trace), trace
}

func newQueue(t *testing.T, tracer pgx.QueryTracer) *queue {
	t.Parallel()
	c := &clock{t: t0}
	s := open(t, pgtest.Database(t), Options{Now: c.Now, tracer: tracer})
	return &queue{fixture: &fixture{t: t, s: s}, clock: c, ctx: context.Background()}
}

// add records event id of source with body, received now, for dests.
func (q *queue) add(source, id, body string, dests ...string) {
	q.t.Helper()
	r := receipt(source, id, body, dests...)
	r.ReceivedAt = q.clock.Now()
	if res := q.record(r); res.Outcome != hookwarden.Accepted {
		q.t.Fatalf("record %s/%s: %+v, want accepted", source, id, res)
	}
}

func (q *queue) lease(dest string, max int, leaseFor time.Duration) []hookwarden.Job {
	q.t.Helper()
	jobs, err := q.s.Lease(q.ctx, dest, max, leaseFor)
	if err != nil {
		q.t.Fatalf("lease %s: %v", dest, err)
	}
	return jobs
}

// attempt is the record of an attempt of j with verdict v, now.
func (q *queue) attempt(j hookwarden.Job, v hookwarden.Verdict) hookwarden.Attempt {
	a := hookwarden.Attempt{JobID: j.ID, Number: j.Attempt, StartedAt: q.clock.Now(), Duration: time.Millisecond,
		ExitCode: -1, Verdict: v}
	switch v {
	case hookwarden.Delivered:
		a.StatusCode = 200
	case hookwarden.Dead:
		a.StatusCode, a.Error = 422, "unprocessable"
	case hookwarden.Retry:
		a.StatusCode, a.Error, a.RetryAt = 503, "HTTP 503", q.clock.Now()
	}
	return a
}

func (q *queue) finish(a hookwarden.Attempt) {
	q.t.Helper()
	if err := q.s.Finish(q.ctx, a); err != nil {
		q.t.Fatalf("finish job %d: %v", a.JobID, err)
	}
}

// jobRow is a job as stored.
type jobRow struct {
	ID                  int64
	State               string
	Attempts, DeadCount int
	NextAt              time.Time
	LeasedUntil         *time.Time
	LastError           *string
}

func (j jobRow) String() string {
	lease, last := "none", "none"
	if j.LeasedUntil != nil {
		lease = j.LeasedUntil.UTC().String()
	}
	if j.LastError != nil {
		last = *j.LastError
	}
	return fmt.Sprintf("job %d %s attempts %d dead %d next %v leased %s error %s",
		j.ID, j.State, j.Attempts, j.DeadCount, j.NextAt.UTC(), lease, last)
}

func (q *queue) job(source, id, dest string) jobRow {
	q.t.Helper()
	var j jobRow
	err := q.s.Pool().QueryRow(q.ctx, `SELECT j.id, j.state, j.attempts, j.dead_count, j.next_at, j.leased_until, j.last_error
		FROM jobs j JOIN events e ON e.id = j.event_ref WHERE e.source = $1 AND e.event_id = $2 AND j.destination = $3`,
		source, id, dest).Scan(&j.ID, &j.State, &j.Attempts, &j.DeadCount, &j.NextAt, &j.LeasedUntil, &j.LastError)
	if err != nil {
		q.t.Fatalf("job of %s/%s for %s: %v", source, id, dest, err)
	}
	return j
}

// attemptLog is a job's attempts as "number:verdict:status", in order.
func (q *queue) attemptLog(jobID int64) []string {
	q.t.Helper()
	rows, err := q.s.Pool().Query(q.ctx, `SELECT number, verdict, COALESCE(status_code, 0) FROM attempts WHERE job_id = $1 ORDER BY id`, jobID)
	if err != nil {
		q.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n, status int
		var v string
		if err := rows.Scan(&n, &v, &status); err != nil {
			q.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d:%s:%d", n, v, status))
	}
	if err := rows.Err(); err != nil {
		q.t.Fatal(err)
	}
	return out
}

func (q *queue) nextDue(dest string) (time.Time, bool) {
	q.t.Helper()
	t, ok, err := q.s.NextDue(q.ctx, dest)
	if err != nil {
		q.t.Fatalf("next due of %s: %v", dest, err)
	}
	return t, ok
}

// TestQueueLeaseMax: a lease takes at most max due jobs, each once, with
// what a delivery needs; leased jobs are not due until their lease ends.
func TestQueueLeaseMax(t *testing.T) {
	q := setupQueue(t)
	if _, ok := q.nextDue("std/app"); ok {
		t.Fatal("NextDue of an empty outbox found a job")
	}
	for i := range 5 {
		q.add("std", fmt.Sprint("e", i), fmt.Sprintf(`{"n":%d}`, i), "std/app")
		q.clock.Add(time.Microsecond) // a due order to check
	}
	q.add("std", "x", `{}`, "std/other")
	now := q.clock.Now()
	if due, ok := q.nextDue("std/app"); !ok || due.After(now) {
		t.Fatalf("NextDue = %v %v, want due by %v", due, ok, now)
	}
	if jobs := q.lease("std/app", 0, time.Minute); len(jobs) != 0 {
		t.Fatalf("max 0 leased %d jobs", len(jobs))
	}
	seen := map[int64]bool{}
	var order []string
	for _, want := range []int{3, 2, 0} {
		jobs := q.lease("std/app", 3, time.Minute)
		if len(jobs) != want {
			t.Fatalf("lease of up to 3: %d jobs, want %d", len(jobs), want)
		}
		for _, j := range jobs {
			if seen[j.ID] {
				t.Fatalf("job %d leased twice", j.ID)
			}
			seen[j.ID] = true
			order = append(order, j.EventID)
			received := t0.Add(time.Duration(j.EventID[1]-'0') * time.Microsecond)
			if j.Attempt != 1 || j.DeadCount != 0 || j.Destination != "std/app" || j.Source != "std" || j.EventType != "t.created" ||
				j.ContentType != "application/json" || string(j.Body) != fmt.Sprintf(`{"n":%s}`, j.EventID[1:]) ||
				!j.ReceivedAt.Equal(received) || j.IdempotencyKey() != "std:"+j.EventID {
				t.Errorf("leased job %+v lacks what a delivery needs", j)
			}
		}
	}
	if fmt.Sprint(order) != "[e0 e1 e2 e3 e4]" {
		t.Errorf("leased in order %v, want oldest due first", order)
	}
	// The lease wrote only attempts and leased_until: next_at is the
	// job's due time still, and the lease's end is the store's clock's.
	j := q.job("std", "e0", "std/app")
	if !j.NextAt.Equal(t0) || j.LeasedUntil == nil || !j.LeasedUntil.Equal(now.Add(time.Minute)) || j.Attempts != 1 {
		t.Errorf("leased job stored as %+v, want next_at %v kept, leased until %v", j, t0, now.Add(time.Minute))
	}
	// Every job is in flight: nothing is due before the leases end.
	if due, ok := q.nextDue("std/app"); !ok || !due.Equal(now.Add(time.Minute)) {
		t.Fatalf("NextDue with every job leased = %v %v, want the first lease's end %v", due, ok, now.Add(time.Minute))
	}
	if jobs := q.lease("std/other", 10, time.Minute); len(jobs) != 1 || jobs[0].EventID != "x" {
		t.Fatalf("other destination: %+v, want its own job", jobs)
	}
}

// TestQueueBatchElement: a batch element's job carries the element's own
// bytes as JSON, not the request's.
func TestQueueBatchElement(t *testing.T) {
	q := setupQueue(t)
	q.record(batch(element("a"), element("b")))
	jobs := q.lease("sg/app", 10, time.Minute)
	if len(jobs) != 2 {
		t.Fatalf("leased %d jobs, want 2", len(jobs))
	}
	for _, j := range jobs {
		if string(j.Body) != element(j.EventID)[1] || j.ContentType != "application/json" || j.EventType != "delivered" ||
			!j.ReceivedAt.Equal(t0) {
			t.Errorf("batch element's job %+v, want its own bytes", j)
		}
	}
}

// TestQueueLeaseExpiry: a job whose lease expired is due again, the same
// job with the next attempt; the late finish of the old attempt is logged
// but does not change it; a retry is due at its time.
func TestQueueLeaseExpiry(t *testing.T) {
	q := setupQueue(t)
	q.add("std", "msg_1", `{"a":1}`, "std/app")
	first := q.lease("std/app", 5, time.Minute)
	if len(first) != 1 {
		t.Fatalf("leased %d jobs, want 1", len(first))
	}
	q.clock.Add(59 * time.Second)
	if jobs := q.lease("std/app", 5, time.Minute); len(jobs) != 0 {
		t.Fatalf("leased %d jobs before the lease expired", len(jobs))
	}
	q.clock.Add(2 * time.Second) // the worker died
	again := q.lease("std/app", 5, time.Minute)
	if len(again) != 1 || again[0].ID != first[0].ID || again[0].Attempt != 2 || again[0].IdempotencyKey() != first[0].IdempotencyKey() {
		t.Fatalf("after the lease expired: %+v, want the same job, attempt 2", again)
	}
	before := q.job("std", "msg_1", "std/app")
	// The first attempt reports late, dead and then delivered: ignored.
	for _, v := range []hookwarden.Verdict{hookwarden.Dead, hookwarden.Delivered, hookwarden.Retry} {
		if err := q.s.Finish(q.ctx, q.attempt(first[0], v)); err != nil {
			t.Fatalf("stale finish (%s): %v", v, err)
		}
	}
	if j := q.job("std", "msg_1", "std/app"); j.String() != before.String() {
		t.Fatalf("a stale finish changed the job: %s, was %s", j, before)
	}
	if n := q.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`); n != 0 {
		t.Fatalf("a stale finish dead-lettered %d jobs", n)
	}
	retry := q.attempt(again[0], hookwarden.Retry)
	retry.RetryAt = q.clock.Now().Add(30 * time.Second)
	q.finish(retry)
	if j := q.job("std", "msg_1", "std/app"); j.LeasedUntil != nil || j.LastError == nil || *j.LastError != "HTTP 503" {
		t.Fatalf("after a retry: %+v, want no lease and the error kept", j)
	}
	if jobs := q.lease("std/app", 5, time.Minute); len(jobs) != 0 {
		t.Fatalf("leased %d jobs before the retry is due", len(jobs))
	}
	if due, ok := q.nextDue("std/app"); !ok || !due.Equal(retry.RetryAt) {
		t.Fatalf("NextDue = %v %v, want the retry at %v", due, ok, retry.RetryAt)
	}
	q.clock.Add(30 * time.Second)
	third := q.lease("std/app", 5, time.Minute)
	if len(third) != 1 || third[0].Attempt != 3 {
		t.Fatalf("retry: %+v, want attempt 3", third)
	}
	q.finish(q.attempt(third[0], hookwarden.Delivered))
	j := q.job("std", "msg_1", "std/app")
	if j.State != "delivered" || j.LeasedUntil != nil || j.LastError != nil || j.Attempts != 3 {
		t.Fatalf("after delivery: %+v", j)
	}
	want := "[1:dead:422 1:delivered:200 1:retry:503 2:retry:503 3:delivered:200]"
	if got := fmt.Sprint(q.attemptLog(j.ID)); got != want {
		t.Errorf("attempt log %s, want %s (the stale ones kept)", got, want)
	}
	if n := q.count(`SELECT count(*) FROM jobs WHERE finished_at = $1`, q.clock.Now()); n != 1 {
		t.Error("delivered job not finished at the store's clock")
	}
	if _, ok := q.nextDue("std/app"); ok {
		t.Error("something is due after delivery")
	}
	// A finish after the job was finished changes nothing either.
	q.finish(q.attempt(third[0], hookwarden.Dead))
	if j := q.job("std", "msg_1", "std/app"); j.State != "delivered" || j.DeadCount != 0 {
		t.Fatalf("a finish of a delivered job changed it: %+v", j)
	}
}

// TestQueueFinishAndLease: the attempt is recorded and the next due job
// leased in one call; with nothing due, or max 0, the finish still
// happens; when the finish fails, nothing is leased.
func TestQueueFinishAndLease(t *testing.T) {
	q := setupQueue(t)
	for i := range 2 {
		q.add("stripe", fmt.Sprint("evt_", i), fmt.Sprintf(`{"n":%d}`, i), "stripe/app")
	}
	jobs := q.lease("stripe/app", 1, time.Minute)
	if len(jobs) != 1 {
		t.Fatalf("leased %d jobs, want 1", len(jobs))
	}
	next, err := q.s.FinishAndLease(q.ctx, q.attempt(jobs[0], hookwarden.Delivered), "stripe/app", 1, time.Minute)
	if err != nil || len(next) != 1 || next[0].ID == jobs[0].ID || next[0].Attempt != 1 || next[0].Destination != "stripe/app" ||
		string(next[0].Body) != fmt.Sprintf(`{"n":%s}`, next[0].EventID[4:]) || next[0].ContentType != "application/json" {
		t.Fatalf("FinishAndLease: %+v %v, want the other job", next, err)
	}
	if j := q.job("stripe", jobs[0].EventID, "stripe/app"); j.State != "delivered" {
		t.Fatalf("the finished job is %s", j.State)
	}
	if more := q.lease("stripe/app", 5, time.Minute); len(more) != 0 {
		t.Fatalf("the job FinishAndLease leased was leased again: %+v", more)
	}
	more, err := q.s.FinishAndLease(q.ctx, q.attempt(next[0], hookwarden.Dead), "stripe/app", 1, time.Minute)
	if err != nil || len(more) != 0 {
		t.Fatalf("FinishAndLease with nothing due: %+v %v", more, err)
	}
	if j := q.job("stripe", next[0].EventID, "stripe/app"); j.State != "dead" || j.DeadCount != 1 || *j.LastError != "unprocessable" {
		t.Fatalf("finish with nothing due: %+v, want dead", j)
	}
	q.add("stripe", "evt_2", `{}`, "stripe/app")
	q.add("stripe", "evt_3", `{}`, "stripe/app")
	j := q.lease("stripe/app", 1, time.Minute)
	if more, err := q.s.FinishAndLease(q.ctx, q.attempt(j[0], hookwarden.Delivered), "stripe/app", 0, time.Minute); err != nil || len(more) != 0 {
		t.Fatalf("FinishAndLease max 0: %+v %v", more, err)
	}
	if q.job("stripe", j[0].EventID, "stripe/app").State != "delivered" {
		t.Fatal("FinishAndLease max 0 did not finish")
	}
	// An attempt the store refuses (no such job): neither happens.
	bad := q.attempt(hookwarden.Job{ID: 1 << 40, Attempt: 1}, hookwarden.Delivered)
	if more, err := q.s.FinishAndLease(q.ctx, bad, "stripe/app", 5, time.Minute); !errors.Is(err, hookwarden.ErrUnavailable) || more != nil {
		t.Fatalf("FinishAndLease of an unknown job: %+v %v, want ErrUnavailable and no lease", more, err)
	}
	if left := q.lease("stripe/app", 5, time.Minute); len(left) != 1 || left[0].Attempt != 1 {
		t.Fatalf("after the failed FinishAndLease: %+v, want the one due job at attempt 1", left)
	}
	if err := q.s.Finish(q.ctx, hookwarden.Attempt{JobID: j[0].ID, Number: 1, Verdict: "maybe"}); err == nil {
		t.Fatal("a finish with an unknown verdict was accepted")
	}
}

// TestQueueUnlease: a lease given back is due now, its attempt uncounted;
// an Unlease of another attempt, or of a finished job, changes nothing.
func TestQueueUnlease(t *testing.T) {
	q := setupQueue(t)
	q.add("std", "a", `{"id":"a"}`, "std/app")
	q.clock.Add(time.Microsecond)
	q.add("std", "b", `{"id":"b"}`, "std/app")
	jobs := q.lease("std/app", 2, time.Hour)
	if len(jobs) != 2 || jobs[0].EventID != "a" || jobs[1].EventID != "b" {
		t.Fatalf("leased %+v, want a and b", jobs)
	}
	a, b := jobs[0], jobs[1]
	stale := a
	stale.Attempt = 2 // as if leased again since
	if err := q.s.Unlease(q.ctx, stale); err != nil {
		t.Fatal(err)
	}
	if again := q.lease("std/app", 2, time.Hour); len(again) != 0 {
		t.Fatalf("a stale Unlease gave the lease back: %+v", again)
	}
	q.clock.Add(time.Minute)
	if err := q.s.Unlease(q.ctx, a); err != nil {
		t.Fatal(err)
	}
	if due, ok := q.nextDue("std/app"); !ok || due.After(q.clock.Now()) {
		t.Fatalf("NextDue after Unlease = %v %v, want due now", due, ok)
	}
	if j := q.job("std", "a", "std/app"); j.Attempts != 0 || j.LeasedUntil != nil {
		t.Fatalf("given back: %+v, want the attempt uncounted and no lease", j)
	}
	again := q.lease("std/app", 2, time.Hour)
	if len(again) != 1 || again[0].ID != a.ID || again[0].Attempt != a.Attempt {
		t.Fatalf("after Unlease: %+v, want job %d again at attempt %d (the given-back one uncounted)", again, a.ID, a.Attempt)
	}
	q.finish(q.attempt(b, hookwarden.Delivered))
	if err := q.s.Unlease(q.ctx, b); err != nil {
		t.Fatal(err)
	}
	if j := q.job("std", "b", "std/app"); j.State != "delivered" || j.Attempts != 1 {
		t.Fatalf("Unlease of a delivered job changed it: %+v", j)
	}
}

// TestQueueReleaseLeases: every lease taken outside a run (nobody's) is
// given back: its jobs are due at once, the same jobs with the next
// attempt. Leases of runs: holder_test.go.
func TestQueueReleaseLeases(t *testing.T) {
	q := setupQueue(t)
	q.add("std", "a", `{}`, "std/app")
	q.add("std", "b", `{}`, "std/app", "std/ops")
	q.add("std", "c", `{}`, "std/app") // not leased
	if n := len(q.lease("std/app", 2, time.Hour)) + len(q.lease("std/ops", 2, time.Hour)); n != 3 {
		t.Fatalf("leased %d jobs, want 3", n)
	}
	q.clock.Add(time.Minute)
	n, err := q.s.ReleaseLeases(q.ctx)
	if err != nil || n != 3 {
		t.Fatalf("ReleaseLeases = %d, %v; want 3", n, err)
	}
	if due, ok := q.nextDue("std/app"); !ok || due.After(q.clock.Now()) {
		t.Fatalf("NextDue after ReleaseLeases = %v %v, want due now", due, ok)
	}
	jobs := append(q.lease("std/app", 10, time.Hour), q.lease("std/ops", 10, time.Hour)...)
	attempts := map[string]int{}
	for _, j := range jobs {
		attempts[j.Destination+"/"+j.EventID] = j.Attempt
	}
	if want := "map[std/app/a:2 std/app/b:2 std/app/c:1 std/ops/b:2]"; fmt.Sprint(attempts) != want {
		t.Fatalf("after ReleaseLeases: %v, want %s", attempts, want)
	}
	if n, err := q.s.ReleaseLeases(q.ctx); err != nil || n != 4 {
		t.Fatalf("ReleaseLeases again = %d, %v; want the 4 new leases", n, err)
	}
	if n, err := q.s.ReleaseLeases(q.ctx); err != nil || n != 0 {
		t.Fatalf("ReleaseLeases with nothing leased = %d, %v; want 0", n, err)
	}
}

// TestQueueNextDue: the earliest time a job becomes due, a job in flight
// at its lease's end and a retry at its time, whichever comes first, per
// destination.
func TestQueueNextDue(t *testing.T) {
	q := setupQueue(t)
	q.add("std", "a", `{}`, "std/app")
	q.add("std", "b", `{}`, "std/app")
	q.add("std", "o", `{}`, "std/other")
	jobs := q.lease("std/app", 2, time.Minute) // both until t0+1m
	if len(jobs) != 2 {
		t.Fatalf("leased %d jobs, want 2", len(jobs))
	}
	retry := func(j hookwarden.Job, at time.Duration) {
		a := q.attempt(j, hookwarden.Retry)
		a.RetryAt = t0.Add(at)
		q.finish(a)
	}
	retry(jobs[1], 30*time.Second) // b: due before a's lease ends
	if due, ok := q.nextDue("std/app"); !ok || !due.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("NextDue = %v %v, want b's retry at +30s", due, ok)
	}
	q.clock.Add(30 * time.Second)
	b := q.lease("std/app", 1, time.Minute) // until t0+90s
	if len(b) != 1 || b[0].EventID != "b" {
		t.Fatalf("lease: %+v, want b", b)
	}
	retry(b[0], 2*time.Minute) // b: due after a's lease ends
	if due, ok := q.nextDue("std/app"); !ok || !due.Equal(t0.Add(time.Minute)) {
		t.Fatalf("NextDue = %v %v, want a's lease's end at +1m", due, ok)
	}
	q.finish(q.attempt(jobs[0], hookwarden.Delivered))
	if due, ok := q.nextDue("std/app"); !ok || !due.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("NextDue = %v %v, want b's retry at +2m", due, ok)
	}
	if due, ok := q.nextDue("std/other"); !ok || !due.Equal(t0) {
		t.Fatalf("NextDue of the other destination = %v %v, want its job at %v", due, ok, t0)
	}
	if _, ok := q.nextDue("std/none"); ok {
		t.Fatal("NextDue of a destination without jobs found one")
	}
}

// TestQueueOutboxStats: pending depth, dead letters and the oldest pending
// job's age on the store's clock, the names asked for first, zeros
// included, then the other destinations with jobs.
func TestQueueOutboxStats(t *testing.T) {
	q := setupQueue(t)
	q.add("std", "e1", `{"n":1}`, "std/app", "std/ops")
	q.add("std", "e2", `{"n":2}`, "std/app")
	q.add("gh", "g1", `{}`, "gh/app")
	for _, dest := range []string{"std/app", "std/ops"} {
		for _, j := range q.lease(dest, 10, time.Minute) {
			v := hookwarden.Retry // e2 is retried, still pending
			if j.EventID == "e1" {
				v = map[string]hookwarden.Verdict{"std/app": hookwarden.Delivered, "std/ops": hookwarden.Dead}[dest]
			}
			q.finish(q.attempt(j, v))
		}
	}
	q.clock.Add(90 * time.Second)
	out, err := q.s.OutboxStats(q.ctx, []string{"std/app", "idle/app"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || out[0].Destination != "std/app" || out[1].Destination != "idle/app" {
		t.Fatalf("outbox %+v, want the names asked for first, then the 2 others", out)
	}
	outbox := map[string]string{}
	for _, o := range out {
		outbox[o.Destination] = fmt.Sprintf("p%d d%d x%d age %v %gs", o.Pending, o.Delivered, o.Dead, o.OldestPendingAge, o.OldestPendingSeconds)
	}
	want := "map[gh/app:p1 d0 x0 age 1m30s 90s idle/app:p0 d0 x0 age 0s 0s std/app:p1 d0 x0 age 1m30s 90s std/ops:p0 d0 x1 age 0s 0s]"
	if got := fmt.Sprint(outbox); got != want {
		t.Errorf("outbox %s, want %s", got, want)
	}
	// A replayed job's age counts from its replay.
	if _, err := q.s.Pool().Exec(q.ctx, `UPDATE jobs SET replayed_at = $1 WHERE destination = 'gh/app'`, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if out, err := q.s.OutboxStats(q.ctx, nil); err != nil || len(out) != 3 {
		t.Fatalf("outbox of no names: %+v %v, want the 3 destinations with jobs", out, err)
	} else {
		for _, o := range out {
			if o.Destination == "gh/app" && o.OldestPendingAge != 30*time.Second {
				t.Errorf("replayed job's age %v, want 30s", o.OldestPendingAge)
			}
		}
	}
}

// TestQueueConcurrentLeases: two instances' workers leasing at once, each
// on its own connection, never get the same job: every round's 10 jobs
// are leased once between them.
func TestQueueConcurrentLeases(t *testing.T) {
	q := setupQueue(t)
	for round := range 20 {
		for i := range 10 {
			q.add("std", fmt.Sprintf("r%d-%d", round, i), `{}`, "std/app")
		}
		var got [2][]hookwarden.Job
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range got {
			wg.Go(func() {
				<-start
				got[w], errs[w] = q.s.Lease(q.ctx, "std/app", 10, time.Hour)
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		for _, jobs := range got {
			for _, j := range jobs {
				if seen[j.ID] {
					t.Fatalf("round %d: job %d (%s) leased by both", round, j.ID, j.EventID)
				}
				seen[j.ID] = true
				if j.Attempt != 1 {
					t.Fatalf("round %d: job %s at attempt %d, want 1", round, j.EventID, j.Attempt)
				}
			}
		}
		if len(seen) != 10 {
			t.Fatalf("round %d: %d jobs leased (%d + %d), want 10", round, len(seen), len(got[0]), len(got[1]))
		}
	}
	if n := q.count(`SELECT count(*) FROM jobs WHERE attempts <> 1 OR leased_until IS NULL`); n != 0 {
		t.Fatalf("%d jobs not leased exactly once", n)
	}
}

// TestQueueLeaseSkipsLocked: a lease does not wait for jobs another
// transaction holds (an instance mid-lease or mid-finish): it takes the
// others at once.
func TestQueueLeaseSkipsLocked(t *testing.T) {
	q := setupQueue(t)
	for i := range 6 {
		q.add("std", fmt.Sprint("e", i), `{}`, "std/app")
		q.clock.Add(time.Microsecond)
	}
	tx, err := q.s.Pool().Begin(q.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(q.ctx)
	tag, err := tx.Exec(q.ctx, `SELECT id FROM jobs ORDER BY next_at LIMIT 3 FOR UPDATE`)
	if err != nil || tag.RowsAffected() != 3 {
		t.Fatalf("lock 3 jobs: %v %v", tag, err)
	}
	// Bounded: a lease that waited for the locks would fail here.
	ctx, cancel := context.WithTimeout(q.ctx, 30*time.Second)
	defer cancel()
	jobs, err := q.s.Lease(ctx, "std/app", 10, time.Minute)
	if err != nil {
		t.Fatalf("lease beside locked jobs: %v", err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.EventID)
	}
	if fmt.Sprint(ids) != "[e3 e4 e5]" {
		t.Fatalf("leased %v beside 3 locked jobs, want [e3 e4 e5]", ids)
	}
	if err := tx.Rollback(q.ctx); err != nil {
		t.Fatal(err)
	}
	if jobs := q.lease("std/app", 10, time.Minute); len(jobs) != 3 || jobs[0].EventID != "e0" {
		t.Fatalf("after the locks went: %+v, want e0, e1 and e2", jobs)
	}
}

// TestQueueDatabaseClock: without a test clock, a lease ends by the
// database's clock, and a lease, its holder written, is a HOT update (no
// index entries: the outbox does not bloat its indexes per attempt).
func TestQueueDatabaseClock(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	q := &queue{fixture: &fixture{t: t, s: s}, clock: &clock{t: t0}, ctx: context.Background()}
	q.add("std", "e1", `{}`, "std/app") // received at t0, months off
	run, err := s.StartRun(q.ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	jobs := q.lease("std/app", 1, 10*time.Minute)
	if len(jobs) != 1 {
		t.Fatalf("leased %d jobs, want 1", len(jobs))
	}
	if n := q.count(`SELECT count(*) FROM jobs WHERE leased_by = $1`, run); n != 1 {
		t.Fatalf("%d jobs held by run %d, want the lease's holder written", n, run)
	}
	if n := q.count(`SELECT count(*) FROM jobs WHERE abs(extract(epoch FROM leased_until - now()) - 600) < 60`); n != 1 {
		t.Fatal("the lease does not end by the database's clock")
	}
	if due, ok := q.nextDue("std/app"); !ok || due.Sub(jobs[0].ReceivedAt) < 24*time.Hour {
		t.Fatalf("NextDue = %v %v, want the lease's end by the database's clock", due, ok)
	}
	// Statistics reach the view asynchronously: poll for the lease's
	// update, the only one of the table so far.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var upd, hot int
		if err := s.Pool().QueryRow(q.ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'jobs'`).
			Scan(&upd, &hot); err != nil {
			t.Fatal(err)
		}
		if upd > 0 {
			if upd != 1 || hot != 1 {
				t.Fatalf("jobs: %d updates, %d HOT; want the lease as 1 HOT update", upd, hot)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease's update never reached pg_stat_user_tables")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestQueueDatabaseDown: with the server gone, every queue write fails
// within its bound with ErrUnavailable; the reads fail too.
func TestQueueDatabaseDown(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	s := open(t, c.URL(""), Options{Timeout: 3 * time.Second})
	ctx := context.Background()
	if _, err := s.Record(ctx, receipt("std", "e1", `{}`, "std/app")); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Lease(ctx, "std/app", 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %+v %v", jobs, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	a := hookwarden.Attempt{JobID: jobs[0].ID, Number: 1, ExitCode: -1, Verdict: hookwarden.Delivered}
	checks := map[string]error{}
	_, checks["Lease"] = s.Lease(ctx, "std/app", 1, time.Minute)
	checks["Finish"] = s.Finish(ctx, a)
	_, checks["FinishAndLease"] = s.FinishAndLease(ctx, a, "std/app", 1, time.Minute)
	checks["Unlease"] = s.Unlease(ctx, jobs[0])
	_, checks["ReleaseLeases"] = s.ReleaseLeases(ctx)
	for name, err := range checks {
		if !errors.Is(err, hookwarden.ErrUnavailable) {
			t.Errorf("%s with the database down: %v, want ErrUnavailable", name, err)
		}
	}
	if _, _, err := s.NextDue(ctx, "std/app"); err == nil {
		t.Error("NextDue with the database down succeeded")
	}
	if _, err := s.OutboxStats(ctx, nil); err == nil {
		t.Error("OutboxStats with the database down succeeded")
	}
}
