package storetest

// The queue: leases, finishes, unleases and the direct hand-over.

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testLeaseMax: a lease takes at most max due jobs, each once, with what a
// delivery needs; leased jobs are not due until their lease ends.
func testLeaseMax(t *testing.T, h Harness) {
	f := setup(t, h)
	if _, ok, err := f.s.NextDue(f.ctx, "std/app"); err != nil || ok {
		t.Fatalf("NextDue of an empty outbox: %v %v, want nothing", ok, err)
	}
	for i := range 5 {
		f.record("std", fmt.Sprint("e", i), fmt.Sprintf(`{"n":%d}`, i), "std/app")
	}
	f.record("std", "x", `{}`, "std/other")
	now := f.clock.Now()
	if due, ok, err := f.s.NextDue(f.ctx, "std/app"); err != nil || !ok || due.After(now) {
		t.Fatalf("NextDue = %v %v %v, want due by %v", due, ok, err, now)
	}
	if jobs := f.lease("std/app", 0, time.Minute); len(jobs) != 0 {
		t.Fatalf("max 0 leased %d jobs", len(jobs))
	}
	seen := map[int64]bool{}
	for _, want := range []int{3, 2, 0} {
		jobs := f.lease("std/app", 3, time.Minute)
		if len(jobs) != want {
			t.Fatalf("lease of up to 3: %d jobs, want %d", len(jobs), want)
		}
		for _, j := range jobs {
			if seen[j.ID] {
				t.Fatalf("job %d leased twice", j.ID)
			}
			seen[j.ID] = true
			if j.Attempt != 1 || j.Destination != "std/app" || j.Source != "std" || j.EventType != "t.created" ||
				j.ContentType != "application/json" || string(j.Body) != fmt.Sprintf(`{"n":%s}`, j.EventID[1:]) ||
				!j.ReceivedAt.Equal(now) || j.IdempotencyKey() != "std:"+j.EventID ||
				j.Header.Get("Webhook-Id") != j.EventID || j.Header.Get("Content-Type") != "application/json" {
				t.Errorf("leased job %+v lacks what a delivery needs (the receipt's headers too: sign_as reads them)", j)
			}
		}
	}
	// Every job is in flight: nothing is due before the leases end.
	if due, ok, err := f.s.NextDue(f.ctx, "std/app"); err != nil || ok && (!due.After(now) || due.After(now.Add(time.Minute))) {
		t.Fatalf("NextDue with every job leased = %v %v %v, want after now and by the lease's end", due, ok, err)
	}
	if jobs := f.lease("std/other", 10, time.Minute); len(jobs) != 1 || jobs[0].EventID != "x" {
		t.Fatalf("other destination: %+v, want its own job", jobs)
	}
}

// testLeaseExpiry: a job whose lease expired is due again, the same job
// with the next attempt; the late finish of the old attempt must not change
// it; a retry is due at its time.
func testLeaseExpiry(t *testing.T, h Harness) {
	f := setup(t, h)
	f.record("std", "msg_1", `{"a":1}`, "std/app")
	first := f.lease("std/app", 5, time.Minute)
	if len(first) != 1 {
		t.Fatalf("leased %d jobs, want 1", len(first))
	}
	f.clock.Add(61 * time.Second) // the worker died
	again := f.lease("std/app", 5, time.Minute)
	if len(again) != 1 || again[0].ID != first[0].ID || again[0].Attempt != 2 || again[0].IdempotencyKey() != first[0].IdempotencyKey() {
		t.Fatalf("after the lease expired: %+v, want the same job, attempt 2", again)
	}
	// The first attempt reports late: refused or ignored, the job stays.
	_ = f.s.Finish(f.ctx, f.attempt(first[0], hookwarden.Dead))
	if j := f.jobOf("std", "msg_1", "std/app"); j.State != string(hookwarden.JobPending) || j.DeadCount != 0 {
		t.Fatalf("a stale finish changed the job: %+v", j)
	}
	if dead, _, err := f.s.ListDead(f.ctx, DeadFilter{}); err != nil || len(dead) != 0 {
		t.Fatalf("a stale finish dead-lettered: %+v %v", dead, err)
	}
	retry := f.attempt(again[0], hookwarden.Retry)
	retry.RetryAt = f.clock.Now().Add(30 * time.Second)
	f.finishJob(retry)
	if jobs := f.lease("std/app", 5, time.Minute); len(jobs) != 0 {
		t.Fatalf("leased %d jobs before the retry is due", len(jobs))
	}
	if due, ok, err := f.s.NextDue(f.ctx, "std/app"); err != nil || !ok || !due.Equal(retry.RetryAt) {
		t.Fatalf("NextDue = %v %v %v, want the retry at %v", due, ok, err, retry.RetryAt)
	}
	f.clock.Add(30 * time.Second)
	third := f.lease("std/app", 5, time.Minute)
	if len(third) != 1 || third[0].Attempt != 3 {
		t.Fatalf("retry: %+v, want attempt 3", third)
	}
	f.finishJob(f.attempt(third[0], hookwarden.Delivered))
	d := f.show("std", "msg_1")
	if d.Status != StatusDelivered || d.Delivered != 1 || d.Pending != 0 {
		t.Fatalf("after delivery: %+v", d.EventSummary)
	}
	last := d.JobLog[0].Log[len(d.JobLog[0].Log)-1]
	if last.Number != 3 || last.Verdict != string(hookwarden.Delivered) || last.StatusCode != 200 {
		t.Errorf("attempt log ends with %+v, want attempt 3 delivered", last)
	}
	if _, ok, _ := f.s.NextDue(f.ctx, "std/app"); ok {
		t.Error("something is due after delivery")
	}
}

