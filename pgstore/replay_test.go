package pgstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// The operator's writes are checked here with SQL on the rows they leave,
// beside storetest's Replay/*, Retention/* and Quarantine/{Release,Drop},
// which read them back through the Inspector.

// ops is one test's database, its first instance (with the queue's
// helpers) and its clock.
type ops struct {
	*queue
	url string
}

func setupOps(t *testing.T) *ops {
	t.Parallel()
	return newOps(t)
}

// newOps is setupOps for a test that is parallel already.
func newOps(t *testing.T) *ops {
	c := &clock{t: t0}
	url := pgtest.Database(t)
	s := open(t, url, Options{Now: c.Now})
	return &ops{queue: &queue{fixture: &fixture{t: t, s: s}, clock: c, ctx: t.Context()}, url: url}
}

// instance is another store on the same database, on the same clock: a
// second receiver.
func (o *ops) instance() *Store {
	return open(o.t, o.url, Options{Now: o.clock.Now})
}

// kill leases every due job of dest and dead-letters them.
func (o *ops) kill(dest string) int {
	o.t.Helper()
	jobs := o.lease(dest, 10000, time.Minute)
	for _, j := range jobs {
		o.finish(o.attempt(j, hookwarden.Dead))
	}
	return len(jobs)
}

// deliver leases every due job of dest and delivers them.
func (o *ops) deliver(dest string) int {
	o.t.Helper()
	jobs := o.lease(dest, 10000, time.Minute)
	for _, j := range jobs {
		o.finish(o.attempt(j, hookwarden.Delivered))
	}
	return len(jobs)
}

func (o *ops) replay(sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) hookwarden.ReplayResult {
	o.t.Helper()
	res, err := o.s.Replay(o.ctx, sel, opt)
	if err != nil {
		o.t.Fatalf("replay %+v: %v", sel, err)
	}
	return res
}

// skipsOf renders a replay's skips as "event:reason" (unknown jobs as
// "job<id>:not_found").
func skipsOf(res hookwarden.ReplayResult) string {
	var out []string
	for _, k := range res.Skipped {
		what := k.EventID
		if k.JobID != 0 && k.EventID == "" {
			what = fmt.Sprint("job", k.JobID)
		}
		out = append(out, what+":"+k.Reason)
	}
	return fmt.Sprint(out)
}

func cli() *hookwarden.AuditEntry {
	return &hookwarden.AuditEntry{Origin: hookwarden.AuditCLI, Actor: "pgtest"}
}

// auditRow is an audit entry as stored, with the events linked to it.
type auditRow struct {
	Action, Origin, Actor, Args string
	Result                      *string
	ReceiptID                   *int64
	At                          time.Time
	Events                      []string
}

func (o *ops) audit(id int64) auditRow {
	o.t.Helper()
	var a auditRow
	if err := o.s.Pool().QueryRow(o.ctx, `SELECT action, origin, actor, args, result, receipt_id, at,
		COALESCE((SELECT array_agg(source || '/' || event_id ORDER BY source, event_id) FROM audit_events WHERE audit_id = $1), '{}')
		FROM audit WHERE id = $1`, id).Scan(&a.Action, &a.Origin, &a.Actor, &a.Args, &a.Result, &a.ReceiptID, &a.At, &a.Events); err != nil {
		o.t.Fatalf("audit entry %d: %v", id, err)
	}
	return a
}

