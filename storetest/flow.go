package storetest

// Flow control: pause (manual and automatic, with probes), the rate's
// bucket, the order of keyed jobs, and the direct hand-over kept out of
// all three.

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

func (f *fixture) setFlow(p ...hookwarden.FlowPolicy) {
	f.t.Helper()
	if err := f.s.SetFlow(f.ctx, p); err != nil {
		f.t.Fatalf("set flow: %v", err)
	}
}

func (f *fixture) destState(dest string) hookwarden.DestinationState {
	f.t.Helper()
	st, err := f.s.Destinations(f.ctx, []string{dest})
	if err != nil || len(st) != 1 {
		f.t.Fatalf("destinations %s: %+v %v", dest, st, err)
	}
	// The metrics' cheap read of the pause agrees with it.
	pi, ok := f.s.(hookwarden.PauseInspector)
	if !ok {
		f.t.Fatalf("the store has no Paused (hookwarden.PauseInspector)")
	}
	if p, err := pi.Paused(f.ctx, []string{dest, "std/never-touched"}); err != nil || len(p) != 2 || p[0] != st[0].Paused || p[1] {
		f.t.Fatalf("Paused(%s, std/never-touched) = %v, %v; Destinations says paused %v", dest, p, err, st[0].Paused)
	}
	return st[0]
}

// failed is a retryable failure of j, due again at once.
func (f *fixture) failed(j hookwarden.Job) hookwarden.Attempt {
	a := f.attempt(j, hookwarden.Retry)
	a.Failed, a.Probe = true, j.Probe
	return a
}

// ids lists the jobs' event ids, sorted: a lease's order among jobs due
// at the same time is not promised.
func ids(jobs []hookwarden.Job) string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.EventID)
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// withKey records event id of source std for dest with order key key.
func (f *fixture) withKey(id, key string) {
	f.t.Helper()
	r := f.receipt("std", id, `{}`, "std/app")
	r.Events[0].OrderKeys = []string{key}
	f.mustRecord(r)
}

// testManualPause: a paused destination leases nothing and has nothing due
// until it is resumed; both are idempotent and shown by Destinations.
func testManualPause(t *testing.T, h Harness) {
	f := setup(t, h)
	f.setFlow(hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 4})
	for i := range 3 {
		f.record("std", fmt.Sprint("e", i), `{}`, "std/app")
	}
	for _, want := range []bool{true, false} {
		changed, err := f.s.Pause(f.ctx, "std/app", cliAudit())
		if err != nil || changed != want {
			t.Fatalf("pause: changed %v, %v; want %v", changed, err, want)
		}
	}
	if jobs := f.lease("std/app", 10, time.Minute); len(jobs) != 0 {
		t.Fatalf("a paused destination leased %s", ids(jobs))
	}
	if _, ok, err := f.s.NextDue(f.ctx, "std/app"); err != nil || ok {
		t.Fatalf("NextDue of a paused destination: %v %v, want nothing until resume", ok, err)
	}
	st := f.destState("std/app")
	if !st.Paused || st.Pause == nil || *st.Pause != hookwarden.PauseManual || st.Pending != 3 || st.InFlight != 0 ||
		st.NextProbeAt != nil {
		t.Fatalf("paused state: %+v", st)
	}
	// Manual means no probes either, however long it lasts.
	f.clock.Add(48 * time.Hour)
	if jobs := f.lease("std/app", 10, time.Minute); len(jobs) != 0 {
		t.Fatalf("a paused destination leased %s two days later", ids(jobs))
	}
	for _, want := range []bool{true, false} {
		changed, err := f.s.Resume(f.ctx, "std/app", cliAudit())
		if err != nil || changed != want {
			t.Fatalf("resume: changed %v, %v; want %v", changed, err, want)
		}
	}
	if jobs := f.lease("std/app", 10, time.Minute); len(jobs) != 3 {
		t.Fatalf("after resume leased %s, want all 3", ids(jobs))
	}
	if st := f.destState("std/app"); st.Paused || st.Pause != nil || st.InFlight != 3 {
		t.Fatalf("resumed state: %+v", st)
	}
	// A destination nobody touched reads as not paused.
	if st := f.destState("std/other"); st.Paused || st.Pending != 0 || st.BlockedKeys == nil {
		t.Fatalf("untouched destination: %+v", st)
	}
}

