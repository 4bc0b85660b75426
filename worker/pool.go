package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookwarden/hookwarden"
)

// ErrNotRunning is returned by Healthy when Run is not running, or draining.
var ErrNotRunning = errors.New("worker pool not running")

const (
	// DefaultPollInterval: a job made due by another process (a replay from
	// the CLI) is picked up within this.
	DefaultPollInterval = time.Second
	// DefaultDrainTimeout leaves room, under systemd's default 90s stop
	// timeout, for the kill grace of commands, the last writes and closing
	// the database.
	DefaultDrainTimeout = 25 * time.Second
	// DefaultLeaseMargin is added to the longest possible attempt to get the
	// lease: it covers recording the attempt on a busy database and clock
	// jitter. Too short: a slow attempt is leased twice (duplicate delivery);
	// too long: a job held by a dead process waits longer after a restart.
	DefaultLeaseMargin = 30 * time.Second

	// queueOpTimeout bounds Lease and NextDue; finishTimeout bounds Finish,
	// which runs even after shutdown began.
	queueOpTimeout = 30 * time.Second
	finishTimeout  = 10 * time.Second
	// unhealthyStreak queue errors in a row make a destination unhealthy.
	unhealthyStreak = 3
	// minWait keeps a dispatcher from spinning when the store says a job is
	// due but Lease disagrees (clock skew between them).
	minWait = 10 * time.Millisecond
)

// Options tune a Pool. The zero value is usable.
type Options struct {
	Logger *slog.Logger // default: discard
	// PollInterval is the longest a dispatcher waits without asking the store;
	// default DefaultPollInterval.
	PollInterval time.Duration
	// DrainTimeout is how long in-flight attempts may go on after Run's
	// context is cancelled before they are cancelled too and recorded as Retry
	// due at once; default DefaultDrainTimeout, negative: cancel at once.
	DrainTimeout time.Duration
	// LeaseMargin is added to the longest possible attempt to get the lease;
	// default DefaultLeaseMargin.
	LeaseMargin time.Duration
	// Now is the clock of attempt records and retry times; default time.Now.
	// Durations and timers always use the real monotonic clock.
	Now func() time.Time
	// Rand returns the jitter in [0,1); default math/rand/v2.Float64. Called
	// from many goroutines.
	Rand func() float64
	// OnAttempt observes every attempt after it was recorded (or failed to be),
	// from the attempt's goroutine: keep it fast (metrics).
	OnAttempt func(dest string, a hookwarden.Attempt)
}

// A Pool runs one dispatcher per destination. Create it with New, start it
// with Run.
type Pool struct {
	q        Queue
	opt      Options
	log      *slog.Logger
	dispatch []*dispatcher
	byName   map[string]*dispatcher
	err      error // configuration error, returned by Run
	started  atomic.Bool
	running  atomic.Bool

	// Set by Run before the dispatchers start: what attempts run under, and
	// the group Run waits for (attempts started by the store through Start
	// join it too).
	runCtx, hard context.Context
	wg           sync.WaitGroup
	opTimeout    time.Duration // queueOpTimeout; tests shorten it
	wedgeAfter   time.Duration
}

// dispatcher leases and runs the jobs of one destination.
type dispatcher struct {
	p        *Pool
	dest     Destination
	leaseFor time.Duration
	wake     chan struct{} // Notify; capacity 1
	freed    chan struct{} // an attempt ended; capacity 1
	// hint: jobs may be due in the store that no slot holds (a job was
	// created without a slot, or the last lease filled every slot). Without
	// it a freed slot does not ask the store: with Direct hand-over most
	// jobs never wait in the store, and an empty lease is a wasted write.
	hint atomic.Bool
	log  *slog.Logger // the pool's, with the destination's name

	mu        sync.Mutex
	inflight  int       // slots taken: attempts running, leases and reservations under way
	accepting bool      // Start may run attempts (Run is running and not draining)
	beat      time.Time // last loop turn, real clock
	errStreak int       // queue errors in a row
	lastErr   error
	running   map[int64]time.Time // job id → start of its attempt, real clock
}

// maxDurationer is implemented by deliverers that know how long one attempt
// can take at most, cleanup included (the Command's kill grace). The lease
// covers it.
type maxDurationer interface{ MaxDuration() time.Duration }

