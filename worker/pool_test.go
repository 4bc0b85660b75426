package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

func TestPoolConcurrencyNeverExceeded(t *testing.T) {
	t.Parallel()
	const concurrency, jobs = 3, 20
	q := newMemQueue(nil)
	ids := q.addN(jobs)
	var g peakGauge
	var calls atomic.Int32
	d := deliverFunc(func(ctx context.Context, job *hookwarden.Job) Result {
		defer g.enter()()
		// Fail every other first attempt, so retries interleave with new jobs.
		if calls.Add(1)%2 == 0 && job.Attempt == 1 {
			return Result{Class: Transient, Err: errors.New("flaky")}
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
		}
		return Result{Class: Success}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Concurrency: concurrency,
		Backoff: Backoff{Initial: time.Millisecond, Max: time.Millisecond}}},
		Options{PollInterval: 10 * time.Millisecond})
	MustOpen(t, p)
	for _, id := range ids {
		got := q.MustFinal(t, id)
		if v := got[len(got)-1].Verdict; v != hookwarden.Delivered {
			t.Fatalf("job %d ended %s, want delivered", id, v)
		}
	}
	if got := g.peak.Load(); got > concurrency {
		t.Errorf("peak in-flight attempts = %d, want at most %d", got, concurrency)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.maxAsked > concurrency {
		t.Errorf("Lease asked for %d jobs at once, want at most %d", q.maxAsked, concurrency)
	}
	t.Logf("peak in flight %d, largest lease %d", g.peak.Load(), q.maxAsked)
}

func TestPoolNotifyWakesDispatcher(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	delivered := make(chan string, 10)
	d := deliverFunc(func(_ context.Context, job *hookwarden.Job) Result {
		delivered <- job.EventID
		return Result{Class: Success}
	})
	// With an hour between polls, only Notify can explain a quick delivery.
	p := New(q, []Destination{{Name: "s/a", Deliverer: d}, {Name: "s/b", Deliverer: d}},
		Options{PollInterval: time.Hour})
	MustOpen(t, p)
	mustIdle := func() {
		t.Helper()
		// Both dispatchers have asked NextDue and now wait for up to an hour.
		for range 2 {
			select {
			case <-q.idle:
			case <-time.After(5 * time.Second):
				t.Fatal("dispatcher never went idle")
			}
		}
	}
	mustIdle()

	q.add("s/a", "evt_1", nil)
	select {
	case id := <-delivered:
		t.Fatalf("%s delivered without Notify", id)
	case <-time.After(100 * time.Millisecond):
	}
	p.Notify("s/b", "unknown/dest") // the wrong destination does not help
	select {
	case id := <-delivered:
		t.Fatalf("%s delivered after notifying another destination", id)
	case <-time.After(100 * time.Millisecond):
	}
	start := time.Now()
	p.Notify("s/a")
	select {
	case id := <-delivered:
		if id != "evt_1" {
			t.Fatalf("delivered %s, want evt_1", id)
		}
		t.Logf("delivered %s after Notify in %s", id, time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("Notify did not wake the dispatcher")
	}
	q.MustAttempt(t)

	// Notify() with no name wakes every destination.
	q.add("s/b", "evt_2", nil)
	for i := 0; i < 10; i++ { // Notify never blocks, however often it is called
		p.Notify()
	}
	select {
	case id := <-delivered:
		if id != "evt_2" {
			t.Fatalf("delivered %s, want evt_2", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Notify() did not wake the dispatcher")
	}
	q.MustAttempt(t)
}

func TestPoolDrainCancelsAndRecordsRetry(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	q := newMemQueue(clock.Now)
	id := q.add("s/app", "evt_1", []byte("{}"))
	q.add("s/app", "evt_2", []byte("{}"))
	started := make(chan struct{}, 1)
	d := deliverFunc(func(ctx context.Context, _ *hookwarden.Job) Result {
		started <- struct{}{}
		<-ctx.Done() // a destination that hangs until cancelled
		return Result{Class: Transient, Err: ctx.Err(), ExitCode: -1}
	})
	var observed atomic.Int32
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Concurrency: 1, MaxAttempts: 1, Timeout: time.Hour}},
		Options{PollInterval: 10 * time.Millisecond, DrainTimeout: 50 * time.Millisecond, Now: clock.Now,
			OnAttempt: func(dest string, a hookwarden.Attempt) {
				if dest == "s/app" {
					observed.Add(1)
				}
			}})
	stop := MustOpen(t, p)
	<-started
	begin := time.Now()
	stop()
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("Close took %s to return, want about the drain timeout", took)
	}
	a := q.MustAttempt(t)
	if a.JobID != id || a.Verdict != hookwarden.Retry {
		t.Fatalf("attempt = job %d %s, want job %d retry", a.JobID, a.Verdict, id)
	}
	if !a.RetryAt.Equal(clock.Now()) {
		t.Errorf("RetryAt = %s, want now (%s)", a.RetryAt, clock.Now())
	}
	if !strings.Contains(a.Error, "interrupted by shutdown") {
		t.Errorf("error = %q, want it to say the attempt was interrupted by shutdown", a.Error)
	}
	if got := q.state(id); got != hookwarden.JobPending {
		t.Errorf("job state = %s, want pending (MaxAttempts 1 must not dead-letter an interrupted attempt)", got)
	}
	if n := observed.Load(); n != 1 {
		t.Errorf("OnAttempt called %d times, want 1", n)
	}
	select {
	case a := <-q.finished:
		t.Errorf("unexpected second attempt %+v: nothing may be leased after cancel", a)
	default:
	}
}