// testDestinationCounts: Destinations' pending counts every pending job of
// the destination and in_flight the leases that have not expired: not a
// retry waiting for its time, not a lease that expired, not another
// destination's.
func testDestinationCounts(t *testing.T, h Harness) {
	f := setup(t, h)
	for i := range 6 {
		f.record("std", fmt.Sprint("e", i), fmt.Sprintf(`{"n":%d}`, i), "std/app", "std/ops")
		f.clock.Add(time.Millisecond)
	}
	check := func(step string, pending, inFlight int) {
		t.Helper()
		if st := f.destState("std/app"); st.Pending != pending || st.InFlight != inFlight {
			t.Errorf("%s: pending %d, in_flight %d; want %d, %d", step, st.Pending, st.InFlight, pending, inFlight)
		}
	}
	check("recorded", 6, 0)
	f.lease("std/ops", 6, time.Minute)
	check("another destination's leases", 6, 0)
	jobs := f.lease("std/app", 3, time.Minute)
	check("three leased", 6, 3)
	retry := f.attempt(jobs[0], hookwarden.Retry)
	retry.RetryAt = f.clock.Now().Add(time.Hour)
	f.finishJob(retry)
	f.finishJob(f.attempt(jobs[1], hookwarden.Delivered))
	check("a retry waiting an hour, a delivery", 5, 1)
	f.clock.Add(2 * time.Minute)
	check("the lease expired", 5, 0)
	f.lease("std/app", 2, 10*time.Minute)
	check("two leased again", 5, 2)
	f.clock.Add(2 * time.Hour)
	check("those leases expired, the retry due", 5, 0)
}

