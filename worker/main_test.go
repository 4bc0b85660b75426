package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hookwarden/hookwarden"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeQueue is a Queue made of function fields, so that a test replaces
// only the method it wants to change (wrap the old value to keep it).
type fakeQueue struct {
	LeaseFunc          func(ctx context.Context, dest string, max int, leaseFor time.Duration) ([]hookwarden.Job, error)
	FinishFunc         func(ctx context.Context, a hookwarden.Attempt) error
	FinishAndLeaseFunc func(ctx context.Context, a hookwarden.Attempt, dest string, max int, leaseFor time.Duration) ([]hookwarden.Job, error)
	UnleaseFunc        func(ctx context.Context, job hookwarden.Job) error
	NextDueFunc        func(ctx context.Context, dest string) (time.Time, bool, error)
}

var _ Queue = (*fakeQueue)(nil)

func (q *fakeQueue) Lease(ctx context.Context, dest string, max int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	return q.LeaseFunc(ctx, dest, max, leaseFor)
}

func (q *fakeQueue) Finish(ctx context.Context, a hookwarden.Attempt) error {
	return q.FinishFunc(ctx, a)
}

func (q *fakeQueue) FinishAndLease(ctx context.Context, a hookwarden.Attempt, dest string, max int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	return q.FinishAndLeaseFunc(ctx, a, dest, max, leaseFor)
}

func (q *fakeQueue) Unlease(ctx context.Context, job hookwarden.Job) error {
	return q.UnleaseFunc(ctx, job)
}

func (q *fakeQueue) NextDue(ctx context.Context, dest string) (time.Time, bool, error) {
	return q.NextDueFunc(ctx, dest)
}

// memQueue is an in-memory store behind a fakeQueue whose functions it sets,
// with the store's lease semantics: a job is due when pending, past its due
// time and not under an unexpired lease. It implements every method the
// store does, FinishAndLease and Unlease included, so the pool takes the
// paths it takes in production.
type memQueue struct {
	fakeQueue
	mu       sync.Mutex
	now      func() time.Time
	jobs     []*memJob
	attempts []hookwarden.Attempt
	nextID   int64
	maxAsked int // the largest max a Lease asked for

	finished chan hookwarden.Attempt // every Finish, in order
	idle     chan struct{}           // NextDue was called (non-blocking send)

	// leaseFn, when set, replaces Lease (error injection, blocking).
	leaseFn func(ctx context.Context) error
}

type memJob struct {
	job        hookwarden.Job
	state      hookwarden.JobState
	due        time.Time
	leaseUntil time.Time
	leaseFor   time.Duration
}

var _ Queue = (*memQueue)(nil)

func newMemQueue(now func() time.Time) *memQueue {
	if now == nil {
		now = time.Now
	}
	q := &memQueue{
		now:      now,
		finished: make(chan hookwarden.Attempt, 1000),
		idle:     make(chan struct{}, 100),
	}
	q.fakeQueue = fakeQueue{LeaseFunc: q.lease, FinishFunc: q.finish, FinishAndLeaseFunc: q.finishAndLease,
		UnleaseFunc: q.unlease, NextDueFunc: q.nextDue}
	return q
}

// add creates a pending job due now and returns its id.
func (q *memQueue) add(dest, eventID string, body []byte) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	source, _, _ := strings.Cut(dest, "/")
	q.jobs = append(q.jobs, &memJob{
		job: hookwarden.Job{
			ID: q.nextID, Source: source, EventID: eventID, EventType: "test.event",
			Destination: dest, ContentType: "application/json", Body: body,
			ReceivedAt: q.now(),
		},
		state: hookwarden.JobPending,
		due:   q.now(),
	})
	return q.nextID
}

