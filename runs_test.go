package hookwarden

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// run is a run of instance in from start to beat (its last heartbeat),
// stopped cleanly at stop (<0: no stop).
func run(id int64, in string, start, beat, stop float64) Run {
	r := Run{ID: id, Instance: in, StartedAt: at(start), HeartbeatAt: at(beat)}
	if stop >= 0 {
		r.StoppedAt = at(stop)
	}
	return r
}

// describe writes an outage as "kind start-end runBefore>runAfter flags",
// times in seconds after t0, the end "open" for an open window.
func describe(o Outage) string {
	end := "open"
	if !o.Open {
		end = fmt.Sprint(o.End.Sub(t0).Seconds())
	}
	s := fmt.Sprintf("%s %v-%s %d>%d", o.Kind, o.Start.Sub(t0).Seconds(), end, o.RunBefore, o.RunAfter)
	if o.Crash {
		s += " crash"
	}
	if len(o.BeyondRetryHorizon) > 0 {
		s += " beyond=" + strings.Join(o.BeyondRetryHorizon, ",")
	}
	if o.LengthSeconds != o.Length.Seconds() || (o.Open && !o.End.IsZero()) {
		s += " BAD"
	}
	return s
}

func TestOutages(t *testing.T) {
	std := []SourcePolicy{{Name: "std", RetryHorizon: 30 * time.Second}, {Name: "patient", RetryHorizon: time.Hour}}
	for _, c := range []struct {
		name string
		runs []Run
		now  float64
		opt  GapOptions
		want []string
	}{
		{name: "no runs", now: 100, want: nil},
		{
			name: "overlapping runs leave no window between them",
			runs: []Run{run(1, "", 0, 100, 100), run(2, "", 50, 200, 200), run(3, "", 300, 400, 400)},
			now:  400,
			want: []string{"outage 200-300 2>3"},
		},
		{
			name: "a run that ends inside another leaves the longer one's end",
			runs: []Run{run(1, "", 0, 500, 500), run(2, "", 10, 20, 20), run(3, "", 600, 700, 700)},
			now:  700,
			want: []string{"outage 500-600 1>3"},
		},
		{
			name: "a crash: from the last heartbeat to the next start, listed however short",
			runs: []Run{run(1, "", 0, 5, -1), run(2, "", 7, 100, 100)},
			now:  100,
			want: []string{"outage 5-7 1>2 crash"},
		},
		{
			name: "a clean stop below MinClean is a deploy",
			runs: []Run{run(1, "", 0, 60, 60), run(2, "", 62, 100, 100)},
			now:  100,
			want: nil,
		},
		{
			name: "a clean stop at or above MinClean is listed",
			runs: []Run{run(1, "", 0, 60, 60), run(2, "", 65, 100, 100), run(3, "", 200, 300, 300)},
			now:  300,
			opt:  GapOptions{Sources: std},
			want: []string{"outage 60-65 1>2", "outage 100-200 2>3 beyond=std"},
		},
		{
			name: "MinClean set by the caller",
			runs: []Run{run(1, "", 0, 60, 60), run(2, "", 65, 100, 100)},
			now:  100,
			opt:  GapOptions{MinClean: time.Minute},
			want: nil,
		},
		{
			name: "a stop after the last heartbeat ends the run",
			runs: []Run{run(1, "", 0, 58, 60), run(2, "", 70, 100, 100)},
			now:  100,
			want: []string{"outage 60-70 1>2"},
		},
		{
			name: "open window since a clean stop",
			runs: []Run{run(1, "", 0, 60, 60)},
			now:  3660,
			opt:  GapOptions{Sources: std},
			want: []string{"outage 60-open 1>0 beyond=std"},
		},
		{
			name: "open window since a run whose heartbeat went stale",
			runs: []Run{run(1, "", 0, 60, -1)},
			now:  71,
			want: []string{"outage 60-open 1>0 crash"},
		},
		{
			name: "a live run is up until now: no window",
			runs: []Run{run(1, "", 0, 60, -1)},
			now:  70,
			want: nil,
		},
		{
			name: "another instance's run starting between a live run's heartbeats is no window",
			runs: []Run{run(1, "a", 0, 97, -1), run(2, "b", 99, 99, -1)},
			now:  100,
			want: nil,
		},
		{
			name: "a later run of the same instance proves the one before it died, heartbeat fresh or not",
			runs: []Run{run(1, "", 0, 97, -1), run(2, "", 99, 99, -1)},
			now:  100,
			want: []string{"outage 97-99 1>2 crash"},
		},
		{
			name: "Stale set by the caller",
			runs: []Run{run(1, "", 0, 60, -1)},
			now:  90,
			opt:  GapOptions{Stale: time.Minute},
			want: nil,
		},
		{
			name: "Since drops windows that ended before it, never an open one",
			runs: []Run{run(1, "", 0, 5, -1), run(2, "", 100, 200, 200), run(3, "", 300, 400, 400)},
			now:  1000,
			opt:  GapOptions{Since: at(300)},
			want: []string{"outage 200-300 2>3", "outage 400-open 3>0"},
		},
		{
			name: "Since after every closed window",
			runs: []Run{run(1, "", 0, 5, -1), run(2, "", 100, 200, 200), run(3, "", 300, 400, -1)},
			now:  402,
			opt:  GapOptions{Since: at(301)},
			want: nil,
		},
		{
			name: "a restart covered by another instance: no outage, never beyond a horizon",
			runs: []Run{run(1, "b", 0, 118, -1), run(2, "a", 0, 5, -1), run(3, "a", 65, 118, -1)},
			now:  120,
			opt:  GapOptions{Sources: std},
			want: []string{"restart 5-65 2>3 crash"},
		},
		{
			name: "a clean restart while another serves: MinClean applies",
			runs: []Run{run(1, "b", 0, 200, 200), run(2, "a", 0, 60, 60), run(3, "a", 62, 100, 100),
				run(4, "a", 130, 200, 200)},
			now:  200,
			want: []string{"restart 100-130 3>4"},
		},
		{
			name: "a restart with a hole is the outage, not a restart",
			runs: []Run{run(1, "a", 0, 10, 10), run(2, "b", 0, 20, 20), run(3, "a", 100, 200, 200)},
			now:  200,
			want: []string{"outage 20-100 2>3"},
		},
		{
			name: "a restart covered by a chain of other runs",
			runs: []Run{run(1, "a", 0, 10, -1), run(2, "b", 5, 30, 30), run(3, "c", 30, 50, 50), run(4, "a", 40, 60, 60)},
			now:  60,
			want: []string{"restart 10-40 1>4 crash"},
		},
		{
			name: "a restart whose cover breaks for a moment",
			runs: []Run{run(1, "a", 0, 10, -1), run(2, "b", 5, 30, -1), run(3, "c", 31, 50, 50), run(4, "a", 40, 60, 60)},
			now:  60,
			want: []string{"outage 30-31 2>3 crash"},
		},
		{
			name: "two processes under one name: each start pairs with the one that ended last before it",
			runs: []Run{run(1, "a", 0, 50, 50), run(2, "a", 10, 30, 30), run(3, "a", 40, 80, 80), run(4, "a", 70, 90, 90)},
			now:  90,
			// 3 pairs with 2 (ended at 30, while 1 served), 4 with 1 (ended at 50, while 3 served).
			want: []string{"restart 30-40 2>3", "restart 50-70 1>4"},
		},
		{
			name: "runs given out of order",
			runs: []Run{run(3, "", 300, 400, 400), run(1, "", 0, 100, 100), run(2, "", 50, 200, 200)},
			now:  400,
			want: []string{"outage 200-300 2>3"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.runs)
			got := []string{}
			for _, o := range Outages(c.runs, at(c.now), c.opt) {
				got = append(got, describe(o))
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) || (c.want == nil && len(got) != 0) {
				t.Errorf("outages:\n got %q\nwant %q", got, c.want)
			}
			if !slices.Equal(in, c.runs) {
				t.Errorf("Outages changed its argument: %v", c.runs)
			}
		})
	}
}