// testAutoPause: pause_after consecutive retryable failures pause the
// destination; then one probe (the oldest due job) per probe interval, a
// failed probe gives its attempt back, and the first success resumes.
func testAutoPause(t *testing.T, h Harness) {
	f := setup(t, h)
	const probe = time.Hour
	f.setFlow(hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 4, PauseAfter: 3, ProbeEvery: probe})
	for i := range 5 {
		f.record("std", fmt.Sprint("e", i), `{}`, "std/app")
		f.clock.Add(time.Second)
	}
	// counted is each job's attempts so far, as leases numbered them.
	counted := map[string]int{}
	take := func(j hookwarden.Job) {
		t.Helper()
		if j.Attempt != counted[j.EventID]+1 {
			t.Fatalf("job %s leased as attempt %d, want %d", j.EventID, j.Attempt, counted[j.EventID]+1)
		}
		if !j.Probe {
			counted[j.EventID] = j.Attempt
		}
	}
	// A success between failures resets the streak.
	jobs := f.lease("std/app", 2, time.Minute)
	take(jobs[0])
	take(jobs[1])
	f.finishJob(f.failed(jobs[0]))
	f.finishJob(f.attempt(jobs[1], hookwarden.Delivered))
	if st := f.destState("std/app"); st.ConsecutiveFailures != 0 || st.Paused {
		t.Fatalf("after a failure and a success: %+v, want streak 0", st)
	}
	// An attempt cut short by shutdown does not count.
	jobs = f.lease("std/app", 1, time.Minute)
	take(jobs[0])
	f.finishJob(f.attempt(jobs[0], hookwarden.Retry)) // not Failed
	for range 3 {
		jobs = f.lease("std/app", 4, time.Minute)
		if len(jobs) == 0 {
			t.Fatal("nothing due before the pause")
		}
		take(jobs[0])
		f.finishJob(f.failed(jobs[0]))
		for _, j := range jobs[1:] {
			if err := f.s.Unlease(f.ctx, j); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := f.destState("std/app")
	if !st.Paused || st.Pause == nil || *st.Pause != hookwarden.PauseAuto || st.ConsecutiveFailures != 3 ||
		st.NextProbeAt == nil || !st.NextProbeAt.Equal(f.clock.Now().Add(probe)) {
		t.Fatalf("after 3 failures: %+v, want paused auto, probe in %s", st, probe)
	}
	if jobs := f.lease("std/app", 4, time.Minute); len(jobs) != 0 {
		t.Fatalf("paused: leased %s before the probe is due", ids(jobs))
	}
	if due, ok, err := f.s.NextDue(f.ctx, "std/app"); err != nil || !ok || !due.Equal(*st.NextProbeAt) {
		t.Fatalf("NextDue while paused = %v %v %v, want the probe at %v", due, ok, err, st.NextProbeAt)
	}
	// Probes fail: each gives its attempt back (take checks the numbers).
	for round := range 3 {
		f.clock.Add(probe)
		jobs := f.lease("std/app", 4, time.Minute)
		if len(jobs) != 1 || !jobs[0].Probe {
			t.Fatalf("probe %d: leased %+v, want one probe", round, jobs)
		}
		take(jobs[0])
		if again := f.lease("std/app", 4, time.Minute); len(again) != 0 {
			t.Fatalf("probe %d: a second lease took %s", round, ids(again))
		}
		f.finishJob(f.failed(jobs[0]))
		if st := f.destState("std/app"); !st.Paused || st.ConsecutiveFailures != 4+round {
			t.Fatalf("after failed probe %d: %+v, want paused, streak %d", round, st, 4+round)
		}
	}
	f.clock.Add(probe)
	jobs = f.lease("std/app", 4, time.Minute)
	if len(jobs) != 1 || !jobs[0].Probe {
		t.Fatalf("last probe: %+v", jobs)
	}
	take(jobs[0])
	a := f.attempt(jobs[0], hookwarden.Delivered)
	a.Probe = true
	f.finishJob(a)
	if st := f.destState("std/app"); st.Paused || st.ConsecutiveFailures != 0 || st.NextProbeAt != nil {
		t.Fatalf("after a successful probe: %+v, want resumed", st)
	}
	jobs = f.lease("std/app", 4, time.Minute)
	if len(jobs) != 3 {
		t.Fatalf("after resuming leased %+v, want the other 3", jobs)
	}
	for _, j := range jobs {
		if j.Probe {
			t.Errorf("job %s leased as a probe after the pause ended", j.EventID)
		}
		take(j)
	}
	// An operator's resume ends an auto pause too.
	for _, j := range jobs {
		f.finishJob(f.failed(j))
	}
	if st := f.destState("std/app"); !st.Paused || *st.Pause != hookwarden.PauseAuto {
		t.Fatalf("after 3 more failures: %+v, want paused again", st)
	}
	if changed, err := f.s.Resume(f.ctx, "std/app", cliAudit()); err != nil || !changed {
		t.Fatalf("resume of an auto pause: %v %v", changed, err)
	}
	if st := f.destState("std/app"); st.Paused || st.ConsecutiveFailures != 0 {
		t.Fatalf("after resume: %+v", st)
	}
	if jobs := f.lease("std/app", 4, time.Minute); len(jobs) != 3 {
		t.Fatalf("after resume leased %d, want 3", len(jobs))
	}
}

// testRate: a bucket of N attempts, refilled at N per period and never
// fuller than N; due jobs wait for tokens, and NextDue says when one comes.
func testRate(t *testing.T, h Harness) {
	f := setup(t, h)
	f.setFlow(hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 100, Rate: hookwarden.Rate{N: 4, Per: time.Second}})
	for i := range 20 {
		f.record("std", fmt.Sprint("e", i), `{}`, "std/app")
	}
	if jobs := f.lease("std/app", 10, time.Minute); len(jobs) != 4 {
		t.Fatalf("a full bucket of 4 leased %d", len(jobs))
	}
	if jobs := f.lease("std/app", 10, time.Minute); len(jobs) != 0 {
		t.Fatalf("an empty bucket leased %d", len(jobs))
	}
	now := f.clock.Now()
	if due, ok, err := f.s.NextDue(f.ctx, "std/app"); err != nil || !ok || due.Before(now.Add(240*time.Millisecond)) ||
		due.After(now.Add(260*time.Millisecond)) {
		t.Fatalf("NextDue with an empty bucket = %v %v %v, want the next token in 250ms", due, ok, err)
	}
	f.clock.Add(500 * time.Millisecond)
	if jobs := f.lease("std/app", 10, time.Minute); len(jobs) != 2 {
		t.Fatalf("half a second later leased %d, want 2", len(jobs))
	}
	// A lease smaller than the bucket spends only what it took.
	f.clock.Add(time.Hour)
	if jobs := f.lease("std/app", 1, time.Minute); len(jobs) != 1 {
		t.Fatalf("leased %d of 1", len(jobs))
	}
	if jobs := f.lease("std/app", 10, time.Minute); len(jobs) != 3 {
		t.Fatalf("an hour later (bucket capped at 4, one spent) leased %d, want 3", len(jobs))
	}
	// The finish-and-lease path spends tokens too.
	f.clock.Add(250 * time.Millisecond)
	jobs := f.lease("std/app", 1, time.Minute)
	more, err := f.s.FinishAndLease(f.ctx, f.attempt(jobs[0], hookwarden.Delivered), "std/app", 1, time.Minute)
	if err != nil || len(more) != 0 {
		t.Fatalf("FinishAndLease with an empty bucket: %d jobs, %v; want none", len(more), err)
	}
}

