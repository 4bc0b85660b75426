package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// chainQueue is a memQueue that counts the jobs leased by finishing
// attempts (FinishAndLease) and the dispatcher's leases.
type chainQueue struct {
	*memQueue
	chained, leases atomic.Int32
}

func newChainQueue() *chainQueue {
	q := &chainQueue{memQueue: newMemQueue(nil)}
	lease, finishAndLease := q.LeaseFunc, q.FinishAndLeaseFunc
	q.LeaseFunc = func(ctx context.Context, dest string, limit int, leaseFor time.Duration) ([]hookwarden.Job, error) {
		q.leases.Add(1)
		return lease(ctx, dest, limit, leaseFor)
	}
	q.FinishAndLeaseFunc = func(ctx context.Context, a hookwarden.Attempt, dest string, limit int, leaseFor time.Duration) ([]hookwarden.Job, error) {
		jobs, err := finishAndLease(ctx, a, dest, limit, leaseFor)
		q.chained.Add(int32(len(jobs)))
		return jobs, err
	}
	return q
}

// TestChainedAttemptsKeepTheLimit: with a queue that leases in the write
// that records an attempt, a slot runs job after job; the concurrency limit
// holds and every job is delivered once.
func TestChainedAttemptsKeepTheLimit(t *testing.T) {
	t.Parallel()
	const concurrency, jobs = 3, 30
	q := newChainQueue()
	ids := q.addN(jobs)
	var g peakGauge
	var calls atomic.Int32
	d := deliverFunc(func(ctx context.Context, job *hookwarden.Job) Result {
		defer g.enter()()
		calls.Add(1)
		time.Sleep(2 * time.Millisecond)
		return Result{Class: Success}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Concurrency: concurrency}},
		Options{PollInterval: 10 * time.Millisecond})
	MustOpen(t, p)
	for _, id := range ids {
		if got := q.MustFinal(t, id); got[len(got)-1].Verdict != hookwarden.Delivered {
			t.Fatalf("job %d ended %s", id, got[len(got)-1].Verdict)
		}
	}
	if got := g.peak.Load(); got > concurrency {
		t.Errorf("peak in-flight attempts = %d, want at most %d", got, concurrency)
	}
	if got := calls.Load(); got != jobs {
		t.Errorf("%d attempts for %d jobs, want one each", got, jobs)
	}
	if q.chained.Load() == 0 {
		t.Error("no job was leased by a finishing attempt")
	}
	t.Logf("%d jobs: %d leased by finishing attempts, %d dispatcher leases", jobs, q.chained.Load(), q.leases.Load())
}

// TestDrainStopsChaining: once the pool drains, a finishing attempt records
// its verdict but leases nothing more.
func TestDrainStopsChaining(t *testing.T) {
	t.Parallel()
	q := newChainQueue()
	first := q.add("s/app", "evt_first", nil)
	second := q.add("s/app", "evt_second", nil)
	started, release := make(chan struct{}), make(chan struct{})
	d := deliverFunc(func(ctx context.Context, job *hookwarden.Job) Result {
		if job.ID == first {
			close(started)
			<-release
		}
		return Result{Class: Success}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Concurrency: 1}},
		Options{PollInterval: time.Hour, DrainTimeout: 10 * time.Second})
	stop := MustOpen(t, p)
	<-started
	go func() { time.Sleep(50 * time.Millisecond); close(release) }()
	stop() // drains: the first attempt finishes, nothing else starts
	if got := q.MustFinal(t, first); got[len(got)-1].Verdict != hookwarden.Delivered {
		t.Fatalf("first job: %v", got)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range q.jobs {
		if j.job.ID == second && j.job.Attempt != 0 {
			t.Errorf("the second job was leased during the drain (attempt %d)", j.job.Attempt)
		}
	}
}