func TestGapsOf(t *testing.T) {
	runs := []Run{run(1, "", 0, 5, -1), run(2, "", 65, 100, 100)}
	rep := GapsOf(runs, at(200), GapOptions{})
	if !rep.Now.Equal(at(200)) || rep.Runs != 2 || len(rep.Outages) != 2 || rep.Silences == nil || len(rep.Silences) != 0 {
		t.Fatalf("report %+v, want now, 2 runs, two outages and an empty (not nil) silences list", rep)
	}
	if rep := GapsOf(nil, at(0), GapOptions{}); rep.Outages == nil || len(rep.Outages) != 0 {
		t.Fatalf("no runs: %+v, want an empty (not nil) outages list", rep)
	}
}

// TestOutagesAsTheQuadraticWalk checks Outages against the walk PostgreSQL's
// store used before (each restart's cover found by walking every run again)
// on random run logs of a few instances.
func TestOutagesAsTheQuadraticWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 3000 {
		var runs []Run
		for i := range 1 + rng.IntN(8) {
			start := float64(rng.IntN(200))
			beat := start + float64(rng.IntN(60))
			stop := -1.0
			if rng.IntN(2) == 0 {
				stop = beat + float64(rng.IntN(3))
			}
			runs = append(runs, run(int64(i+1), string(rune('a'+rng.IntN(3))), start, beat, stop))
		}
		slices.SortStableFunc(runs, func(a, b Run) int { return a.StartedAt.Compare(b.StartedAt) })
		now := at(float64(200 + rng.IntN(80)))
		opt := GapOptions{Since: at(float64(rng.IntN(150)))}
		got, want := Outages(runs, now, opt), quadraticOutages(runs, now, opt)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("case %d: runs %+v now %v\n got %+v\nwant %+v", n, runs, now.Sub(t0), got, want)
		}
	}
}