// testOrder: jobs of one key are leased one at a time in commit order; a
// failing head blocks only its key and is listed; delivering or
// dead-lettering the head releases the next; events without a key are
// not held; a replayed job of a busy key waits behind its head.
func testOrder(t *testing.T, h Harness) {
	f := setup(t, h)
	f.setFlow(hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 10, Ordered: true})
	for _, e := range [][2]string{{"a1", "A"}, {"b1", "B"}, {"a2", "A"}, {"x", ""}, {"a3", "A"}, {"b2", "B"}} {
		f.withKey(e[0], e[1])
	}
	jobs := f.lease("std/app", 10, time.Minute)
	if got := ids(jobs); got != "[a1 b1 x]" {
		t.Fatalf("first lease %s, want the heads of A and B and the unkeyed x", got)
	}
	byID := map[string]hookwarden.Job{}
	for _, j := range jobs {
		byID[j.EventID] = j
	}
	f.finishJob(f.failed(byID["a1"]))
	f.finishJob(f.attempt(byID["b1"], hookwarden.Delivered))
	f.finishJob(f.attempt(byID["x"], hookwarden.Delivered))
	st := f.destState("std/app")
	if len(st.BlockedKeys) != 1 || st.BlockedKeys[0].Key != "A" || st.BlockedKeys[0].HeadEventID != "a1" ||
		st.BlockedKeys[0].Attempts != 1 || st.BlockedKeys[0].LastError == "" || st.BlockedKeys[0].Since.IsZero() {
		t.Fatalf("blocked keys %+v, want A held by a1", st.BlockedKeys)
	}
	jobs = f.lease("std/app", 10, time.Minute)
	if got := ids(jobs); got != "[a1 b2]" {
		t.Fatalf("after a1 failed and b1 was delivered: %s, want a1 again and b2", got)
	}
	byID = map[string]hookwarden.Job{}
	for _, j := range jobs {
		byID[j.EventID] = j
	}
	f.finishJob(f.attempt(byID["a1"], hookwarden.Delivered))
	f.finishJob(f.attempt(byID["b2"], hookwarden.Delivered))
	jobs = f.lease("std/app", 10, time.Minute)
	if got := ids(jobs); got != "[a2]" {
		t.Fatalf("after a1 was delivered: %s, want a2", got)
	}
	f.finishJob(f.attempt(jobs[0], hookwarden.Dead))
	jobs = f.lease("std/app", 10, time.Minute)
	if got := ids(jobs); got != "[a3]" {
		t.Fatalf("after a2 was dead-lettered: %s, want a3", got)
	}
	f.finishJob(f.attempt(jobs[0], hookwarden.Delivered))
	// A destination that is no longer ordered has nothing waiting.
	f.withKey("a5", "A")
	f.withKey("a6", "A")
	f.setFlow(hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 10})
	if got := ids(f.lease("std/app", 10, time.Minute)); got != "[a5 a6]" {
		t.Fatalf("after order_by was removed: %s, want both", got)
	}
}