func TestPoolDrainLetsAttemptsFinish(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	first := q.add("s/app", "evt_1", nil)
	second := q.add("s/app", "evt_2", nil)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	d := deliverFunc(func(ctx context.Context, _ *hookwarden.Job) Result {
		started <- struct{}{}
		select {
		case <-release:
			return Result{Class: Success}
		case <-ctx.Done():
			return Result{Class: Transient, Err: ctx.Err()}
		}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Concurrency: 1}},
		Options{PollInterval: 10 * time.Millisecond, DrainTimeout: time.Minute})
	stop := MustOpen(t, p)
	<-started
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// Close must not return while the attempt is in flight.
	waitFor(t, "draining", func() bool { return p.Healthy() != nil })
	select {
	case <-stopped:
		t.Fatal("Close returned before the in-flight attempt finished")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if a := q.MustAttempt(t); a.JobID != first || a.Verdict != hookwarden.Delivered {
		t.Errorf("attempt = job %d %s, want job %d delivered", a.JobID, a.Verdict, first)
	}
	if got := q.state(second); got != hookwarden.JobPending {
		t.Errorf("second job = %s, want pending: nothing is leased once draining", got)
	}
}

func TestPoolRecoversPanics(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	id := q.add("s/app", "evt_1", nil)
	d := deliverFunc(func(_ context.Context, job *hookwarden.Job) Result {
		switch job.Attempt {
		case 1:
			panic("boom")
		case 2:
			runtime.Goexit()
		}
		return Result{Class: Success}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Backoff: Backoff{Initial: time.Millisecond, Max: time.Millisecond}}},
		Options{PollInterval: 10 * time.Millisecond})
	MustOpen(t, p)
	got := q.MustFinal(t, id)
	want := []struct {
		verdict hookwarden.Verdict
		err     string
	}{{hookwarden.Retry, "deliverer panicked: boom"}, {hookwarden.Retry, "runtime.Goexit"}, {hookwarden.Delivered, ""}}
	if len(got) != len(want) {
		t.Fatalf("got %d attempts, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Verdict != w.verdict || !strings.Contains(got[i].Error, w.err) {
			t.Errorf("attempt %d = %s %q, want %s containing %q", i+1, got[i].Verdict, got[i].Error, w.verdict, w.err)
		}
	}
}

