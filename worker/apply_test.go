package worker_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
	"github.com/hookwarden/hookwarden/worker"
)

// applySetup is a real store in a temporary directory and a pool over it,
// open, with the store's direct hand-over going to the pool.
type applySetup struct {
	s *sqlitestore.Store
	p *worker.Pool
}

func setupApply(t *testing.T) applySetup {
	t.Helper()
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "hw.db"), sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := worker.New(s, nil, worker.Options{PollInterval: 50 * time.Millisecond, DrainTimeout: 10 * time.Second})
	if err := p.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close) // before the store closes: cleanups run last first
	s.SetDirect(p)
	return applySetup{s: s, p: p}
}

// record stores one event for dests and fails unless it was accepted.
func (a applySetup) record(t *testing.T, eventID string, dests ...string) {
	t.Helper()
	body := []byte(`{"id":"` + eventID + `"}`)
	sum := sha256.Sum256(body)
	res, err := a.s.Record(context.Background(), &hookwarden.Receipt{Source: "s", Header: http.Header{"Content-Type": {"application/json"}},
		Body: body, BodySHA256: sum, RemoteAddr: "127.0.0.1:5555", ReceivedAt: time.Now(),
		Events: []hookwarden.Event{{ID: eventID, Type: "t", BodySHA256: sum, Destinations: dests}}})
	if err != nil || res.Outcome != hookwarden.Accepted {
		t.Fatalf("Record(%s) = %+v, %v", eventID, res, err)
	}
	a.p.NotifyCreated(dests...)
}

func (a applySetup) mustApply(t *testing.T, dests ...worker.Destination) worker.Changes {
	t.Helper()
	ch, err := a.p.Apply(dests)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return ch
}

// sink is a deliverer that reports each job on a channel and counts how
// many of its attempts run at once; Close is recorded.
type sink struct {
	got      chan hookwarden.Job
	hold     func(job *hookwarden.Job) // runs before the attempt succeeds
	inflight *atomic.Int32             // shared across sinks: one destination's attempts
	peak     *atomic.Int32
	closed   atomic.Bool
}

func newSink(inflight, peak *atomic.Int32) *sink {
	if inflight == nil {
		inflight, peak = new(atomic.Int32), new(atomic.Int32)
	}
	return &sink{got: make(chan hookwarden.Job, 16), inflight: inflight, peak: peak}
}

func (s *sink) Deliver(ctx context.Context, job *hookwarden.Job) worker.Result {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for m := s.peak.Load(); n > m && !s.peak.CompareAndSwap(m, n); m = s.peak.Load() {
	}
	if s.hold != nil {
		s.hold(job)
	}
	if ctx.Err() != nil {
		return worker.Result{Class: worker.Transient, Err: ctx.Err()}
	}
	s.got <- *job
	return worker.Result{Class: worker.Success}
}

func (s *sink) Close() error { s.closed.Store(true); return nil }

