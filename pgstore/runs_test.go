package pgstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// cluster is one database and the instances sharing it, on one clock.
type cluster struct {
	t     *testing.T
	url   string
	clock *clock
}

func newCluster(t *testing.T) *cluster {
	t.Parallel()
	return &cluster{t: t, url: pgtest.Database(t), clock: &clock{t: t0}}
}

// instance opens a store named name on the cluster's database.
func (c *cluster) instance(name string) *runner {
	return &runner{t: c.t, s: open(c.t, c.url, Options{Instance: name, Now: c.clock.Now})}
}

type runner struct {
	t *testing.T
	s *Store
}

func (r *runner) start() int64 {
	r.t.Helper()
	id, err := r.s.StartRun(context.Background(), "test")
	if err != nil {
		r.t.Fatalf("start run: %v", err)
	}
	return id
}

func (r *runner) beat(run int64) {
	r.t.Helper()
	if err := r.s.Heartbeat(context.Background(), run); err != nil {
		r.t.Fatalf("heartbeat: %v", err)
	}
}

func (r *runner) stop(run int64) {
	r.t.Helper()
	if err := r.s.StopRun(context.Background(), run); err != nil {
		r.t.Fatalf("stop run: %v", err)
	}
}

func (r *runner) gaps(opt hookwarden.GapOptions) hookwarden.GapReport {
	r.t.Helper()
	rep, err := r.s.Gaps(context.Background(), opt)
	if err != nil {
		r.t.Fatalf("gaps: %v", err)
	}
	return rep
}

// TestGapsCrashWindow mirrors storetest's Gaps/CrashWindow on one instance.
func TestGapsCrashWindow(t *testing.T) {
	c := newCluster(t)
	a := c.instance("a")
	run1 := a.start()
	c.clock.Add(5 * time.Second)
	a.beat(run1)
	c.clock.Add(10*time.Minute - 5*time.Second) // run1 died after its heartbeat
	run2 := a.start()
	rep := a.gaps(hookwarden.GapOptions{})
	if rep.Runs != 2 || len(rep.Outages) != 1 {
		t.Fatalf("gaps: %+v, want 2 runs and one outage", rep)
	}
	if o := rep.Outages[0]; o.Kind != "outage" || !o.Crash || o.Open || !o.Start.Equal(t0.Add(5*time.Second)) ||
		!o.End.Equal(t0.Add(10*time.Minute)) || o.Length != 10*time.Minute-5*time.Second || o.LengthSeconds != 595 ||
		o.RunBefore != run1 || o.RunAfter != run2 {
		t.Fatalf("crash window %+v, want an outage from run1's last heartbeat (+5s) to run2's start (+10m)", o)
	}

	c.clock.Add(time.Minute)
	a.stop(run2) // +11m
	c.clock.Add(time.Hour)
	rep = a.gaps(hookwarden.GapOptions{Sources: []hookwarden.SourcePolicy{{Name: "std", RetryHorizon: 30 * time.Minute},
		{Name: "patient", RetryHorizon: 72 * time.Hour}}})
	if len(rep.Outages) != 2 {
		t.Fatalf("gaps after a clean stop: %+v, want the crash window and an open one", rep.Outages)
	}
	if o := rep.Outages[1]; !o.Open || o.Crash || !o.Start.Equal(t0.Add(11*time.Minute)) || o.Length != time.Hour ||
		fmt.Sprint(o.BeyondRetryHorizon) != "[std]" {
		t.Fatalf("window since the clean stop %+v, want open, not a crash, 1h, beyond std's horizon", o)
	}
	runs, err := a.s.Runs(context.Background())
	if err != nil || len(runs) != 2 || runs[0].ID != run1 || !runs[0].StoppedAt.IsZero() ||
		!runs[1].StoppedAt.Equal(t0.Add(11*time.Minute)) || runs[1].Version != "test" || runs[1].PID == 0 {
		t.Fatalf("runs: %+v %v", runs, err)
	}

	run3 := a.start()
	c.clock.Add(5 * time.Second)
	a.beat(run3)
	if rep := a.gaps(hookwarden.GapOptions{Stale: 10 * time.Second}); len(rep.Outages) != 2 || rep.Outages[1].Open {
		t.Fatalf("gaps with run3 alive: %+v, want two closed windows", rep.Outages)
	}
	c.clock.Add(time.Minute)
	rep = a.gaps(hookwarden.GapOptions{Stale: 10 * time.Second})
	if len(rep.Outages) != 3 {
		t.Fatalf("gaps after run3 died: %+v, want three windows", rep.Outages)
	}
	if o := rep.Outages[2]; !o.Open || !o.Crash || o.Length != time.Minute || o.RunBefore != run3 {
		t.Fatalf("window since run3 died %+v, want open, a crash, 1m from its last heartbeat", o)
	}
	// Since drops the closed windows that ended before it, never the open one.
	rep = a.gaps(hookwarden.GapOptions{Stale: 10 * time.Second, Since: t0.Add(30 * time.Minute)})
	if len(rep.Outages) != 2 || !rep.Outages[0].Start.Equal(t0.Add(11*time.Minute)) || !rep.Outages[1].Open {
		t.Fatalf("gaps since +30m: %+v, want the window ending at +71m and the open one", rep.Outages)
	}
}