func TestPoolAttemptTimeout(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	id := q.add("s/app", "evt_1", nil)
	d := deliverFunc(func(ctx context.Context, _ *hookwarden.Job) Result {
		<-ctx.Done()
		return Result{Class: Transient, Err: ctx.Err(), TimedOut: errors.Is(ctx.Err(), context.DeadlineExceeded)}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Timeout: 20 * time.Millisecond, MaxAttempts: 1}},
		Options{PollInterval: 10 * time.Millisecond})
	MustOpen(t, p)
	a := q.MustFinal(t, id)[0]
	if a.Verdict != hookwarden.Dead || !strings.Contains(a.Error, "deadline exceeded") {
		t.Errorf("attempt = %s %q, want dead after a timeout", a.Verdict, a.Error)
	}
}

func TestPoolHealthy(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	var failing atomic.Bool
	q.leaseFn = func(context.Context) error {
		if failing.Load() {
			return errors.New("database is locked")
		}
		return nil
	}
	d := deliverFunc(func(context.Context, *hookwarden.Job) Result { return Result{Class: Success} })
	p := New(q, []Destination{{Name: "s/app", Deliverer: d}}, Options{PollInterval: 5 * time.Millisecond})
	if err := p.Healthy(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Healthy before Open = %v, want ErrNotRunning", err)
	}
	stop := MustOpen(t, p)
	if err := p.Healthy(); err != nil {
		t.Fatalf("Healthy while running = %v", err)
	}
	failing.Store(true)
	waitFor(t, "unhealthy after persistent lease errors", func() bool {
		err := p.Healthy()
		return err != nil && strings.Contains(err.Error(), "database is locked")
	})
	failing.Store(false)
	waitFor(t, "healthy again once the queue recovers", func() bool { return p.Healthy() == nil })
	stop()
	if err := p.Healthy(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Healthy after Close = %v, want ErrNotRunning", err)
	}
}

func TestPoolHealthyDetectsWedgedDispatcher(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	var wedged atomic.Bool
	unwedge := make(chan struct{})
	q.leaseFn = func(context.Context) error {
		if wedged.Load() {
			<-unwedge // a store call that ignores its context
		}
		return nil
	}
	d := deliverFunc(func(context.Context, *hookwarden.Job) Result { return Result{Class: Success} })
	p := New(q, []Destination{{Name: "s/app", Deliverer: d}}, Options{PollInterval: 5 * time.Millisecond})
	p.opTimeout = 20 * time.Millisecond
	p.wedgeAfter = p.opTimeout + 3*p.opt.PollInterval
	MustOpen(t, p)
	wedged.Store(true)
	waitFor(t, "wedged dispatcher reported", func() bool {
		err := p.Healthy()
		return err != nil && strings.Contains(err.Error(), "wedged")
	})
	wedged.Store(false)
	close(unwedge)
	waitFor(t, "healthy once unwedged", func() bool { return p.Healthy() == nil })
}

func TestPoolHealthyDetectsStuckAttempt(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	release := make(chan struct{})
	d := deliverFunc(func(context.Context, *hookwarden.Job) Result {
		<-release // ignores its context
		return Result{Class: Success}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Timeout: 10 * time.Millisecond}},
		Options{PollInterval: 5 * time.Millisecond, LeaseMargin: 10 * time.Millisecond})
	MustOpen(t, p)
	id := q.add("s/app", "evt_1", nil)
	waitFor(t, "stuck attempt reported", func() bool {
		err := p.Healthy()
		return err != nil && strings.Contains(err.Error(), fmt.Sprintf("attempt of job %d stuck", id))
	})
	close(release)
	q.MustFinal(t, id)
	waitFor(t, "healthy once the attempt returned", func() bool { return p.Healthy() == nil })
}