// New returns a pool delivering to dests from q. Zero fields of each
// Destination take the package defaults. A configuration error (duplicate
// name, no deliverer) is returned by Run.
func New(q Queue, dests []Destination, opt Options) *Pool {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = DefaultPollInterval
	}
	if opt.DrainTimeout == 0 {
		opt.DrainTimeout = DefaultDrainTimeout
	}
	if opt.LeaseMargin <= 0 {
		opt.LeaseMargin = DefaultLeaseMargin
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Rand == nil {
		opt.Rand = rand.Float64
	}
	p := &Pool{
		q:         q,
		opt:       opt,
		log:       opt.Logger,
		byName:    make(map[string]*dispatcher, len(dests)),
		opTimeout: queueOpTimeout,
	}
	if q == nil {
		p.err = errors.New("worker: nil queue")
	}
	for _, d := range dests {
		switch {
		case d.Name == "":
			p.err = errors.Join(p.err, errors.New("worker: destination without a name"))
			continue
		case p.byName[d.Name] != nil:
			p.err = errors.Join(p.err, fmt.Errorf("worker: destination %q listed twice", d.Name))
			continue
		case d.Deliverer == nil:
			p.err = errors.Join(p.err, fmt.Errorf("worker: destination %q has no deliverer", d.Name))
		}
		d.Concurrency = max(d.Concurrency, 1)
		if d.MaxAttempts <= 0 {
			d.MaxAttempts = DefaultMaxAttempts
		}
		d.Backoff = d.Backoff.withDefaults()
		longest := d.Timeout
		if md, ok := d.Deliverer.(maxDurationer); ok {
			longest = max(longest, md.MaxDuration())
			if d.Timeout <= 0 { // the deliverer enforces its own timeout
				d.Timeout = md.MaxDuration()
			}
		}
		if d.Timeout <= 0 {
			d.Timeout = DefaultTimeout
		}
		longest = max(longest, d.Timeout)
		disp := &dispatcher{
			p:        p,
			dest:     d,
			leaseFor: longest + opt.LeaseMargin,
			wake:     make(chan struct{}, 1),
			freed:    make(chan struct{}, 1),
			log:      opt.Logger.With("destination", d.Name),
			running:  map[int64]time.Time{},
		}
		p.dispatch = append(p.dispatch, disp)
		p.byName[d.Name] = disp
	}
	p.wedgeAfter = p.opTimeout + 3*opt.PollInterval
	return p
}

// LeaseFor returns the lease duration used for the named destination (0 if
// unknown): the longest attempt plus Options.LeaseMargin.
func (p *Pool) LeaseFor(destination string) time.Duration {
	if d := p.byName[destination]; d != nil {
		return d.leaseFor
	}
	return 0
}

// Run delivers until ctx is cancelled, then stops leasing, lets in-flight
// attempts finish for up to Options.DrainTimeout, cancels the rest (recorded
// as Retry due at once), and returns nil. It returns an error at once if the
// configuration passed to New is invalid or Run was already called.
func (p *Pool) Run(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("worker: pool already run")
	}
	// Attempts outlive ctx by up to the drain timeout: they run under hard.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	p.runCtx, p.hard = ctx, hard

	wg := &p.wg
	for _, d := range p.dispatch {
		d.heartbeat()
		d.setAccepting(true)
		wg.Go(func() { d.run(ctx, wg) })
	}
	p.running.Store(true)
	p.log.Info("workers started", "destinations", len(p.dispatch))

	<-ctx.Done()
	p.running.Store(false)
	// No new attempts from Start once draining: their jobs stay leased and
	// are released at the next start.
	for _, d := range p.dispatch {
		d.setAccepting(false)
	}
	p.log.Info("workers draining", "timeout", p.opt.DrainTimeout)
	idle := make(chan struct{})
	go func() { wg.Wait(); close(idle) }() // ends before Run returns: Run waits for idle
	if p.opt.DrainTimeout > 0 {
		t := time.NewTimer(p.opt.DrainTimeout)
		defer t.Stop()
		select {
		case <-idle:
			p.log.Info("workers stopped")
			return nil
		case <-t.C:
		}
	}
	p.log.Warn("drain timeout: cancelling in-flight attempts")
	cancelHard()
	<-idle
	p.log.Info("workers stopped")
	return nil
}

// Notify wakes the dispatchers of the named destinations, or all of them if
// none is named. It never blocks; unknown names are ignored. The receiver
// calls it after committing new jobs.
func (p *Pool) Notify(destinations ...string) {
	if len(destinations) == 0 {
		for _, d := range p.dispatch {
			d.notify()
		}
		return
	}
	for _, name := range destinations {
		if d := p.byName[name]; d != nil {
			d.notify()
		}
	}
}

