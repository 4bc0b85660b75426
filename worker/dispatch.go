package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookwarden/hookwarden"
)

// dispatcher leases and runs the jobs of one destination, from begin until
// its context ends, then drains.
type dispatcher struct {
	p        *Pool
	dest     Destination
	fp       fingerprint
	leaseFor time.Duration
	wake     chan struct{} // Notify; capacity 1
	freed    chan struct{} // an attempt ended; capacity 1
	// hint: jobs may be due in the store that no slot holds (a job was
	// created without a slot, or the last lease filled every slot). Without
	// it a freed slot does not ask the store: with Direct hand-over most
	// jobs never wait in the store, and an empty lease is a wasted write.
	hint atomic.Bool
	log  *slog.Logger // the pool's, with the destination's name

	// Lifecycle, set by the pool under its mu.
	cancel context.CancelFunc // ends ctx; nil until launched
	after  <-chan struct{}    // the predecessor's done: begin only once it drained
	// keepDeliverer: a successor was given the same deliverer; do not close it.
	keepDeliverer atomic.Bool
	done          chan struct{} // closed when it stopped, and every predecessor too
	since         time.Time     // created (Apply)
	runAt         atomic.Int64  // unix nanos of begin; 0 while waiting for the predecessor

	wg sync.WaitGroup // attempts and records, waited for by drain

	mu sync.Mutex
	// Set by begin: what attempts run under (ctx: chaining stops when it
	// ends; hard: cancelled only past the drain timeout).
	ctx, hard  context.Context
	cancelHard context.CancelFunc
	inflight   int       // slots taken: attempts running, leases and reservations under way
	accepting  bool      // Hand may run attempts (begun and not draining)
	beat       time.Time // last loop turn, real clock
	errStreak  int       // queue errors in a row
	lastErr    error
	running    map[int64]time.Time // job id → start of its attempt, real clock
}

// maxDurationer is implemented by deliverers that know how long one attempt
// can take at most, cleanup included (the Command's kill grace). The lease
// covers it.
type maxDurationer interface{ MaxDuration() time.Duration }

// newDispatcher applies the package defaults to the zero fields of dest.
func (p *Pool) newDispatcher(dest Destination) *dispatcher {
	dest.Concurrency = max(dest.Concurrency, 1)
	if dest.MaxAttempts <= 0 {
		dest.MaxAttempts = DefaultMaxAttempts
	}
	dest.Backoff = dest.Backoff.withDefaults()
	longest := dest.Timeout
	if md, ok := dest.Deliverer.(maxDurationer); ok {
		longest = max(longest, md.MaxDuration())
		if dest.Timeout <= 0 { // the deliverer enforces its own timeout
			dest.Timeout = md.MaxDuration()
		}
	}
	if dest.Timeout <= 0 { // a deliverer with no timeout of its own: as HTTP's
		dest.Timeout = DefaultHTTPTimeout
	}
	longest = max(longest, dest.Timeout)
	return &dispatcher{
		p:        p,
		dest:     dest,
		fp:       fingerprintOf(dest),
		leaseFor: longest + p.opt.LeaseMargin,
		wake:     make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		log:      p.opt.Logger.With("destination", dest.Name),
		done:     make(chan struct{}),
		since:    time.Now(),
		running:  map[int64]time.Time{},
	}
}

// begin makes d accept work under ctx.
func (d *dispatcher) begin(ctx context.Context) {
	// Attempts outlive ctx by up to the drain timeout: they run under hard.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	now := time.Now()
	d.mu.Lock()
	d.ctx, d.hard, d.cancelHard = ctx, hard, cancelHard
	d.accepting = true
	d.beat = now
	d.mu.Unlock()
	d.runAt.Store(now.UnixNano())
}

// serve is the dispatcher's goroutine: wait for the predecessor, deliver
// until ctx ends, drain, close the deliverer.
func (d *dispatcher) serve(ctx context.Context) {
	defer close(d.done)
	defer func() {
		if !d.keepDeliverer.Load() {
			closeDeliverer(d.dest.Deliverer)
		}
	}()
	if d.after != nil {
		select {
		case <-d.after:
		case <-ctx.Done():
			// Stopped before it began; still wait so that done keeps
			// meaning "nothing of this destination is in flight".
			<-d.after
			return
		}
		d.begin(ctx)
	}
	d.run(ctx)
	d.drain()
}