// want waits for the sink's next delivery and checks its event.
func (s *sink) want(t *testing.T, eventID string) {
	t.Helper()
	select {
	case job := <-s.got:
		if job.EventID != eventID {
			t.Fatalf("delivered %s, want %s", job.EventID, eventID)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never delivered", eventID)
	}
}

// none checks that nothing reaches the sink for a while.
func (s *sink) none(t *testing.T, why string) {
	t.Helper()
	select {
	case job := <-s.got:
		t.Fatalf("%s delivered %s", why, job.EventID)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestApplyAddsAndRemoves: an added destination delivers at once; a removed
// one stops, its deliverer is closed, and its pending jobs stay in the
// store until it is configured again.
func TestApplyAddsAndRemoves(t *testing.T) {
	t.Parallel()
	a := setupApply(t)
	one, two := newSink(nil, nil), newSink(nil, nil)
	if ch := a.mustApply(t, worker.Destination{Name: "s/one", Deliverer: one}); ch.Added != 1 {
		t.Fatalf("first Apply: %+v, want one added", ch)
	}
	a.record(t, "evt_1", "s/one")
	one.want(t, "evt_1")

	ch := a.mustApply(t, worker.Destination{Name: "s/two", Deliverer: two})
	if want := (worker.Changes{Added: 1, Removed: []string{"s/one"}}); !reflect.DeepEqual(ch, want) {
		t.Fatalf("Apply = %+v, want %+v", ch, want)
	}
	a.record(t, "evt_2", "s/one", "s/two")
	two.want(t, "evt_2")
	one.none(t, "a removed destination")
	waitUntil(t, "the removed destination's deliverer closed", one.closed.Load)
	if err := a.p.Healthy(); err != nil {
		t.Fatalf("Healthy after removing a destination: %v", err)
	}

	// Configured again (a new deliverer): its pending job is delivered.
	again := newSink(nil, nil)
	if ch := a.mustApply(t, worker.Destination{Name: "s/two", Deliverer: two},
		worker.Destination{Name: "s/one", Deliverer: again}); ch.Kept != 1 || ch.Added != 1 {
		t.Fatalf("Apply = %+v, want s/two kept and s/one added", ch)
	}
	again.want(t, "evt_2")
	if two.closed.Load() {
		t.Error("the deliverer of a kept destination, given again, was closed")
	}
}

// TestApplyRemovesDuringAChainedLease: a destination removed while the
// write of its last attempt (which records it and leases the next due job
// in the same slot) waited for the store does not run that next job: it
// gives the lease back, and the destination configured again delivers the
// job at once, not when the 30 s lease ends. Another connection holding
// the file's write lock keeps the write waiting.
func TestApplyRemovesDuringAChainedLease(t *testing.T) {
	t.Parallel()
	a := setupApply(t)
	ctx := context.Background()
	lockDB, err := sql.Open("sqlite", "file:"+a.s.Path()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer lockDB.Close()
	lock, err := lockDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	started, release, held := make(chan struct{}), make(chan struct{}), make(chan struct{})
	one := newSink(nil, nil)
	one.hold = func(job *hookwarden.Job) {
		if job.EventID != "evt_1" {
			return
		}
		close(started)
		<-release
		if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Error(err)
		}
		close(held)
	}
	dest := worker.Destination{Name: "s/one", Deliverer: one, Concurrency: 1, Timeout: 30 * time.Second}
	a.mustApply(t, dest)
	a.record(t, "evt_1", "s/one")
	<-started
	a.record(t, "evt_2", "s/one") // waits in the store: the one slot is busy
	close(release)
	<-held
	one.want(t, "evt_1")
	// The attempt's write now waits for the lock; the reload comes.
	time.Sleep(100 * time.Millisecond)
	if ch := a.mustApply(t); !reflect.DeepEqual(ch.Removed, []string{"s/one"}) {
		t.Fatalf("Apply = %+v, want s/one removed", ch)
	}
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	one.none(t, "a destination removed while its chained lease waited")

	again := newSink(nil, nil)
	dest.Deliverer = again
	a.mustApply(t, dest)
	again.want(t, "evt_2")
}

// TestApplyReplaceDrainsThenHandsOver: a destination whose settings changed
// gets a new dispatcher that starts only once the old one drained: the
// attempt in flight finishes undisturbed, the job that arrives meanwhile
// waits for the successor, the concurrency (1) is never exceeded, the pool
// stays healthy throughout, and the old deliverer is closed.
func TestApplyReplaceDrainsThenHandsOver(t *testing.T) {
	t.Parallel()
	a := setupApply(t)
	var inflight, peak atomic.Int32
	release, started := make(chan struct{}), make(chan struct{})
	old, next := newSink(&inflight, &peak), newSink(&inflight, &peak)
	old.hold = func(job *hookwarden.Job) {
		if job.EventID == "evt_held" {
			close(started)
			<-release // ignores its context: a reload must not cut it
		}
	}
	dest := func(d worker.Deliverer, timeout time.Duration) worker.Destination {
		return worker.Destination{Name: "s/app", Deliverer: d, Concurrency: 1, Timeout: timeout}
	}
	a.mustApply(t, dest(old, 20*time.Second))
	before := a.p.LeaseFor("s/app")
	a.record(t, "evt_held", "s/app")
	<-started

	if ch := a.mustApply(t, dest(next, 25*time.Second)); ch.Replaced != 1 || ch.Kept != 0 {
		t.Fatalf("Apply = %+v, want the destination replaced", ch)
	}
	if got := a.p.LeaseFor("s/app"); got != before+5*time.Second {
		t.Fatalf("lease %s after Apply, want %s (the successor's)", got, before+5*time.Second)
	}
	a.record(t, "evt_next", "s/app")
	next.none(t, "the successor, while its predecessor still had an attempt in flight,")
	if err := a.p.Healthy(); err != nil {
		t.Fatalf("not healthy during the hand-over: %v", err)
	}
	if old.closed.Load() {
		t.Fatal("the old deliverer was closed with its attempt in flight")
	}

	close(release)
	old.want(t, "evt_held")
	next.want(t, "evt_next")
	if m := peak.Load(); m != 1 {
		t.Errorf("%d attempts in flight at once, want at most 1", m)
	}
	waitUntil(t, "the old deliverer closed", old.closed.Load)
	waitUntil(t, "healthy after the hand-over", func() bool { return a.p.Healthy() == nil })
	if next.closed.Load() {
		t.Error("the successor's deliverer was closed")
	}
}

// TestApplyKeepsUnchanged: the same settings keep the dispatcher, whether
// the deliverer is given again or built afresh from the same
// configuration (the fresh one is closed unused); changed deliverer
// settings replace it.
func TestApplyKeepsUnchanged(t *testing.T) {
	t.Parallel()
	a := setupApply(t)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(app.Close)
	httpDest := func(url string) worker.Destination {
		h, err := worker.NewHTTP(worker.HTTPConfig{URL: url, Timeout: 5 * time.Second, SigningSecret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"})
		if err != nil {
			t.Fatal(err)
		}
		return worker.Destination{Name: "s/http", Deliverer: h, Concurrency: 2}
	}
	cmdDest := func(argv ...string) worker.Destination {
		c, err := worker.NewCommand(worker.CommandConfig{Argv: argv, Env: map[string]string{"A": "1"}})
		if err != nil {
			t.Fatal(err)
		}
		return worker.Destination{Name: "s/cmd", Deliverer: c}
	}
	s := newSink(nil, nil)
	a.mustApply(t, httpDest(app.URL), cmdDest("true"), worker.Destination{Name: "s/sink", Deliverer: s})

	ch := a.mustApply(t, httpDest(app.URL), cmdDest("true"), worker.Destination{Name: "s/sink", Deliverer: s})
	if want := (worker.Changes{Kept: 3}); !reflect.DeepEqual(ch, want) {
		t.Fatalf("identical Apply = %+v, want %+v", ch, want)
	}
	ch = a.mustApply(t, httpDest(app.URL+"/other"), cmdDest("false"), worker.Destination{Name: "s/sink", Deliverer: s, MaxAttempts: 3})
	if want := (worker.Changes{Replaced: 3}); !reflect.DeepEqual(ch, want) {
		t.Fatalf("changed Apply = %+v, want %+v", ch, want)
	}
	if s.closed.Load() {
		t.Error("a deliverer handed on to the successor was closed")
	}
	a.record(t, "evt_1", "s/sink")
	s.want(t, "evt_1")

	// Invalid destinations change nothing; after Close, Apply refuses.
	if _, err := a.p.Apply([]worker.Destination{{Name: "s/x"}}); err == nil {
		t.Fatal("Apply without a deliverer = nil error")
	}
	if got := a.p.LeaseFor("s/sink"); got == 0 {
		t.Fatal("a refused Apply removed the destinations")
	}
	a.p.Close()
	if _, err := a.p.Apply(nil); !errors.Is(err, worker.ErrClosed) {
		t.Fatalf("Apply after Close = %v, want ErrClosed", err)
	}
	if err := a.p.Healthy(); !errors.Is(err, worker.ErrNotRunning) {
		t.Fatalf("Healthy after Close = %v, want ErrNotRunning", err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}