// TestGapsCleanRestart mirrors storetest's Gaps/CleanRestart: a deploy is
// no outage, nor is a live run.
func TestGapsCleanRestart(t *testing.T) {
	c := newCluster(t)
	a := c.instance("a")
	run1 := a.start()
	c.clock.Add(30 * time.Second)
	a.beat(run1)
	c.clock.Add(30 * time.Second)
	a.stop(run1)
	c.clock.Add(2 * time.Second)
	run2 := a.start()
	if rep := a.gaps(hookwarden.GapOptions{}); rep.Runs != 2 || len(rep.Outages) != 0 {
		t.Fatalf("gaps after a restart: %+v, want no outage", rep)
	}
	c.clock.Add(5 * time.Second)
	a.beat(run2)
	if rep := a.gaps(hookwarden.GapOptions{}); len(rep.Outages) != 0 {
		t.Fatalf("gaps with a live run: %+v, want no outage", rep)
	}
	// The same restart with a longer pause than MinClean is listed.
	c.clock.Add(time.Second)
	a.stop(run2)
	c.clock.Add(6 * time.Second)
	a.start()
	if rep := a.gaps(hookwarden.GapOptions{}); len(rep.Outages) != 1 || rep.Outages[0].Crash || rep.Outages[0].Length != 6*time.Second {
		t.Fatalf("gaps after a 6s stop: %+v, want one clean 6s outage", rep.Outages)
	}
}

// TestGapsSilences mirrors storetest's Gaps/Silences over the receipts
// table, requests coming through two instances.
func TestGapsSilences(t *testing.T) {
	c := newCluster(t)
	a, b := c.instance("a"), c.instance("b")
	rec := func(in *runner, id string) {
		t.Helper()
		r := receipt("std", id, `{"id":"`+id+`"}`)
		r.ReceivedAt = c.clock.Now()
		if _, err := in.s.Record(context.Background(), r); err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
	}
	runA, runB := a.start(), b.start()
	rec(a, "s0")
	c.clock.Add(time.Minute)
	rec(b, "s1")
	c.clock.Add(3*time.Hour + 29*time.Minute)
	rec(a, "s2") // +3h30m
	c.clock.Add(30 * time.Minute)
	a.beat(runA) // now +4h
	b.beat(runB)
	rep := b.gaps(hookwarden.GapOptions{Sources: []hookwarden.SourcePolicy{
		{Name: "std", RetryHorizon: 2 * time.Hour, ExpectWithin: time.Hour},
		{Name: "quiet", RetryHorizon: 72 * time.Hour, ExpectWithin: time.Hour},
		{Name: "unchecked", RetryHorizon: time.Hour},
	}})
	if len(rep.Outages) != 0 {
		t.Fatalf("outages: %+v, want none", rep.Outages)
	}
	bySource := map[string][]string{}
	for _, s := range rep.Silences {
		end := "open"
		if !s.Open {
			end = fmt.Sprint(s.End.Sub(t0))
		}
		bySource[s.Source] = append(bySource[s.Source], fmt.Sprintf("%v-%s beyond=%v", s.Start.Sub(t0), end, s.BeyondRetryHorizon))
	}
	want := "map[quiet:[0s-open beyond=false] std:[1m0s-3h30m0s beyond=true]]"
	if got := fmt.Sprint(bySource); got != want {
		t.Fatalf("silences %s, want %s", got, want)
	}
	// Since after the silence: std's long gap ended before it is not
	// reported; quiet is silent since Since.
	rep = b.gaps(hookwarden.GapOptions{Since: t0.Add(3 * time.Hour), Sources: []hookwarden.SourcePolicy{
		{Name: "std", RetryHorizon: 2 * time.Hour, ExpectWithin: time.Hour},
		{Name: "quiet", RetryHorizon: 72 * time.Hour, ExpectWithin: 30 * time.Minute},
	}})
	if len(rep.Silences) != 1 || rep.Silences[0].Source != "quiet" || !rep.Silences[0].Start.Equal(t0.Add(3*time.Hour)) ||
		!rep.Silences[0].Open || rep.Silences[0].Length != time.Hour {
		t.Fatalf("silences since +3h: %+v, want quiet's, open, 1h", rep.Silences)
	}
}

