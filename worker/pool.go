package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookwarden/hookwarden"
)

// ErrNotRunning is returned by Healthy before Open, and once Close began.
var ErrNotRunning = errors.New("worker pool not running")

// ErrClosed is returned by Apply and Open after Close.
var ErrClosed = errors.New("worker: pool closed")

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
	// handoffSlack is added to the drain timeout to get how long a replaced
	// destination's successor may wait for its predecessor before Healthy
	// complains: room to record the last attempts.
	handoffSlack = 30 * time.Second
)

// Options tune a Pool. The zero value is usable.
type Options struct {
	Logger *slog.Logger // default: discard
	// PollInterval is the longest a dispatcher waits without asking the store;
	// default DefaultPollInterval.
	PollInterval time.Duration
	// DrainTimeout is how long in-flight attempts of a stopping dispatcher
	// (Close, or a destination replaced or removed by Apply) may go on before
	// they are cancelled too and recorded as Retry due at once; default
	// DefaultDrainTimeout, negative: cancel at once.
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

// A Pool owns the scheduling of every destination: one dispatcher each,
// started by Open, changed by Apply while it runs, stopped by Close. It
// owns the deliverers it is given too, and closes each when its dispatcher
// stopped (or at once, if Apply found the destination unchanged).
//
// A destination that Apply finds changed is handed over: the old dispatcher
// stops leasing and drains its in-flight attempts, and only then its
// successor starts, so a destination never has more than its concurrency in
// flight, and the other destinations are not disturbed.
type Pool struct {
	q   Queue
	opt Options
	log *slog.Logger
	err error // configuration error of New's destinations, returned by Open

	// The dispatcher serving each destination now, read on every receipt
	// (Reserve, NotifyCreated); Apply replaces the whole map.
	active  atomic.Pointer[map[string]*dispatcher]
	running atomic.Bool // between Open and Close

	mu     sync.Mutex // Apply, Open and Close, one at a time
	state  poolState
	parent context.Context // Open's, without its cancellation: parent of every dispatcher's
	all    sync.WaitGroup  // every dispatcher's goroutine, replaced ones still draining included

	opTimeout  time.Duration // queueOpTimeout; tests shorten it
	wedgeAfter time.Duration
	slack      time.Duration // handoffSlack; tests shorten it
}

type poolState int

const (
	poolNew poolState = iota
	poolOpen
	poolClosed
)

// Changes says what Apply did to the running destinations.
type Changes struct {
	Kept, Replaced, Added int
	Removed               []string // sorted
}

// New returns a pool delivering from q to dests, which is Apply(dests)
// before Open. A configuration error (nil queue, a destination without a
// name or a deliverer, a name listed twice) is returned by Open.
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
	p := &Pool{q: q, opt: opt, log: opt.Logger, opTimeout: queueOpTimeout, slack: handoffSlack}
	p.wedgeAfter = p.opTimeout + 3*opt.PollInterval
	empty := map[string]*dispatcher{}
	p.active.Store(&empty)
	if q == nil {
		p.err = errors.New("worker: nil queue")
	}
	if _, err := p.Apply(dests); err != nil {
		p.err = errors.Join(p.err, err)
	}
	return p
}