// drain stops accepting, lets in-flight attempts finish for up to the drain
// timeout, then cancels them and waits.
func (d *dispatcher) drain() {
	// No new attempts from Hand once draining: their jobs are given back.
	d.setAccepting(false)
	defer d.cancelHard()
	timeout := d.p.opt.DrainTimeout
	d.log.Info("workers draining", "timeout", timeout)
	idle := make(chan struct{})
	go func() { d.wg.Wait(); close(idle) }() // ends before drain returns: drain waits for idle
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-idle:
			d.log.Info("workers stopped")
			return
		case <-t.C:
		}
	}
	d.log.Warn("drain timeout: cancelling in-flight attempts")
	d.cancelHard()
	<-idle
	d.log.Info("workers stopped")
}

// health is d's part of Pool.Healthy.
func (d *dispatcher) health(now time.Time) error {
	name := d.dest.Name
	if d.runAt.Load() == 0 {
		select {
		case <-d.done:
			return fmt.Errorf("worker %s: %w", name, ErrNotRunning)
		default:
		}
		if age := now.Sub(d.since); age > d.p.handoffLimit() {
			return fmt.Errorf("worker %s: still waiting after %s for the replaced workers to drain",
				name, age.Round(time.Second))
		}
		return nil
	}
	var errs []error
	d.mu.Lock()
	defer d.mu.Unlock()
	if age := now.Sub(d.beat); age > d.p.wedgeAfter {
		errs = append(errs, fmt.Errorf("worker %s: wedged, no progress for %s", name, age.Round(time.Second)))
	}
	for id, start := range d.running {
		// Past its lease, the job may be leased again: the deliverer (or
		// Finish) ignores its context.
		if age := now.Sub(start); age > d.leaseFor {
			errs = append(errs, fmt.Errorf("worker %s: attempt of job %d stuck for %s, beyond its lease of %s",
				name, id, age.Round(time.Millisecond), d.leaseFor))
		}
	}
	if d.errStreak >= unhealthyStreak {
		errs = append(errs, fmt.Errorf("worker %s: %d queue errors in a row: %w", name, d.errStreak, d.lastErr))
	}
	return errors.Join(errs...)
}

func (d *dispatcher) notify() {
	select {
	case d.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// reserve takes a free slot for a job the store is about to create leased.
func (d *dispatcher) reserve() (hookwarden.Slot, bool) {
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

// LeaseFor is the lease of a job handed to a slot of d (hookwarden.Slot).
func (d *dispatcher) LeaseFor() time.Duration { return d.leaseFor }

// Release gives back a slot taken by Reserve whose job was not committed.
func (d *dispatcher) Release() { d.slotDone() }

// unleaseTimeout bounds the write that gives a refused job back.
const unleaseTimeout = 5 * time.Second

// Hand runs the first attempt of a job the store committed leased to a slot
// taken by Reserve (hookwarden.Slot). It never blocks. While draining it
// gives the slot back and the job's lease too, so that the dispatcher
// taking over after a reload finds it due at once rather than when the lease
// ends.
func (d *dispatcher) Hand(job hookwarden.Job) {
	d.mu.Lock()
	if !d.accepting {
		d.mu.Unlock()
		d.slotDone()
		// Not in d.wg: drain may already be waiting on it. Hand runs on the
		// store's writer, so the write must not be waited for here.
		go d.unlease(job)
		return
	}
	// Under mu while accepting: drain's Wait cannot have begun (it sets
	// accepting false under mu first), so this Add is not racing it.
	d.wg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.wg.Done()
		d.work(job)
	}()
}

// unlease gives back the lease of a job this dispatcher will not run: it
// began draining, so the one taking over finds the job due at once rather
// than when the lease ends.
func (d *dispatcher) unlease(job hookwarden.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), unleaseTimeout)
	defer cancel()
	if err := d.p.q.Unlease(ctx, job); err != nil {
		d.log.Warn("a job leased while draining keeps its lease until it ends or the next start",
			"job", job.ID, "err", err)
	}
}