// TestGapsOverlappingInstances: two instances whose runs overlap, one
// starting between the other's heartbeats and each stopping while the
// other serves, leave no outage and no restart.
func TestGapsOverlappingInstances(t *testing.T) {
	c := newCluster(t)
	a, b := c.instance("a"), c.instance("b")
	runA := a.start()
	c.clock.Add(5 * time.Second)
	a.beat(runA)
	c.clock.Add(3 * time.Second) // between a's heartbeats
	runB := b.start()
	if rep := b.gaps(hookwarden.GapOptions{}); rep.Runs != 2 || len(rep.Outages) != 0 {
		t.Fatalf("gaps with a and b up: %+v, want no outage", rep)
	}
	c.clock.Add(2 * time.Second)
	a.beat(runA)
	c.clock.Add(time.Hour)
	b.beat(runB)
	a.stop(runA) // a leaves for good; b serves on
	c.clock.Add(5 * time.Second)
	b.beat(runB)
	if rep := b.gaps(hookwarden.GapOptions{}); len(rep.Outages) != 0 {
		t.Fatalf("gaps after a left while b served: %+v, want no outage", rep.Outages)
	}
	runs, err := a.s.Runs(context.Background())
	if err != nil || len(runs) != 2 || runs[0].ID != runA || runs[1].ID != runB {
		t.Fatalf("runs of both instances: %+v %v", runs, err)
	}
	var instances []string
	rows, err := a.s.Pool().Query(context.Background(), `SELECT instance FROM runs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var in string
		if err := rows.Scan(&in); err != nil {
			t.Fatal(err)
		}
		instances = append(instances, in)
	}
	if rows.Err() != nil || fmt.Sprint(instances) != "[a b]" {
		t.Fatalf("instances %v %v, want [a b]", instances, rows.Err())
	}
}

// TestGapsRestartWhileOthersServe: instance a crashes and comes back while
// b serves: one "restart" entry, no outage, nothing beyond a retry horizon;
// a clean quick restart of a is hidden like a deploy.
func TestGapsRestartWhileOthersServe(t *testing.T) {
	c := newCluster(t)
	a, b := c.instance("a"), c.instance("b")
	runB := b.start()
	runA1 := a.start()
	c.clock.Add(5 * time.Second)
	a.beat(runA1) // a dies after this heartbeat, at +5s
	b.beat(runB)
	for range 12 { // b serves on for a minute
		c.clock.Add(5 * time.Second)
		b.beat(runB)
	}
	runA2 := a.start() // +65s
	opt := hookwarden.GapOptions{Sources: []hookwarden.SourcePolicy{{Name: "std", RetryHorizon: time.Second}}}
	rep := b.gaps(opt)
	if len(rep.Outages) != 1 {
		t.Fatalf("gaps: %+v, want one restart", rep.Outages)
	}
	if o := rep.Outages[0]; o.Kind != "restart" || !o.Crash || o.Open || !o.Start.Equal(t0.Add(5*time.Second)) ||
		!o.End.Equal(t0.Add(65*time.Second)) || o.Length != time.Minute || o.LengthSeconds != 60 ||
		o.RunBefore != runA1 || o.RunAfter != runA2 || len(o.BeyondRetryHorizon) != 0 {
		t.Fatalf("restart %+v, want a's crash restart from +5s to +65s, nothing beyond a horizon", o)
	}

	// A clean stop and start of a 2s later while b serves: hidden (MinClean).
	c.clock.Add(5 * time.Second)
	b.beat(runB)
	a.stop(runA2)
	c.clock.Add(2 * time.Second)
	runA3 := a.start()
	if rep := b.gaps(opt); len(rep.Outages) != 1 || rep.Outages[0].RunAfter != runA2 {
		t.Fatalf("gaps after a's deploy: %+v, want only the crash restart", rep.Outages)
	}
	// A longer clean stop of a is a restart too, not an outage.
	a.stop(runA3)
	b.beat(runB)
	c.clock.Add(30 * time.Second)
	b.beat(runB)
	runA4 := a.start()
	rep = b.gaps(opt)
	if len(rep.Outages) != 2 {
		t.Fatalf("gaps after a's 30s stop: %+v, want two restarts", rep.Outages)
	}
	if o := rep.Outages[1]; o.Kind != "restart" || o.Crash || o.Length != 30*time.Second || o.RunBefore != runA3 || o.RunAfter != runA4 {
		t.Fatalf("second restart %+v, want a's clean 30s restart", o)
	}
}

// TestGapsAllDown: both instances down for a while is one outage, from
// the last heartbeat of either to the next start, whichever instance
// starts; the restart of an instance that began with no one up is that
// outage, not a restart.
func TestGapsAllDown(t *testing.T) {
	c := newCluster(t)
	a, b := c.instance("a"), c.instance("b")
	runA, runB := a.start(), b.start()
	c.clock.Add(5 * time.Second)
	a.beat(runA) // a dies at +5s
	c.clock.Add(5 * time.Second)
	b.beat(runB) // b dies at +10s: the last heartbeat
	c.clock.Add(20 * time.Minute)
	// Both dead by now: the window is open.
	opt := hookwarden.GapOptions{Sources: []hookwarden.SourcePolicy{{Name: "std", RetryHorizon: 10 * time.Minute},
		{Name: "patient", RetryHorizon: time.Hour}}}
	rep := a.gaps(opt)
	if len(rep.Outages) != 1 || !rep.Outages[0].Open || !rep.Outages[0].Crash || !rep.Outages[0].Start.Equal(t0.Add(10*time.Second)) ||
		rep.Outages[0].RunBefore != runB {
		t.Fatalf("gaps with both down: %+v, want one open crash outage since b's last heartbeat", rep.Outages)
	}
	runA2 := a.start() // +20m10s
	c.clock.Add(time.Second)
	runB2 := b.start()
	rep = a.gaps(opt)
	if len(rep.Outages) != 1 {
		t.Fatalf("gaps: %+v, want one outage", rep.Outages)
	}
	if o := rep.Outages[0]; o.Kind != "outage" || !o.Crash || o.Open || !o.Start.Equal(t0.Add(10*time.Second)) ||
		!o.End.Equal(t0.Add(20*time.Minute+10*time.Second)) || o.Length != 20*time.Minute || o.RunBefore != runB ||
		o.RunAfter != runA2 || fmt.Sprint(o.BeyondRetryHorizon) != "[std]" {
		t.Fatalf("outage %+v, want from b's last heartbeat (+10s) to a's start (+20m10s), beyond std's horizon", o)
	}
	if rep.Runs != 4 || runB2 == 0 {
		t.Fatalf("runs %d, want 4", rep.Runs)
	}
}

// TestGapsDatabaseClock: without Options.Now, runs and gaps use the
// database's clock.
func TestGapsDatabaseClock(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	r := &runner{t: t, s: open(t, url, Options{Instance: "a"})}
	var before time.Time
	if err := r.s.Pool().QueryRow(context.Background(), `SELECT now()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	run := r.start()
	r.beat(run)
	rep := r.gaps(hookwarden.GapOptions{})
	runs, err := r.s.Runs(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %+v %v", runs, err)
	}
	if runs[0].StartedAt.Before(before) || runs[0].HeartbeatAt.Before(runs[0].StartedAt) || rep.Now.Before(runs[0].HeartbeatAt) {
		t.Fatalf("times: db before %v, run %+v, gaps now %v: want non-decreasing on the database's clock", before, runs[0], rep.Now)
	}
	if len(rep.Outages) != 0 {
		t.Fatalf("gaps with a live run: %+v", rep.Outages)
	}
}