// Apply makes dests the pool's destinations. One whose settings are
// unchanged (fingerprint) keeps its dispatcher, and the deliverer given for
// it is closed unused; a changed one gets a new dispatcher that starts once
// the old one drained; a new one starts at once; one no longer listed is
// drained and stopped. Its jobs stay in the store. Before Open, dispatchers
// wait for Open.
//
// The pool owns every deliverer in dests from the call on, error or not. On
// error (an invalid destination, or ErrClosed) nothing changed.
func (p *Pool) Apply(dests []Destination) (Changes, error) {
	var ch Changes
	if err := validate(dests); err != nil {
		closeDeliverers(dests)
		return ch, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == poolClosed {
		closeDeliverers(dests)
		return ch, ErrClosed
	}
	cur := *p.active.Load()
	next := make(map[string]*dispatcher, len(dests))
	for _, dest := range dests {
		d := p.newDispatcher(dest)
		old := cur[dest.Name]
		switch {
		case old != nil && reflect.DeepEqual(old.fp, d.fp):
			if !sameDeliverer(old.dest.Deliverer, dest.Deliverer) {
				closeDeliverer(dest.Deliverer)
			}
			next[dest.Name] = old
			ch.Kept++
			continue
		case old != nil:
			if sameDeliverer(old.dest.Deliverer, dest.Deliverer) {
				old.keepDeliverer.Store(true) // the successor goes on with it
			}
			d.after = p.retire(old)
			ch.Replaced++
		default:
			ch.Added++
		}
		next[dest.Name] = d
		if p.state == poolOpen {
			p.launch(d)
		}
	}
	for name, old := range cur {
		if next[name] == nil {
			p.retire(old)
			ch.Removed = append(ch.Removed, name)
		}
	}
	slices.Sort(ch.Removed)
	p.active.Store(&next)
	return ch, nil
}

// validate refuses what no dispatcher can serve.
func validate(dests []Destination) error {
	var errs []error
	seen := make(map[string]bool, len(dests))
	for _, d := range dests {
		switch {
		case d.Name == "":
			errs = append(errs, errors.New("worker: destination without a name"))
			continue
		case seen[d.Name]:
			errs = append(errs, fmt.Errorf("worker: destination %q listed twice", d.Name))
			continue
		case d.Deliverer == nil:
			errs = append(errs, fmt.Errorf("worker: destination %q has no deliverer", d.Name))
		}
		seen[d.Name] = true
	}
	return errors.Join(errs...)
}

// Open starts every destination's dispatcher and returns. ctx is the parent
// of the dispatchers' contexts for its values only: Close, not ctx, stops
// them. It returns New's configuration error, or an error if the pool was
// opened before.
func (p *Pool) Open(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case poolOpen:
		return errors.New("worker: pool already open")
	case poolClosed:
		return ErrClosed
	}
	p.parent = context.WithoutCancel(ctx)
	p.state = poolOpen
	active := *p.active.Load()
	for _, d := range active {
		p.launch(d)
	}
	p.running.Store(true)
	p.log.Info("workers started", "destinations", len(active))
	return nil
}

// Close stops every dispatcher, replaced ones still draining included, and
// waits: each stops leasing, lets its in-flight attempts finish for up to
// Options.DrainTimeout, then cancels the rest (recorded as Retry due at
// once). Jobs handed over by the store while it drains get their lease back
// (Queue.Unlease). Closing again waits as well.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.state != poolClosed {
		p.state = poolClosed
		p.running.Store(false)
		for _, d := range *p.active.Load() {
			p.retire(d)
		}
	}
	p.mu.Unlock()
	p.all.Wait()
}

// launch starts d under the pool's running context. Under p.mu.
func (p *Pool) launch(d *dispatcher) {
	ctx, cancel := context.WithCancel(p.parent)
	d.cancel = cancel
	if d.after == nil {
		// At once, so that Reserve succeeds as soon as Open or Apply returns.
		d.begin(ctx)
	}
	p.all.Go(func() { d.serve(ctx) })
}

// retire stops d and returns what its successor must wait for: its done, or
// nil if it never started. Under p.mu.
func (p *Pool) retire(d *dispatcher) <-chan struct{} {
	if d.cancel == nil { // before Open: nothing runs
		if !d.keepDeliverer.Load() {
			closeDeliverer(d.dest.Deliverer)
		}
		return nil
	}
	d.cancel()
	return d.done
}

// LeaseFor returns the lease duration used for the named destination (0 if
// unknown): the longest attempt plus Options.LeaseMargin.
func (p *Pool) LeaseFor(destination string) time.Duration {
	if d := (*p.active.Load())[destination]; d != nil {
		return d.leaseFor
	}
	return 0
}