// testFinishAndLease: the attempt is recorded and the next due job leased
// in one call; with nothing due, or max 0, the finish still happens.
func testFinishAndLease(t *testing.T, h Harness) {
	f := setup(t, h)
	for i := range 2 {
		f.record("stripe", fmt.Sprint("evt_", i), fmt.Sprintf(`{"n":%d}`, i), "stripe/app")
	}
	jobs := f.lease("stripe/app", 1, time.Minute)
	if len(jobs) != 1 {
		t.Fatalf("leased %d jobs, want 1", len(jobs))
	}
	next, err := f.s.FinishAndLease(f.ctx, f.attempt(jobs[0], hookwarden.Delivered), "stripe/app", 1, time.Minute)
	if err != nil || len(next) != 1 || next[0].ID == jobs[0].ID || next[0].Attempt != 1 || next[0].Destination != "stripe/app" ||
		string(next[0].Body) != fmt.Sprintf(`{"n":%s}`, next[0].EventID[4:]) {
		t.Fatalf("FinishAndLease: %+v %v, want the other job", next, err)
	}
	if j := f.jobOf("stripe", jobs[0].EventID, "stripe/app"); j.State != string(hookwarden.JobDelivered) {
		t.Fatalf("the finished job is %s", j.State)
	}
	if more := f.lease("stripe/app", 5, time.Minute); len(more) != 0 {
		t.Fatalf("the job FinishAndLease leased was leased again: %+v", more)
	}
	more, err := f.s.FinishAndLease(f.ctx, f.attempt(next[0], hookwarden.Dead), "stripe/app", 1, time.Minute)
	if err != nil || len(more) != 0 {
		t.Fatalf("FinishAndLease with nothing due: %+v %v", more, err)
	}
	if j := f.jobOf("stripe", next[0].EventID, "stripe/app"); j.State != string(hookwarden.JobDead) {
		t.Fatalf("finish with nothing due: job is %s, want dead", j.State)
	}
	f.record("stripe", "evt_2", `{}`, "stripe/app")
	f.record("stripe", "evt_3", `{}`, "stripe/app")
	j := f.lease("stripe/app", 1, time.Minute)
	if more, err := f.s.FinishAndLease(f.ctx, f.attempt(j[0], hookwarden.Delivered), "stripe/app", 0, time.Minute); err != nil || len(more) != 0 {
		t.Fatalf("FinishAndLease max 0: %+v %v", more, err)
	}
	if left := f.lease("stripe/app", 5, time.Minute); len(left) != 1 {
		t.Fatalf("after max 0: %d due jobs, want 1", len(left))
	}
}