// TestReplayRules: dead and delivered jobs are reset to pending, due now,
// with the full attempt budget and the dead count kept; unknown events,
// events without jobs, jobs in flight and unknown jobs are reported and
// left alone; the audit entry is written once, with the reset, linked to
// the event.
func TestReplayRules(t *testing.T) {
	o := setupOps(t)
	o.add("std", "e1", `{"e":1}`, "std/app", "std/ops")
	o.add("std", "n", `{}`)
	o.kill("std/app")
	o.deliver("std/ops")
	o.clock.Add(time.Hour)
	now := o.clock.Now()

	res := o.replay(hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"e1", "nope", "n"}},
		hookwarden.ReplayOptions{Audit: cli()})
	if res.Selected != 2 || res.Replayed != 2 || skipsOf(res) != "[nope:not_found n:no_jobs]" || res.AuditID == 0 {
		t.Fatalf("replay: %+v (skips %s), want 2 jobs replayed, nope not found, n without jobs, an audit entry", res, skipsOf(res))
	}
	if d := slices.Sorted(slices.Values(res.Destinations)); fmt.Sprint(d) != "[std/app std/ops]" {
		t.Errorf("destinations to wake: %v", d)
	}
	for dest, dead := range map[string]int{"std/app": 1, "std/ops": 0} {
		j := o.job("std", "e1", dest)
		var finished, replayed *time.Time
		if err := o.s.Pool().QueryRow(o.ctx, `SELECT finished_at, replayed_at FROM jobs WHERE id = $1`, j.ID).Scan(&finished, &replayed); err != nil {
			t.Fatal(err)
		}
		if j.State != "pending" || j.Attempts != 0 || j.DeadCount != dead || !j.NextAt.Equal(now) || j.LeasedUntil != nil ||
			finished != nil || replayed == nil || !replayed.Equal(now) {
			t.Errorf("%s after replay: %v finished %v replayed %v; want pending, due now, attempts 0, dead count %d kept",
				dest, j, finished, replayed, dead)
		}
	}
	a := o.audit(res.AuditID)
	var result hookwarden.ReplayAuditResult
	if a.Result == nil || json.Unmarshal([]byte(*a.Result), &result) != nil {
		t.Fatalf("audit entry without a result: %+v", a)
	}
	if a.Action != "replay" || a.Origin != "cli" || a.Actor != "pgtest" || !a.At.Equal(now) ||
		fmt.Sprint(a.Events) != "[std/e1]" || result != (hookwarden.ReplayAuditResult{Selected: 2, Replayed: 2, Skipped: 2}) ||
		a.Args != `{"source":"std","event_ids":["e1","nope","n"]}` {
		t.Fatalf("audit entry %+v result %+v", a, result)
	}

	// In flight: left to finish; nothing reset, no audit entry.
	jobs := o.lease("std/app", 5, time.Minute)
	if len(jobs) != 1 || jobs[0].Attempt != 1 || jobs[0].DeadCount != 1 {
		t.Fatalf("lease after replay: %+v, want attempt 1 with the dead count kept", jobs)
	}
	entries := o.count(`SELECT count(*) FROM audit`)
	res = o.replay(hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"e1"}, Destination: "std/app"},
		hookwarden.ReplayOptions{Audit: cli()})
	if res.Replayed != 0 || skipsOf(res) != "[e1:in_flight]" || res.AuditID != 0 {
		t.Fatalf("replay of a job in flight: %+v (skips %s)", res, skipsOf(res))
	}
	if j := o.job("std", "e1", "std/app"); j.Attempts != 1 || j.LeasedUntil == nil {
		t.Fatalf("the job in flight was changed: %v", j)
	}
	if n := o.count(`SELECT count(*) FROM audit`); n != entries {
		t.Fatalf("a replay that reset nothing wrote an audit entry (%d entries, want %d)", n, entries)
	}
	// The lease expired (its process died): no longer in flight.
	o.clock.Add(2 * time.Minute)
	if res := o.replay(hookwarden.ReplaySelector{JobIDs: []int64{jobs[0].ID}}, hookwarden.ReplayOptions{}); res.Replayed != 1 {
		t.Fatalf("replay of an expired lease: %+v, want replayed", res)
	}
	if j := o.job("std", "e1", "std/app"); j.Attempts != 0 || j.LeasedUntil != nil || !j.NextAt.Equal(o.clock.Now()) {
		t.Fatalf("after replaying an expired lease: %v", j)
	}
	if res := o.replay(hookwarden.ReplaySelector{JobIDs: []int64{1 << 40}}, hookwarden.ReplayOptions{}); res.Replayed != 0 ||
		skipsOf(res) != fmt.Sprintf("[job%d:not_found]", int64(1<<40)) {
		t.Fatalf("replay of an unknown job: %+v (skips %s)", res, skipsOf(res))
	}
	for _, sel := range []hookwarden.ReplaySelector{{}, {EventIDs: []string{"e1"}}, {Dead: true, JobIDs: []int64{1}}} {
		if _, err := o.s.Replay(o.ctx, sel, hookwarden.ReplayOptions{}); err == nil {
			t.Errorf("replay of %+v: no error", sel)
		}
	}
}