// Healthy returns nil while Run is running, every dispatcher is turning, no
// attempt has outlived its lease and no destination has had unhealthyStreak
// queue errors in a row. Use it for /readyz and the systemd watchdog.
func (p *Pool) Healthy() error {
	if !p.running.Load() {
		return ErrNotRunning
	}
	now := time.Now()
	var errs []error
	for _, d := range p.dispatch {
		d.mu.Lock()
		if age := now.Sub(d.beat); age > p.wedgeAfter {
			errs = append(errs, fmt.Errorf("worker %s: wedged, no progress for %s", d.dest.Name, age.Round(time.Second)))
		}
		for id, start := range d.running {
			// Past its lease, the job may be leased again: the deliverer (or
			// Finish) ignores its context.
			if age := now.Sub(start); age > d.leaseFor {
				errs = append(errs, fmt.Errorf("worker %s: attempt of job %d stuck for %s, beyond its lease of %s",
					d.dest.Name, id, age.Round(time.Millisecond), d.leaseFor))
			}
		}
		if d.errStreak >= unhealthyStreak {
			errs = append(errs, fmt.Errorf("worker %s: %d queue errors in a row: %w", d.dest.Name, d.errStreak, d.lastErr))
		}
		d.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (d *dispatcher) notify() {
	select {
	case d.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// NotifyCreated is Notify for a store that hands new jobs over through
// Reserve and Start (sqlitestore.Direct): it wakes only the destinations
// where a job had to be created without a slot, since the others' new jobs
// are already running. The receiver calls it after each commit; waking
// every time would cost a lease (a write) that finds nothing.
func (p *Pool) NotifyCreated(destinations ...string) {
	for _, name := range destinations {
		if d := p.byName[name]; d != nil && d.hint.Load() {
			d.notify()
		}
	}
}

// Reserve takes a free slot of the destination for a job the store is about
// to create leased (sqlitestore.Direct). When none is free the job waits in
// the store, and the next freed slot leases it.
func (p *Pool) Reserve(destination string) (hookwarden.Slot, bool) {
	d := p.byName[destination]
	if d == nil {
		return nil, false
	}
	d.mu.Lock()
	ok := d.accepting && d.inflight < d.dest.Concurrency
	if ok {
		d.inflight++
	}
	d.mu.Unlock()
	if !ok {
		d.hint.Store(true)
		return nil, false
	}
	return d, true
}

// LeaseFor is the lease of a job started in a slot of d (hookwarden.Slot).
func (d *dispatcher) LeaseFor() time.Duration { return d.leaseFor }

// Release gives back a slot taken by Reserve whose job was not committed.
func (d *dispatcher) Release() { d.slotDone() }

// unleaser is a Queue that can give back the lease of a job handed to a
// slot that did not run it (sqlitestore.Store).
type unleaser interface {
	Unlease(ctx context.Context, job hookwarden.Job) error
}

// unleaseTimeout bounds the write that gives a refused job back.
const unleaseTimeout = 5 * time.Second

// Start runs the first attempt of a job the store committed leased to a slot
// taken by Reserve. It never blocks. While draining it gives the slot back
// and, when the queue can, the job's lease too, so that the pool taking over
// after a reload finds it due at once rather than when the lease ends (else
// it is released at the next start).
func (d *dispatcher) Hand(job hookwarden.Job) {
	p := d.p
	d.mu.Lock()
	if !d.accepting {
		d.mu.Unlock()
		d.slotDone()
		if u, ok := p.q.(unleaser); ok {
			// Not in p.wg: Run may already be waiting on it. Start runs on
			// the store's writer, so the write must not be waited for here.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), unleaseTimeout)
				defer cancel()
				if err := u.Unlease(ctx, job); err != nil {
					d.log.Warn("a job handed over while draining keeps its lease until it ends or the next start",
						"job", job.ID, "err", err)
				}
			}()
		}
		return
	}
	// Under mu while accepting: Run's Wait cannot have begun (it sets
	// accepting false under mu first), so this Add is not racing it.
	p.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer p.wg.Done()
		d.work(job)
	}()
}

// work runs a job (and any chained after it) in a slot taken for it, then
// frees the slot. Attempts run under the pool's hard context.
func (d *dispatcher) work(job hookwarden.Job) {
	d.attempts(d.p.runCtx, d.p.hard, job, d.log)
	d.slotDone()
}

func (d *dispatcher) setAccepting(on bool) {
	d.mu.Lock()
	d.accepting = on
	d.mu.Unlock()
}

// take reserves every free slot for a lease and returns how many.
func (d *dispatcher) take() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	free := max(d.dest.Concurrency-d.inflight, 0)
	d.inflight += free
	return free
}

// give returns n slots taken but not used.
func (d *dispatcher) give(n int) {
	if n <= 0 {
		return
	}
	d.mu.Lock()
	d.inflight -= n
	d.mu.Unlock()
}

// slotDone frees one slot and tells the dispatcher.
func (d *dispatcher) slotDone() {
	d.give(1)
	select {
	case d.freed <- struct{}{}:
	default: // already signalled
	}
}

func (d *dispatcher) heartbeat() {
	d.mu.Lock()
	d.beat = time.Now()
	d.mu.Unlock()
}

// queueResult tracks consecutive queue errors for Healthy.
func (d *dispatcher) queueResult(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.errStreak, d.lastErr = 0, nil
		return
	}
	d.errStreak++
	d.lastErr = err
}