// testUnlease: a lease given back is due now, its attempt uncounted; an
// Unlease of another attempt, or of a finished job, changes nothing.
func testUnlease(t *testing.T, h Harness) {
	f := setup(t, h)
	f.record("std", "a", `{"id":"a"}`, "std/app")
	f.record("std", "b", `{"id":"b"}`, "std/app")
	jobs := f.lease("std/app", 2, time.Hour)
	if len(jobs) != 2 {
		t.Fatalf("leased %d jobs, want 2", len(jobs))
	}
	a, b := jobs[0], jobs[1]
	stale := a
	stale.Attempt = 2 // as if leased again since
	if err := f.s.Unlease(f.ctx, stale); err != nil {
		t.Fatal(err)
	}
	if again := f.lease("std/app", 2, time.Hour); len(again) != 0 {
		t.Fatalf("a stale Unlease gave the lease back: %+v", again)
	}
	if err := f.s.Unlease(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	if due, ok, err := f.s.NextDue(f.ctx, "std/app"); err != nil || !ok || due.After(f.clock.Now()) {
		t.Fatalf("NextDue after Unlease = %v %v %v, want due now", due, ok, err)
	}
	again := f.lease("std/app", 2, time.Hour)
	if len(again) != 1 || again[0].ID != a.ID || again[0].Attempt != a.Attempt {
		t.Fatalf("after Unlease: %+v, want job %d again at attempt %d (the given-back one uncounted)", again, a.ID, a.Attempt)
	}
	f.finishJob(f.attempt(b, hookwarden.Delivered))
	if err := f.s.Unlease(f.ctx, b); err != nil {
		t.Fatal(err)
	}
	if j := f.jobOf("std", "b", "std/app"); j.State != string(hookwarden.JobDelivered) || j.Attempts != 1 {
		t.Fatalf("Unlease of a delivered job changed it: %+v", j)
	}
}

// testReleaseLeases: at start, every lease of a previous process is given
// back: its jobs are due at once, the same jobs with the next attempt.
func testReleaseLeases(t *testing.T, h Harness) {
	f := setup(t, h)
	f.record("std", "a", `{}`, "std/app")
	f.record("std", "b", `{}`, "std/app", "std/ops")
	f.record("std", "c", `{}`, "std/app") // not leased
	if n := len(f.lease("std/app", 2, time.Hour)) + len(f.lease("std/ops", 2, time.Hour)); n != 3 {
		t.Fatalf("leased %d jobs, want 3", n)
	}
	n, err := f.s.ReleaseLeases(f.ctx)
	if err != nil || n != 3 {
		t.Fatalf("ReleaseLeases = %d, %v; want 3", n, err)
	}
	jobs := append(f.lease("std/app", 10, time.Hour), f.lease("std/ops", 10, time.Hour)...)
	attempts := map[string]int{}
	for _, j := range jobs {
		attempts[j.Destination+"/"+j.EventID] = j.Attempt
	}
	if want := "map[std/app/a:2 std/app/b:2 std/app/c:1 std/ops/b:2]"; fmt.Sprint(attempts) != want {
		t.Fatalf("after ReleaseLeases: %v, want %s", attempts, want)
	}
	if n, err := f.s.ReleaseLeases(f.ctx); err != nil || n != 4 {
		t.Fatalf("ReleaseLeases again = %d, %v; want the 4 new leases", n, err)
	}
}

// slots is a Direct with a number of free slots per destination that
// records what the store does with them.
type slots struct {
	mu       sync.Mutex
	free     map[string]int
	reserved int
	started  []hookwarden.Job
	released int
}

func (p *slots) Reserve(dest string) (hookwarden.Slot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free[dest] == 0 {
		return nil, false
	}
	p.free[dest]--
	p.reserved++
	return slot{p}, true
}

func (p *slots) counts() (reserved, started, released int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reserved, len(p.started), p.released
}

type slot struct{ p *slots }

func (s slot) LeaseFor() time.Duration { return time.Minute }

func (s slot) Hand(j hookwarden.Job) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.started = append(s.p.started, j)
}

func (s slot) Release() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.released++
}