// work runs a job (and any chained after it) in a slot taken for it, then
// frees the slot.
func (d *dispatcher) work(job hookwarden.Job) {
	d.attempts(job)
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
// or the poll interval. Attempts are added to d.wg.
func (d *dispatcher) run(ctx context.Context) {
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
				if ctx.Err() != nil {
					// Retired (a reload removed or replaced the
					// destination) while the lease was in flight: its jobs
					// go back, as a job handed over while draining does.
					d.give(free)
					for _, job := range jobs {
						d.unlease(job)
					}
					return
				}
				d.give(free - len(jobs))
				for _, job := range jobs {
					d.wg.Go(func() { d.work(job) })
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
		d.log.Error("lease returned more jobs than asked", "asked", free, "got", len(jobs))
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

// chainMaxConcurrency: destinations with at most this many slots lease
// through finishing attempts (Queue.FinishAndLease, one job each); wider
// ones are better served by the dispatcher leasing every freed slot in one
// statement and loading the events in one query. Measured with
// BenchmarkPoolDeliver on SQLite (jobs/s, chained vs dispatcher only): 4
// slots 4,200 vs 2,200; 16: 7,500 vs 6,100; 32: 8,400 vs 10,200; 64: 9,800
// vs 14,000 (docs/performance.md).
const chainMaxConcurrency = 16

// attempts runs the attempt of a leased job in its slot and, while d runs
// (its context is not done), the destination's next due job in the same
// slot, leased in the write that records the attempt.
func (d *dispatcher) attempts(job hookwarden.Job) {
	for {
		next, ok := d.attempt(job)
		if !ok {
			return
		}
		job = next
	}
}

// attempt runs one delivery attempt of a leased job and records it. While
// d runs, the same write may lease the next due job of the destination,
// which attempt returns with ok.
func (d *dispatcher) attempt(job hookwarden.Job) (next hookwarden.Job, ok bool) {
	p := d.p
	run, hard, log := d.ctx, d.hard, d.log
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
	// leased only while d runs. Chained (finish and lease the next job in
	// one write, keeping the slot) for narrow destinations while jobs may be
	// waiting in the store (hint); otherwise the slot is freed as soon as
	// the delivery returned and the attempt is recorded in the background:
	// a slot that waited for the commit would spend most of its time
	// waiting for the writer, not delivering. A crash before that commit
	// leaves the job leased, so it is delivered again after the restart,
	// with the same key: at-least-once holds.
	if d.dest.Concurrency > chainMaxConcurrency || run.Err() != nil || !d.hint.Load() {
		d.wg.Go(func() { d.record(job, a, nil) })
		return hookwarden.Job{}, false
	}
	var more []hookwarden.Job
	d.record(job, a, func(ctx context.Context) (err error) {
		more, err = p.q.FinishAndLease(ctx, a, d.dest.Name, 1, d.leaseFor)
		return err
	})
	if len(more) > 0 && run.Err() != nil {
		// Retired while the write was in flight: the next job goes back.
		d.unlease(more[0])
		return hookwarden.Job{}, false
	}
	if len(more) > 0 {
		return more[0], true
	}
	return hookwarden.Job{}, false
}

// record records attempt a of job with finish (nil: Queue.Finish), then logs
// it and reports it to Options.OnAttempt. A failed record leaves the job
// leased: it is due again when the lease expires, so at-least-once holds.
func (d *dispatcher) record(job hookwarden.Job, a hookwarden.Attempt, finish func(context.Context) error) {
	p, log := d.p, d.log
	if finish == nil {
		finish = func(ctx context.Context) error { return p.q.Finish(ctx, a) }
	}
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(d.hard), finishTimeout)
	err := finish(fctx)
	fcancel()
	if err != nil {
		err = fmt.Errorf("finish: %w", err)
	}
	d.queueResult(err)
	if err != nil {
		log.Error("recording attempt failed; job will be retried when its lease expires",
			"job", job.ID, "attempt", a.Number, "verdict", a.Verdict, "err", err)
	} else if d.dest.Ordered && a.Verdict != hookwarden.Retry {
		// The store made the next job of the key due: lease it now.
		d.hint.Store(true)
		select {
		case d.freed <- struct{}{}:
		default:
		}
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