// run is the dispatcher loop: lease exactly the free slots, start one
// attempt per job, then wait for a wake-up, a freed slot, the next due time
// or the poll interval. Attempts are added to wg.
func (d *dispatcher) run(ctx context.Context, wg *sync.WaitGroup) {
	p := d.p
	log := d.log
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	ask := true                                    // lease this turn
	deadline := time.Now().Add(p.opt.PollInterval) // ask the store again by then
	for {
		if ctx.Err() != nil {
			return
		}
		d.heartbeat()
		if ask {
			wait := p.opt.PollInterval
			if free := d.take(); free > 0 {
				jobs, err := d.lease(ctx, free)
				d.give(free - len(jobs))
				for _, job := range jobs {
					wg.Go(func() { d.work(job) })
				}
				if ctx.Err() != nil {
					return
				}
				switch {
				case err != nil:
					log.Error("lease failed", "err", err)
				case len(jobs) == free:
					d.hint.Store(true) // maybe more due: lease when a slot frees
				default:
					wait = d.untilNextDue(ctx, log)
				}
			} else {
				d.hint.Store(true) // asked with every slot busy: ask when one frees
			}
			deadline = time.Now().Add(wait)
		}
		timer.Reset(max(time.Until(deadline), 0))
		select {
		case <-ctx.Done():
			return
		case <-d.freed:
			// Attempts whose finishes shared a commit free their slots
			// together; one signal covers them, so one lease refills them.
			ask = d.hint.Swap(false)
		case <-d.wake:
			ask = true
		case <-timer.C:
			ask = true
		}
		timer.Stop()
	}
}

func (d *dispatcher) lease(ctx context.Context, free int) ([]hookwarden.Job, error) {
	lctx, cancel := context.WithTimeout(ctx, d.p.opTimeout)
	defer cancel()
	jobs, err := d.p.q.Lease(lctx, d.dest.Name, free, d.leaseFor)
	switch {
	case err == nil:
		d.queueResult(nil)
	case ctx.Err() == nil: // not merely shutting down
		d.queueResult(fmt.Errorf("lease: %w", err))
	}
	if len(jobs) > free { // a store bug must not break the concurrency limit
		d.p.log.Error("lease returned more jobs than asked", "destination", d.dest.Name,
			"asked", free, "got", len(jobs))
		jobs = jobs[:free] // the others come back when their lease expires
	}
	return jobs, err
}

// untilNextDue is how long to wait before leasing again when the last lease
// found fewer due jobs than free slots.
func (d *dispatcher) untilNextDue(ctx context.Context, log *slog.Logger) time.Duration {
	poll := d.p.opt.PollInterval
	nctx, cancel := context.WithTimeout(ctx, d.p.opTimeout)
	defer cancel()
	t, ok, err := d.p.q.NextDue(nctx, d.dest.Name)
	if err != nil {
		if ctx.Err() == nil { // not merely shutting down
			d.queueResult(fmt.Errorf("next due: %w", err))
			log.Error("next due failed", "err", err)
		}
		return poll
	}
	if !ok {
		return poll
	}
	return min(max(t.Sub(d.p.opt.Now()), minWait), poll)
}

// finishLeaser is implemented by queues that can record an attempt and
// lease the destination's next due jobs in one write (sqlitestore): a slot
// that stays busy then costs one commit per delivery instead of two (a
// Finish, then the dispatcher's Lease).
type finishLeaser interface {
	FinishAndLease(ctx context.Context, a hookwarden.Attempt, destination string, max int, leaseFor time.Duration) ([]hookwarden.Job, error)
}