// Notify wakes the dispatchers of the named destinations, or all of them if
// none is named. It never blocks; unknown names are ignored. Commands that
// make jobs due (replay) call it.
func (p *Pool) Notify(destinations ...string) {
	active := *p.active.Load()
	if len(destinations) == 0 {
		for _, d := range active {
			d.notify()
		}
		return
	}
	for _, name := range destinations {
		if d := active[name]; d != nil {
			d.notify()
		}
	}
}

// NotifyCreated is Notify for a store that hands new jobs over through
// Reserve (hookwarden.Direct): it wakes only the destinations where a job
// had to be created without a slot, since the others' new jobs are already
// running. The receiver calls it after each commit; waking every time would
// cost a lease (a write) that finds nothing.
func (p *Pool) NotifyCreated(destinations ...string) {
	active := *p.active.Load()
	for _, name := range destinations {
		if d := active[name]; d != nil && d.hint.Load() {
			d.notify()
		}
	}
}

// Reserve takes a free slot of the destination's current dispatcher for a
// job the store is about to create leased (hookwarden.Direct). When none is
// free the job waits in the store, and the next freed slot leases it. The
// slot belongs to that dispatcher, so an Apply between Reserve and Hand
// cannot move the job to another: a dispatcher that began draining gives
// the job back (Queue.Unlease).
func (p *Pool) Reserve(destination string) (hookwarden.Slot, bool) {
	if d := (*p.active.Load())[destination]; d != nil {
		return d.reserve()
	}
	return nil, false
}

// Waiting notes that a job of the destination was created in the store
// without a slot (hookwarden.Waiter: flow control kept it from the
// hand-over), so that NotifyCreated wakes its dispatcher to lease it.
func (p *Pool) Waiting(destination string) {
	if d := (*p.active.Load())[destination]; d != nil {
		d.hint.Store(true)
	}
}

var (
	_ hookwarden.Waiter = (*Pool)(nil)
	_ hookwarden.Waker  = (*Pool)(nil)
)

// Healthy returns nil while the pool is open and every destination's
// dispatcher is turning, no attempt has outlived its lease and no
// destination has had unhealthyStreak queue errors in a row; a successor
// waiting for a replaced dispatcher to drain counts as healthy unless it
// waits beyond the drain timeout. Use it for /readyz and the systemd
// watchdog.
func (p *Pool) Healthy() error {
	if !p.running.Load() {
		return ErrNotRunning
	}
	active := *p.active.Load()
	now := time.Now()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(active)) {
		if err := active[name].health(now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// handoffLimit is how long a successor may wait for its predecessor to drain.
func (p *Pool) handoffLimit() time.Duration {
	return max(p.opt.DrainTimeout, 0) + p.slack
}

// fingerprint is what makes a destination the same across Apply calls: its
// delivery policy and its deliverer's settings (a deliverer that cannot
// tell them is compared as a value: the same pointer is the same).
type fingerprint struct {
	concurrency, maxAttempts int
	backoff                  Backoff
	timeout                  time.Duration
	ordered                  bool
	deliverer                any
}

// settingser is implemented by the package's deliverers: their settings,
// comparable with reflect.DeepEqual.
type settingser interface{ settings() any }

func fingerprintOf(d Destination) fingerprint {
	fp := fingerprint{concurrency: d.Concurrency, maxAttempts: d.MaxAttempts, backoff: d.Backoff,
		timeout: d.Timeout, ordered: d.Ordered, deliverer: d.Deliverer}
	if s, ok := d.Deliverer.(settingser); ok {
		fp.deliverer = s.settings()
	}
	return fp
}

// sameDeliverer reports whether a and b are one deliverer (never panics on
// deliverers that are not comparable, such as funcs).
func sameDeliverer(a, b Deliverer) bool {
	ta := reflect.TypeOf(a)
	return ta != nil && ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// closeDeliverer releases what a deliverer holds (idle HTTP connections).
func closeDeliverer(d Deliverer) {
	if c, ok := d.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

func closeDeliverers(dests []Destination) {
	for _, d := range dests {
		closeDeliverer(d.Deliverer)
	}
}