// testDirectHandOver: while the pool has free slots, a new job is created
// already leased (attempt 1 counted) and handed over with everything a
// delivery needs; without a slot it waits for a lease. A duplicate takes
// no slot.
func testDirectHandOver(t *testing.T, h Harness) {
	f := setup(t, h)
	p := &slots{free: map[string]int{"std/app": 2}}
	f.s.SetDirect(p)
	now := f.clock.Now()
	for _, id := range []string{"a", "b", "a", "c"} {
		f.record("std", id, `{"id":"`+id+`"}`, "std/app")
	}
	reserved, started, released := p.counts()
	if reserved != 2 || started != 2 || released != 0 {
		t.Fatalf("reserved %d, started %d, released %d; want 2 handed over (the free slots), none released",
			reserved, started, released)
	}
	p.mu.Lock()
	handed := append([]hookwarden.Job(nil), p.started...)
	p.mu.Unlock()
	for _, j := range handed {
		if j.Attempt != 1 || j.Source != "std" || j.Destination != "std/app" || j.EventType != "t.created" ||
			j.ContentType != "application/json" || string(j.Body) != `{"id":"`+j.EventID+`"}` || !j.ReceivedAt.Equal(now) ||
			j.Header.Get("Webhook-Id") != j.EventID {
			t.Errorf("handed job %+v lacks what a delivery needs (the receipt's headers too, as Lease reads them)", j)
		}
		if info := f.jobOf("std", j.EventID, "std/app"); info.ID != j.ID || info.Attempts != 1 || info.LeasedUntil.IsZero() {
			t.Errorf("handed job %s stored as %+v, want leased for attempt 1", j.EventID, info)
		}
	}
	// A lease takes only the job nobody holds.
	jobs := f.lease("std/app", 10, time.Minute)
	if len(jobs) != 1 || jobs[0].EventID != "c" {
		t.Fatalf("lease: %+v, want only c", jobs)
	}
	// The pool refuses a handed job (it began draining): given back, due now.
	if err := f.s.Unlease(f.ctx, handed[0]); err != nil {
		t.Fatal(err)
	}
	jobs = f.lease("std/app", 10, time.Minute)
	if len(jobs) != 1 || jobs[0].ID != handed[0].ID || jobs[0].Attempt != 1 {
		t.Fatalf("after Unlease of a handed job: %+v, want it at attempt 1", jobs)
	}
	// Off: new jobs wait for a lease again.
	f.s.SetDirect(nil)
	p.mu.Lock()
	p.free["std/app"] = 10
	p.mu.Unlock()
	f.record("std", "d", `{"id":"d"}`, "std/app")
	if reserved, _, _ := p.counts(); reserved != 2 {
		t.Fatalf("reserved %d slots after SetDirect(nil), want none more", reserved)
	}
	if jobs := f.lease("std/app", 10, time.Minute); len(jobs) != 1 || jobs[0].EventID != "d" {
		t.Fatalf("lease after SetDirect(nil): %+v, want d", jobs)
	}
}

// testDirectRelease: when the write that created a leased job does not
// commit, its slot is given back and nothing is started; the store's
// answer is ErrUnavailable, so the provider retries.
func testDirectRelease(t *testing.T, h Harness) {
	if h.RefuseJobs == nil {
		t.Skip("Harness.RefuseJobs not set")
	}
	f := setup(t, h)
	p := &slots{free: map[string]int{"std/app": 100, "std/ops": 100}}
	f.s.SetDirect(p)
	restore := h.RefuseJobs(t, f.s)
	_, err := f.s.Record(f.ctx, f.receipt("std", "refused", `{}`, "std/app", "std/ops"))
	if !errors.Is(err, hookwarden.ErrUnavailable) {
		t.Fatalf("record while jobs are refused: %v, want ErrUnavailable", err)
	}
	reserved, started, released := p.counts()
	if reserved == 0 || started != 0 || released != reserved {
		t.Fatalf("reserved %d, started %d, released %d; want every reservation released, none started",
			reserved, started, released)
	}
	restore()
	if _, err := f.s.ShowEvent(f.ctx, "std", "refused"); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("the failed write left a claim: %v", err)
	}
	f.record("std", "refused", `{}`, "std/app", "std/ops") // the provider's retry
	if r, s, rel := p.counts(); s != 2 || r-rel != 2 {
		t.Fatalf("after the retry: reserved %d, started %d, released %d; want 2 more started", r, s, rel)
	}
}