// chainMaxConcurrency: destinations with at most this many slots lease
// through finishing attempts (one job each); wider ones are better served by
// the dispatcher leasing every freed slot in one statement and loading the
// events in one query. Measured with BenchmarkPoolDeliver on SQLite (jobs/s,
// chained vs dispatcher only): 4 slots 4,200 vs 2,200; 16: 7,500 vs 6,100;
// 32: 8,400 vs 10,200; 64: 9,800 vs 14,000 (docs/performance.md).
const chainMaxConcurrency = 16

// attempts runs the attempt of a leased job in its slot and, while the pool
// runs (run is not done) and the queue is a finishLeaser, the destination's next due
// job in the same slot, leased in the write that records the attempt.
func (d *dispatcher) attempts(run, hard context.Context, job hookwarden.Job, log *slog.Logger) {
	for {
		next, ok := d.attempt(run, hard, job, log)
		if !ok {
			return
		}
		job = next
	}
}

// attempt runs one delivery attempt of a leased job and records it. While
// run is not done and the queue can, the same write leases the next due job
// of the destination, which attempt returns with ok.
func (d *dispatcher) attempt(run, hard context.Context, job hookwarden.Job, log *slog.Logger) (next hookwarden.Job, ok bool) {
	p := d.p
	started := p.opt.Now()
	t0 := time.Now()
	d.mu.Lock()
	d.running[job.ID] = t0
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.running, job.ID)
		d.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(hard, d.dest.Timeout)
	res := deliverSafely(ctx, d.dest.Deliverer, &job, log)
	cancel()
	dur := time.Since(t0)
	aborted := hard.Err() != nil
	a := judge(res, &job, &d.dest, started, dur, p.opt.Now(), p.opt.Rand(), aborted)

	// The attempt is recorded even when shutdown has begun; the next job is
	// leased only while the pool runs. Chained (finish and lease the next job
	// in one write, keeping the slot) for narrow destinations while jobs may
	// be waiting in the store (hint); otherwise the slot is freed as soon as
	// the delivery returned and the attempt is recorded in the background:
	// a slot that waited for the commit would spend most of its time
	// waiting for the writer, not delivering. A crash before that commit
	// leaves the job leased, so it is delivered again after the restart,
	// with the same key: at-least-once holds.
	fl, can := p.q.(finishLeaser)
	if !can || d.dest.Concurrency > chainMaxConcurrency || run.Err() != nil || !d.hint.Load() {
		p.wg.Go(func() { d.record(hard, job, a, log, nil) })
		return hookwarden.Job{}, false
	}
	var more []hookwarden.Job
	d.record(hard, job, a, log, func(ctx context.Context) (err error) {
		more, err = fl.FinishAndLease(ctx, a, d.dest.Name, 1, d.leaseFor)
		return err
	})
	if len(more) > 0 {
		return more[0], true
	}
	return hookwarden.Job{}, false
}

// record records attempt a of job with finish (nil: Queue.Finish), then logs
// it and reports it to Options.OnAttempt. A failed record leaves the job
// leased: it is due again when the lease expires, so at-least-once holds.
func (d *dispatcher) record(hard context.Context, job hookwarden.Job, a hookwarden.Attempt, log *slog.Logger, finish func(context.Context) error) {
	p := d.p
	if finish == nil {
		finish = func(ctx context.Context) error { return p.q.Finish(ctx, a) }
	}
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(hard), finishTimeout)
	err := finish(fctx)
	fcancel()
	if err != nil {
		err = fmt.Errorf("finish: %w", err)
	}
	d.queueResult(err)
	if err != nil {
		log.Error("recording attempt failed; job will be retried when its lease expires",
			"job", job.ID, "attempt", a.Number, "verdict", a.Verdict, "err", err)
	}

	attrs := []any{"job", job.ID, "source", job.Source, "event_id", job.EventID, "attempt", a.Number,
		"verdict", a.Verdict, "duration", a.Duration}
	if a.StatusCode != 0 {
		attrs = append(attrs, "status", a.StatusCode)
	}
	if a.ExitCode != -1 {
		attrs = append(attrs, "exit_code", a.ExitCode)
	}
	switch a.Verdict {
	case hookwarden.Delivered:
		// Debug: a success is in the attempts table and the metrics; at Info,
		// a busy destination would flood the journal (journald drops lines
		// past its rate limit, errors included).
		log.Debug("delivered", attrs...)
	case hookwarden.Retry:
		log.Warn("delivery failed, will retry", append(attrs, "retry_at", a.RetryAt, "err", a.Error)...)
	default:
		log.Error("delivery dead-lettered", append(attrs, "err", a.Error)...)
	}
	if p.opt.OnAttempt != nil {
		p.opt.OnAttempt(d.dest.Name, a)
	}
}