// TestReplayThreeStrikes: a job dead-lettered ForceAfter times is reset
// only with Force, by every selector.
func TestReplayThreeStrikes(t *testing.T) {
	o := setupOps(t)
	o.add("std", "poison", `{}`, "std/app")
	for strike := 1; strike <= hookwarden.ForceAfter; strike++ {
		o.kill("std/app")
		if strike < hookwarden.ForceAfter {
			if res := o.replay(hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{}); res.Replayed != 1 {
				t.Fatalf("replay after strike %d: %+v", strike, res)
			}
		}
	}
	j := o.job("std", "poison", "std/app")
	if j.State != "dead" || j.DeadCount != hookwarden.ForceAfter {
		t.Fatalf("after %d strikes: %v", hookwarden.ForceAfter, j)
	}
	for _, sel := range []hookwarden.ReplaySelector{{Dead: true}, {Source: "std", EventIDs: []string{"poison"}}, {JobIDs: []int64{j.ID}}} {
		res := o.replay(sel, hookwarden.ReplayOptions{})
		if res.Replayed != 0 || skipsOf(res) != "[poison:needs_force]" || res.Skipped[0].DeadCount != hookwarden.ForceAfter {
			t.Fatalf("replay %+v without force: %+v (skips %s)", sel, res, skipsOf(res))
		}
	}
	if j := o.job("std", "poison", "std/app"); j.State != "dead" {
		t.Fatalf("replayed without force: %v", j)
	}
	res := o.replay(hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{Force: true, Audit: cli()})
	if res.Replayed != 1 || fmt.Sprint(res.Destinations) != "[std/app]" || res.AuditID == 0 {
		t.Fatalf("replay with force: %+v", res)
	}
	if a := o.audit(res.AuditID); a.Args != `{"dead":true,"force":true}` {
		t.Errorf("audit args %s", a.Args)
	}
	if j := o.job("std", "poison", "std/app"); j.State != "pending" || j.Attempts != 0 || j.DeadCount != hookwarden.ForceAfter {
		t.Fatalf("after a forced replay: %v", j)
	}
}