// testOrderReplay: a replayed job of a key that has a head waits behind
// it, and goes next (it is the oldest waiting); replaying the blocked head
// makes it due at once.
func testOrderReplay(t *testing.T, h Harness) {
	f := setup(t, h)
	f.setFlow(hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 10, Ordered: true})
	f.withKey("a1", "A")
	f.withKey("a2", "A")
	jobs := f.lease("std/app", 10, time.Minute)
	f.finishJob(f.attempt(jobs[0], hookwarden.Dead)) // a1 dead: a2 is the head
	jobs = f.lease("std/app", 10, time.Minute)
	if got := ids(jobs); got != "[a2]" {
		t.Fatalf("lease %s, want a2", got)
	}
	f.withKey("a3", "A")
	if res := f.replay(ReplaySelector{Source: "std", EventIDs: []string{"a1"}}, ReplayOptions{Audit: cliAudit()}); res.Replayed != 1 {
		t.Fatalf("replay a1: %+v", res)
	}
	if more := f.lease("std/app", 10, time.Minute); len(more) != 0 {
		t.Fatalf("with a2 in flight leased %s", ids(more))
	}
	a := f.failed(jobs[0])
	a.RetryAt = f.clock.Now().Add(time.Hour)
	f.finishJob(a)
	if more := f.lease("std/app", 10, time.Minute); len(more) != 0 {
		t.Fatalf("with a2 blocked leased %s", ids(more))
	}
	// Replaying the blocked head makes it due now: the key goes on.
	if res := f.replay(ReplaySelector{Source: "std", EventIDs: []string{"a2"}}, ReplayOptions{Audit: cliAudit()}); res.Replayed != 1 {
		t.Fatalf("replay a2: %+v", res)
	}
	for _, want := range []string{"[a2]", "[a1]", "[a3]"} {
		jobs = f.lease("std/app", 10, time.Minute)
		if got := ids(jobs); got != want {
			t.Fatalf("lease %s, want %s (the replayed a1 is older than a3)", got, want)
		}
		f.finishJob(f.attempt(jobs[0], hookwarden.Delivered))
	}
}

// flowSlots is a Direct pool that counts what it was asked, per destination.
type flowSlots struct {
	mu            sync.Mutex
	asked, waited map[string]int
}

func (p *flowSlots) Waiting(dest string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waited[dest]++
}

func (p *flowSlots) Reserve(dest string) (hookwarden.Slot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked[dest]++
	return nil, false // nothing handed: the count is the point
}

// testFlowNoDirect: a new job of a destination with a rate or an order, or
// of a paused one, is not handed straight to a slot (the lease applies
// flow control); the pool hears that it waits.
func testFlowNoDirect(t *testing.T, h Harness) {
	f := setup(t, h)
	f.setFlow(hookwarden.FlowPolicy{Destination: "std/rated", Rate: hookwarden.Rate{N: 1, Per: time.Hour}},
		hookwarden.FlowPolicy{Destination: "std/ordered", Ordered: true},
		hookwarden.FlowPolicy{Destination: "std/paused"}, hookwarden.FlowPolicy{Destination: "std/plain"})
	if _, err := f.s.Pause(f.ctx, "std/paused", cliAudit()); err != nil {
		t.Fatal(err)
	}
	p := &flowSlots{asked: map[string]int{}, waited: map[string]int{}}
	f.s.SetDirect(p)
	dests := []string{"std/rated", "std/ordered", "std/paused", "std/plain"}
	for i := range 3 {
		r := f.receipt("std", fmt.Sprint("e", i), `{}`, dests...)
		r.Events[0].OrderKeys = []string{"", "k", "", ""}
		f.mustRecord(r)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range dests[:3] {
		if p.asked[d] != 0 {
			t.Errorf("%s: the pool was asked for a slot %d times, want never", d, p.asked[d])
		}
		// A store that hands jobs over tells the pool one waits instead
		// (hookwarden.Waiter), so that it is leased at once.
		if p.asked["std/plain"] > 0 && p.waited[d] != 3 {
			t.Errorf("%s: the pool heard of %d waiting jobs, want 3", d, p.waited[d])
		}
	}
}