// quadraticOutages is pgstore's Gaps and restarts as they were before
// Outages, for runs in start order.
func quadraticOutages(runs []Run, now time.Time, opt GapOptions) []Outage {
	opt = opt.withDefaults()
	// As pgstore's, but for the rule Outages adds: a later run of the same
	// instance ends the one before at its last heartbeat.
	superseded := map[int64]bool{}
	for _, r := range runs {
		for _, o := range runs {
			if o.Instance == r.Instance && (o.StartedAt.After(r.StartedAt) || o.StartedAt.Equal(r.StartedAt) && o.ID > r.ID) {
				superseded[r.ID] = true
				break
			}
		}
	}
	alive := func(r *Run) bool {
		return !superseded[r.ID] && r.StoppedAt.IsZero() && now.Sub(r.HeartbeatAt) <= opt.Stale
	}
	end := func(r *Run) time.Time {
		if alive(r) {
			return now
		}
		if !r.StoppedAt.IsZero() && r.StoppedAt.After(r.HeartbeatAt) {
			return r.StoppedAt
		}
		return r.HeartbeatAt
	}
	listed := func(o Outage) bool {
		return (o.Crash || o.Length >= opt.MinClean) && (o.Open || !o.End.Before(opt.Since))
	}
	out := []Outage{}
	var reach time.Time
	var reachRun *Run
	anyAlive := false
	for i := range runs {
		r := &runs[i]
		if reachRun != nil && r.StartedAt.After(reach) {
			o := Outage{Kind: "outage", Start: reach, End: r.StartedAt, Length: r.StartedAt.Sub(reach),
				Crash: reachRun.StoppedAt.IsZero(), RunBefore: reachRun.ID, RunAfter: r.ID}
			if listed(o) {
				out = append(out, o)
			}
		}
		if e := end(r); reachRun == nil || e.After(reach) {
			reach, reachRun = e, r
		}
		anyAlive = anyAlive || alive(r)
	}
	if reachRun != nil && !anyAlive && now.After(reach) {
		o := Outage{Kind: "outage", Start: reach, Open: true, Length: now.Sub(reach),
			Crash: reachRun.StoppedAt.IsZero(), RunBefore: reachRun.ID}
		if listed(o) {
			out = append(out, o)
		}
	}
	paired := make([]bool, len(runs))
	for i := range runs {
		r := &runs[i]
		prev := -1
		for j := range i {
			p := &runs[j]
			if paired[j] || p.Instance != r.Instance || end(p).After(r.StartedAt) {
				continue
			}
			if prev < 0 || end(p).After(end(&runs[prev])) {
				prev = j
			}
		}
		if prev < 0 {
			continue
		}
		paired[prev] = true
		p := &runs[prev]
		stop := end(p)
		reach := stop
		for k := range runs {
			o := &runs[k]
			if k == prev || k == i {
				continue
			}
			if o.StartedAt.After(reach) || !reach.Before(r.StartedAt) {
				break
			}
			if e := end(o); e.After(reach) {
				reach = e
			}
		}
		if !reach.After(stop) || reach.Before(r.StartedAt) {
			continue
		}
		o := Outage{Kind: "restart", Start: stop, End: r.StartedAt, Length: r.StartedAt.Sub(stop),
			Crash: p.StoppedAt.IsZero(), RunBefore: p.ID, RunAfter: r.ID}
		if listed(o) {
			out = append(out, o)
		}
	}
	slices.SortStableFunc(out, func(a, b Outage) int { return a.Start.Compare(b.Start) })
	for i := range out {
		out[i].LengthSeconds = out[i].Length.Seconds()
	}
	return out
}

// BenchmarkOutages: a long run log of one instance (a crash loop restarting
// every few seconds for a day leaves tens of thousands of runs), by Outages
// and by the quadratic walk it replaced.
func BenchmarkOutages(b *testing.B) {
	var runs []Run
	for i := range 5000 {
		s := float64(i * 10)
		runs = append(runs, run(int64(i+1), "a", s, s+6, -1))
	}
	now := at(50000)
	b.Run("Outages", func(b *testing.B) {
		for b.Loop() {
			Outages(runs, now, GapOptions{})
		}
	})
	b.Run("quadratic", func(b *testing.B) {
		for b.Loop() {
			quadraticOutages(runs, now, GapOptions{})
		}
	})
}