func TestPoolConfigErrors(t *testing.T) {
	t.Parallel()
	d := deliverFunc(func(context.Context, *hookwarden.Job) Result { return Result{Class: Success} })
	q := newMemQueue(nil)
	tests := []struct {
		name  string
		q     Queue
		dests []Destination
		want  string
	}{
		{"nil queue", nil, nil, "nil queue"},
		{"no name", q, []Destination{{Deliverer: d}}, "without a name"},
		{"duplicate", q, []Destination{{Name: "s/a", Deliverer: d}, {Name: "s/a", Deliverer: d}}, `"s/a" listed twice`},
		{"no deliverer", q, []Destination{{Name: "s/a"}}, `"s/a" has no deliverer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(tt.q, tt.dests, Options{}).Open(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	p := New(q, nil, Options{})
	ctx := context.Background()
	if err := p.Open(ctx); err != nil {
		t.Fatalf("Open with no destinations = %v", err)
	}
	if err := p.Open(ctx); err == nil {
		t.Error("second Open = nil, want an error")
	}
	p.Close()
	if err := p.Open(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Open after Close = %v, want ErrClosed", err)
	}
	if _, err := p.Apply([]Destination{{Name: "s/a", Deliverer: d}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply after Close = %v, want ErrClosed", err)
	}
}

func TestPoolLeaseCoversLongestAttempt(t *testing.T) {
	t.Parallel()
	cmd, err := NewCommand(CommandConfig{Argv: []string{"true"}, Timeout: time.Minute, KillGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHTTP(HTTPConfig{URL: "http://127.0.0.1:1/", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := deliverFunc(func(context.Context, *hookwarden.Job) Result { return Result{Class: Success} })
	p := New(newMemQueue(nil), []Destination{
		{Name: "s/cmd", Deliverer: cmd, Timeout: time.Minute},
		{Name: "s/http", Deliverer: h, Timeout: 10 * time.Second},
		{Name: "s/func", Deliverer: d},
	}, Options{LeaseMargin: 30 * time.Second})
	for name, want := range map[string]time.Duration{
		"s/cmd":   time.Minute + 10*time.Second + 30*time.Second,
		"s/http":  10*time.Second + 30*time.Second,
		"s/func":  DefaultHTTPTimeout + 30*time.Second,
		"unknown": 0,
	} {
		if got := p.LeaseFor(name); got != want {
			t.Errorf("LeaseFor(%s) = %s, want %s", name, got, want)
		}
	}
}

// waitFor polls cond until it holds, failing after 10s.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			tb.Fatalf("timed out waiting: %s", what)
		}
	}
}

// TestHealthyReportsStuckHandOver: a successor waiting for its predecessor
// to drain is healthy for the drain timeout plus some slack, then reported;
// once the predecessor stops, the successor runs and the pool is healthy.
func TestHealthyReportsStuckHandOver(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	q.add("s/app", "evt_1", nil)
	started, release := make(chan struct{}), make(chan struct{})
	stuck := deliverFunc(func(context.Context, *hookwarden.Job) Result {
		close(started)
		<-release // ignores its context, even past the drain timeout
		return Result{Class: Success}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: stuck, Concurrency: 1, Timeout: time.Hour}},
		Options{PollInterval: 10 * time.Millisecond, DrainTimeout: 20 * time.Millisecond})
	p.slack = 50 * time.Millisecond
	MustOpen(t, p)
	<-started
	ok := deliverFunc(func(context.Context, *hookwarden.Job) Result { return Result{Class: Success} })
	if ch, err := p.Apply([]Destination{{Name: "s/app", Deliverer: ok, Concurrency: 1}}); err != nil || ch.Replaced != 1 {
		t.Fatalf("Apply = %+v, %v; want the destination replaced", ch, err)
	}
	if err := p.Healthy(); err != nil {
		t.Fatalf("Healthy at the start of the hand-over = %v", err)
	}
	waitFor(t, "the stuck hand-over reported", func() bool {
		err := p.Healthy()
		return err != nil && strings.Contains(err.Error(), "waiting") && strings.Contains(err.Error(), "to drain")
	})
	close(release)
	waitFor(t, "healthy once the predecessor stopped", func() bool { return p.Healthy() == nil })
	q.MustAttempt(t)
}