func (q *memQueue) lease(ctx context.Context, dest string, limit int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	if q.leaseFn != nil {
		if err := q.leaseFn(ctx); err != nil {
			return nil, err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.maxAsked = max(q.maxAsked, limit)
	now := q.now()
	var out []hookwarden.Job
	for _, j := range q.jobs {
		if len(out) == limit {
			break
		}
		if j.job.Destination != dest || j.state != hookwarden.JobPending ||
			j.due.After(now) || j.leaseUntil.After(now) {
			continue
		}
		j.job.Attempt++
		j.leaseUntil = now.Add(leaseFor)
		j.leaseFor = leaseFor
		out = append(out, j.job)
	}
	return out, nil
}

func (q *memQueue) finish(_ context.Context, a hookwarden.Attempt) error {
	q.mu.Lock()
	for _, j := range q.jobs {
		if j.job.ID != a.JobID {
			continue
		}
		j.leaseUntil = time.Time{}
		switch a.Verdict {
		case hookwarden.Delivered:
			j.state = hookwarden.JobDelivered
		case hookwarden.Dead:
			j.state = hookwarden.JobDead
		case hookwarden.Retry:
			j.due = a.RetryAt
		}
	}
	q.attempts = append(q.attempts, a)
	q.mu.Unlock()
	q.finished <- a
	return nil
}

// finishAndLease is finish then lease, as the store does in one write.
func (q *memQueue) finishAndLease(ctx context.Context, a hookwarden.Attempt, dest string, limit int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	if err := q.finish(ctx, a); err != nil {
		return nil, err
	}
	return q.lease(ctx, dest, limit, leaseFor)
}

// unlease undoes the lease of a job handed to a slot that did not run it,
// unless it was leased again or finished since.
func (q *memQueue) unlease(_ context.Context, job hookwarden.Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range q.jobs {
		if j.job.ID == job.ID && j.state == hookwarden.JobPending && j.job.Attempt == job.Attempt && !j.leaseUntil.IsZero() {
			j.job.Attempt--
			j.due, j.leaseUntil = q.now(), time.Time{}
		}
	}
	return nil
}

func (q *memQueue) nextDue(_ context.Context, dest string) (time.Time, bool, error) {
	q.mu.Lock()
	var t time.Time
	ok := false
	for _, j := range q.jobs {
		if j.job.Destination != dest || j.state != hookwarden.JobPending {
			continue
		}
		due := j.due
		if j.leaseUntil.After(due) {
			due = j.leaseUntil
		}
		if !ok || due.Before(t) {
			t, ok = due, true
		}
	}
	q.mu.Unlock()
	select {
	case q.idle <- struct{}{}:
	default:
	}
	return t, ok, nil
}

func (q *memQueue) state(id int64) hookwarden.JobState {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range q.jobs {
		if j.job.ID == id {
			return j.state
		}
	}
	return ""
}

// MustAttempt waits for the next recorded attempt.
func (q *memQueue) MustAttempt(tb testing.TB) hookwarden.Attempt {
	tb.Helper()
	select {
	case a := <-q.finished:
		return a
	case <-time.After(10 * time.Second):
		tb.Fatal("no attempt recorded within 10s")
		return hookwarden.Attempt{}
	}
}

// MustFinal waits until the job reaches a final verdict and returns its
// attempts in order. It does not consume q.finished.
func (q *memQueue) MustFinal(tb testing.TB, id int64) []hookwarden.Attempt {
	tb.Helper()
	var got []hookwarden.Attempt
	waitFor(tb, fmt.Sprintf("job %d to be delivered or dead", id), func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		got = got[:0]
		for _, a := range q.attempts {
			if a.JobID == id {
				got = append(got, a)
			}
		}
		return len(got) > 0 && got[len(got)-1].Verdict != hookwarden.Retry
	})
	return got
}

// addN adds n pending jobs of s/app (events evt_0, evt_1, ...) and returns their ids.
func (q *memQueue) addN(n int) []int64 {
	ids := make([]int64, 0, n)
	for i := range n {
		ids = append(ids, q.add("s/app", fmt.Sprint("evt_", i), nil))
	}
	return ids
}

// peakGauge tracks the largest number of calls in progress at once.
type peakGauge struct{ cur, peak atomic.Int32 }

// enter counts a call in; the returned func counts it out.
func (g *peakGauge) enter() (leave func()) {
	n := g.cur.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	return func() { g.cur.Add(-1) }
}

// MustOpen opens p and returns a stop function (also registered as
// cleanup) that closes it, failing if Close does not return within 30s.
func MustOpen(tb testing.TB, p *Pool) (stop func()) {
	tb.Helper()
	if err := p.Open(context.Background()); err != nil {
		tb.Fatalf("Open: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			closed := make(chan struct{})
			go func() { p.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(30 * time.Second):
				tb.Error("Close did not return within 30s")
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// deliverFunc adapts a function to a Deliverer.
type deliverFunc func(ctx context.Context, job *hookwarden.Job) Result

func (f deliverFunc) Deliver(ctx context.Context, job *hookwarden.Job) Result { return f(ctx, job) }