// TestReplayDeadFilters: the dead-letter selector keeps only the source,
// destination and time asked for.
func TestReplayDeadFilters(t *testing.T) {
	o := setupOps(t)
	o.add("std", "a1", `{}`, "std/a")
	o.add("std", "b1", `{}`, "std/b")
	o.add("gh", "g1", `{}`, "gh/a")
	for _, d := range []string{"std/a", "std/b", "gh/a"} {
		o.kill(d)
	}
	o.clock.Add(time.Hour)
	since := o.clock.Now()
	o.add("std", "a2", `{}`, "std/a")
	o.kill("std/a")

	for _, c := range []struct {
		sel  hookwarden.ReplaySelector
		want string
	}{
		{hookwarden.ReplaySelector{Dead: true, Source: "std", Since: since}, "[a2]"},
		{hookwarden.ReplaySelector{Dead: true, Destination: "std/b"}, "[b1]"},
		{hookwarden.ReplaySelector{Dead: true, Source: "gh"}, "[g1]"},
		{hookwarden.ReplaySelector{Dead: true, Source: "std", Destination: "std/a"}, "[a1]"}, // a2 is pending now
		{hookwarden.ReplaySelector{Dead: true}, "[]"},
	} {
		res := o.replay(c.sel, hookwarden.ReplayOptions{})
		var got []string
		rows, err := o.s.Pool().Query(o.ctx, `SELECT e.event_id FROM jobs j JOIN events e ON e.id = j.event_ref
			WHERE j.state = 'pending' AND j.replayed_at IS NOT NULL AND j.attempts = 0 ORDER BY j.id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		rows.Close()
		// Each case's jobs are leased away afterwards, so only its own show.
		if fmt.Sprint(got) != c.want || res.Replayed != len(got) {
			t.Errorf("replay %+v: %+v, reset %v, want %s", c.sel, res, got, c.want)
		}
		o.lease("std/a", 100, time.Hour)
		o.lease("std/b", 100, time.Hour)
		o.lease("gh/a", 100, time.Hour)
		if _, err := o.s.Pool().Exec(o.ctx, `UPDATE jobs SET replayed_at = NULL`); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplayBatches: a replay larger than its batch size commits batch
// by batch, reports its progress, and keeps one audit entry whose result
// and event links follow every batch.
func TestReplayBatches(t *testing.T) {
	o := setupOps(t)
	for i := range 7 {
		o.add("std", fmt.Sprint("e", i), `{}`, "std/app")
	}
	o.kill("std/app")
	var progress []string
	res := o.replay(hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{BatchSize: 3, Pause: time.Millisecond,
		Audit: cli(), Progress: func(done, total int) { progress = append(progress, fmt.Sprintf("%d/%d", done, total)) }})
	if res.Selected != 7 || res.Replayed != 7 || len(res.Skipped) != 0 || res.AuditID == 0 {
		t.Fatalf("replay: %+v", res)
	}
	if fmt.Sprint(progress) != "[3/7 6/7 7/7]" {
		t.Errorf("progress %v, want one call per batch", progress)
	}
	if n := o.count(`SELECT count(*) FROM audit`); n != 1 {
		t.Fatalf("%d audit entries, want 1 for the whole replay", n)
	}
	a := o.audit(res.AuditID)
	if len(a.Events) != 7 || a.Result == nil || *a.Result != `{"selected":7,"replayed":7,"skipped":0}` {
		t.Fatalf("audit entry %+v (result %v), want the 7 events and the final counts", a, *a.Result)
	}
	if n := o.count(`SELECT count(*) FROM jobs WHERE state = 'pending' AND attempts = 0`); n != 7 {
		t.Fatalf("%d jobs reset, want 7", n)
	}
}

// TestReplayConcurrentInstances: two instances replaying the same dead
// letters in small batches while a third leases them: no deadlock, no
// error, and a job leased is never reset under its lease (the batch's
// row locks order each replay against each lease).
func TestReplayConcurrentInstances(t *testing.T) {
	o := setupOps(t)
	const n = 200
	for i := range n {
		o.add("std", fmt.Sprint("e", i), `{}`, "std/app")
	}
	if got := o.kill("std/app"); got != n {
		t.Fatalf("dead-lettered %d, want %d", got, n)
	}
	a, b, c := o.instance(), o.instance(), o.instance()
	var results [2]hookwarden.ReplayResult
	var errs [3]error
	leased := map[int64]bool{}
	start := make(chan struct{})
	stop := make(chan struct{})
	var wg, replays sync.WaitGroup
	for i, s := range []*Store{a, b} {
		replays.Go(func() {
			<-start
			results[i], errs[i] = s.Replay(o.ctx, hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{BatchSize: 7, Pause: time.Microsecond})
		})
	}
	wg.Go(func() {
		<-start
		for {
			jobs, err := c.Lease(o.ctx, "std/app", 5, time.Hour)
			if err != nil {
				errs[2] = err
				return
			}
			for _, j := range jobs {
				leased[j.ID] = true
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	close(start)
	replays.Wait()
	close(stop)
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	if results[0].Replayed+results[1].Replayed < n {
		t.Fatalf("replayed %d + %d, want every one of %d at least once", results[0].Replayed, results[1].Replayed, n)
	}
	for _, r := range results {
		for _, k := range r.Skipped {
			if k.Reason != hookwarden.SkipInFlight {
				t.Fatalf("skip %+v: only jobs leased meanwhile may be skipped", k)
			}
		}
	}
	if n := o.count(`SELECT count(*) FROM jobs WHERE state <> 'pending'`); n != 0 {
		t.Fatalf("%d jobs not pending after the replays", n)
	}
	for id := range leased {
		var attempts int
		var until *time.Time
		if err := o.s.Pool().QueryRow(o.ctx, `SELECT attempts, leased_until FROM jobs WHERE id = $1`, id).Scan(&attempts, &until); err != nil {
			t.Fatal(err)
		}
		if attempts != 1 || until == nil {
			t.Fatalf("job %d was leased, then reset under its lease: attempts %d, leased until %v", id, attempts, until)
		}
	}
}

// TestReplayLeaseBetweenCheckAndReset: another instance leasing a job
// while a replay batch has checked it and not yet reset it either waits
// for the batch or skips the job: it never holds a lease the reset then
// wipes.
func TestReplayLeaseBetweenCheckAndReset(t *testing.T) {
	o := setupOps(t)
	o.add("std", "e1", `{}`, "std/app")
	o.kill("std/app")
	other := o.instance()
	var leased []hookwarden.Job
	var leaseErr error
	o.s.testReplayChecked = func() {
		o.s.testReplayChecked = nil
		leased, leaseErr = other.Lease(o.ctx, "std/app", 5, time.Hour)
	}
	// The job is dead: not leasable. Make it pending, idle, to race.
	if _, err := o.s.Pool().Exec(o.ctx, `UPDATE jobs SET state = 'pending', finished_at = NULL`); err != nil {
		t.Fatal(err)
	}
	res := o.replay(hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"e1"}}, hookwarden.ReplayOptions{})
	if leaseErr != nil {
		t.Fatal(leaseErr)
	}
	j := o.job("std", "e1", "std/app")
	if len(leased) != 0 {
		t.Fatalf("leased %+v while the replay held the job; after the reset: %v", leased, j)
	}
	if res.Replayed != 1 || j.Attempts != 0 || j.LeasedUntil != nil {
		t.Fatalf("replay %+v, job %v: want it reset", res, j)
	}
}
