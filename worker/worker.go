// Package worker delivers the jobs of the store's outbox (SQLite or
// PostgreSQL) to the user's application, over HTTP or by running a command.
//
// What it guarantees:
//
//   - The database is the truth. A job exists in memory only while it is
//     leased, and the lease outlives the longest attempt the pool can run
//     (timeout + kill grace + Options.LeaseMargin), so a job is never in
//     flight twice at once, and a job whose process died becomes due again
//     when its lease expires.
//   - At most Destination.Concurrency attempts per destination are in flight,
//     across Pool.Apply too: a changed destination's new dispatcher starts
//     only once the old one drained.
//   - The pool alone schedules: it starts, hands over and stops the
//     dispatchers, reports their health, and closes each deliverer it was
//     given when that is no longer used.
//   - Every attempt, including one cut short by shutdown, is recorded with
//     Queue.Finish (or FinishAndLease): time, duration, status or exit code, error, capped response.
//   - Delivery is at-least-once, always with the same idempotency key
//     ("SOURCE:EVENT_ID"), so an app that honours the key sees each effect once.
//   - A panic (or runtime.Goexit) in a Deliverer is a transient failure of that
//     attempt, not a crash of the process.
package worker

import (
	"context"
	"math"
	"time"

	"github.com/hookwarden/hookwarden"
)

// The delivery defaults, written here only: the config layer fills a
// destination's unset keys with them (config.ApplyDefaults), and the pool
// applies them to a Destination's zero fields. DefaultHTTPTimeout and
// DefaultCommandTimeout are with their deliverers (http.go, command.go).
// docs/reference.md lists them; a test in internal/config keeps it true.
const (
	// DefaultMaxAttempts: with the default backoff, 12 attempts span roughly
	// half a day to a day of retries before a job is dead-lettered.
	DefaultMaxAttempts = 12
	// DefaultHTTPConcurrency is the concurrency the config layer uses for an
	// HTTP destination without one: small, because the app is usually local
	// and a retry storm should not overwhelm it (the app is most fragile right after an outage).
	DefaultHTTPConcurrency = 4
	// DefaultCommandConcurrency is the concurrency the config layer uses for
	// a command destination without one. Commands are run one at a time by
	// default: scripts are rarely written to run concurrently (shared files,
	// locks, a single-threaded tool behind them), and each one is a process.
	DefaultCommandConcurrency = 1
)

// DefaultBackoff is used for the zero fields of a Destination's Backoff.
var DefaultBackoff = Backoff{Initial: time.Second, Max: time.Hour}

// Queue is the part of the store the workers use, all of it. Both stores
// (sqlitestore, pgstore) implement it.
type Queue interface {
	// Lease marks up to max due pending jobs of the destination as in flight
	// until now+leaseFor (an expired lease makes the job due again: no
	// separate rescuer), increments their attempt count and returns them with
	// body, content type and event fields filled.
	Lease(ctx context.Context, destination string, max int, leaseFor time.Duration) ([]hookwarden.Job, error)
	// Finish records the attempt and applies its Verdict: Delivered, Retry
	// (due again at a.RetryAt), Dead.
	Finish(ctx context.Context, a hookwarden.Attempt) error
	// FinishAndLease is Finish, then Lease of up to max jobs of the
	// destination, in one write (both happen or neither): a slot that stays
	// busy costs one commit per delivery instead of two.
	FinishAndLease(ctx context.Context, a hookwarden.Attempt, destination string, max int, leaseFor time.Duration) ([]hookwarden.Job, error)
	// Unlease gives back the lease of a job the store handed to a slot
	// (hookwarden.Slot) whose dispatcher began draining: the attempt is not
	// counted and the job is due now. A job leased again or finished since
	// is left alone.
	Unlease(ctx context.Context, job hookwarden.Job) error
	// NextDue is the earliest due time of a pending job of the destination
	// (ok=false: none). A cheap indexed read.
	NextDue(ctx context.Context, destination string) (t time.Time, ok bool, err error)
}

// Deliverer makes one delivery attempt of a job. It must return soon after
// ctx is done: the pool waits for it, and its lease only covers the
// destination's timeout plus a margin.
type Deliverer interface {
	Deliver(ctx context.Context, job *hookwarden.Job) Result
}

// Class is how an attempt's outcome counts for its job.
type Class int

const (
	// Success: the destination took the event; the job is delivered.
	Success Class = iota + 1
	// Transient: try again later (until MaxAttempts).
	Transient
	// Permanent: the destination declared the event poison; dead at once.
	Permanent
)

// String returns the lowercase name of the class.
func (c Class) String() string {
	switch c {
	case Success:
		return "success"
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	}
	return "unknown"
}

// Result is the outcome of one attempt as a Deliverer reports it. A zero
// Class counts as Transient: a deliverer that forgot to classify must not
// lose or dead-letter an event.
type Result struct {
	StatusCode int // HTTP status, 0 if none
	ExitCode   int // command exit code, -1 if none (not a command, killed, not started)
	Err        error
	Response   []byte // capped response body or command output
	Class      Class
	// RetryAfter is the destination's own wish (HTTP Retry-After); NextDelay
	// honours it up to Backoff.Max.
	RetryAfter time.Duration
	TimedOut   bool
}

// Backoff shapes the delays between attempts; see NextDelay.
type Backoff struct {
	Initial time.Duration // ceiling of the first delay; default 1s
	Max     time.Duration // cap of every delay, Retry-After included; default 1h
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoff.Max
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	return b
}

// Destination is one "source/name" target with its delivery policy.
type Destination struct {
	Name      string // "source/name", as in hookwarden.Job.Destination
	Deliverer Deliverer
	// Concurrency is the most attempts in flight at once; default 1 (see
	// DefaultHTTPConcurrency and DefaultCommandConcurrency for what the
	// config layer should apply per kind).
	Concurrency int
	// MaxAttempts: a transient failure of attempt MaxAttempts dead-letters the
	// job; default DefaultMaxAttempts.
	MaxAttempts int
	Backoff     Backoff
	// Ordered: the store keeps an order_by for this destination, and a
	// delivered or dead-lettered job may have made the next job of its key
	// due; the dispatcher leases again after recording one, instead of at
	// its next poll.
	Ordered bool
	// Timeout bounds one attempt (the pool cancels the deliverer's context);
	// default the deliverer's own (HTTP and Command enforce theirs), else
	// DefaultHTTPTimeout. The lease is derived from it (longer than any attempt, so a live attempt is never leased twice).
	Timeout time.Duration
}

// NextDelay is the retry policy: the delay after the failed attempt number
// attempt (1-based). It is exponential with full jitter, capped at b.Max:
// rnd (in [0,1]) times min(b.Max, b.Initial·2^(attempt-1)). A retryAfter
// asked by the destination is honoured up to b.Max: the delay is never
// shorter than min(retryAfter, b.Max). Zero fields of b take DefaultBackoff.
func NextDelay(attempt int, b Backoff, retryAfter time.Duration, rnd float64) time.Duration {
	b = b.withDefaults()
	if attempt < 1 {
		attempt = 1
	}
	if !(rnd >= 0) { // NaN too
		rnd = 0
	}
	if rnd > 1 {
		rnd = 1
	}
	ceiling := b.Max
	if e := float64(b.Initial) * math.Exp2(float64(attempt-1)); e < float64(b.Max) {
		ceiling = time.Duration(e)
	}
	d := time.Duration(rnd * float64(ceiling))
	if retryAfter > 0 {
		d = max(d, min(retryAfter, b.Max))
	}
	return d
}
