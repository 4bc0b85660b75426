package worker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// gatedQueue is a memQueue whose Finish waits until the gate opens: a
// writer that is slow to commit.
type gatedQueue struct {
	*memQueue
	gate    chan struct{}
	waiting atomic.Int32
}

func newGatedQueue() *gatedQueue {
	q := &gatedQueue{memQueue: newMemQueue(nil), gate: make(chan struct{})}
	finish := q.FinishFunc
	q.FinishFunc = func(ctx context.Context, a hookwarden.Attempt) error {
		q.waiting.Add(1)
		select {
		case <-q.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		return finish(ctx, a)
	}
	return q
}

// TestSlotFreedBeforeFinishCommits: a wide destination's slot takes its
// next job as soon as the delivery returned, while the attempt is still
// being recorded, so delivery is not paced by commits. The limit still
// holds, and Close waits for the pending records before it returns.
func TestSlotFreedBeforeFinishCommits(t *testing.T) {
	t.Parallel()
	const concurrency = chainMaxConcurrency + 1
	const jobs = 3 * concurrency
	q := newGatedQueue()
	ids := q.addN(jobs)
	var g peakGauge
	var delivered atomic.Int32
	d := deliverFunc(func(ctx context.Context, job *hookwarden.Job) Result {
		defer g.enter()()
		delivered.Add(1)
		return Result{Class: Success}
	})
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Concurrency: concurrency}},
		Options{PollInterval: 10 * time.Millisecond})
	stop := MustOpen(t, p)
	deadline := time.Now().Add(10 * time.Second)
	for delivered.Load() < jobs && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := delivered.Load(); got != jobs {
		t.Fatalf("%d of %d jobs delivered while no attempt could be recorded; slots wait for commits", got, jobs)
	}
	if got := g.peak.Load(); got > concurrency {
		t.Errorf("peak in-flight deliveries %d, want at most %d", got, concurrency)
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Close returned with attempts not yet recorded")
	case <-time.After(50 * time.Millisecond):
	}
	close(q.gate)
	<-stopped
	for _, id := range ids {
		if got := q.MustFinal(t, id); got[len(got)-1].Verdict != hookwarden.Delivered {
			t.Errorf("job %d ended %s", id, got[len(got)-1].Verdict)
		}
	}
}

// TestReserveHandRelease: the store's Direct hand-over shares the
// destination's slots with the dispatcher: Reserve takes one (none when all
// are taken), Hand runs the committed job in it, Release gives it back, and
// a pool that stopped reserves nothing.
func TestReserveHandRelease(t *testing.T) {
	t.Parallel()
	q := newMemQueue(nil)
	block := make(chan struct{})
	got := make(chan hookwarden.Job, 4)
	d := deliverFunc(func(ctx context.Context, job *hookwarden.Job) Result {
		got <- *job
		<-block
		return Result{Class: Success}
	})
	// No polling: the dispatcher leases only at start and when a slot frees.
	p := New(q, []Destination{{Name: "s/app", Deliverer: d, Concurrency: 2}}, Options{PollInterval: time.Hour})
	if _, ok := p.Reserve("s/app"); ok {
		t.Fatal("Reserve succeeded before Open")
	}
	stop := MustOpen(t, p)
	// A lease cycle of the dispatcher (its first, and one after each refused
	// Reserve left a hint) holds the free slots while it asks the store: take
	// the two slots as they come back.
	var slots []hookwarden.Slot
	for deadline := time.Now().Add(5 * time.Second); len(slots) < 2 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if s, ok := p.Reserve("s/app"); ok {
			slots = append(slots, s)
		}
	}
	if len(slots) < 2 {
		t.Fatal("Reserve refused with free slots")
	}
	a, b := slots[0], slots[1]
	if _, ok := p.Reserve("s/app"); ok {
		t.Fatal("Reserve gave a third slot of two")
	}
	if _, ok := p.Reserve("s/other"); ok {
		t.Fatal("Reserve gave a slot of an unknown destination")
	}
	if a.LeaseFor() != p.LeaseFor("s/app") {
		t.Errorf("slot lease %s, want the destination's %s", a.LeaseFor(), p.LeaseFor("s/app"))
	}
	// The job the store committed leased (memQueue knows it as leased too).
	id := q.add("s/app", "evt_direct", []byte(`{}`))
	q.mu.Lock()
	q.jobs[0].leaseUntil = time.Now().Add(time.Minute)
	job := q.jobs[0].job
	q.mu.Unlock()
	job.Attempt = 1
	a.Hand(job)
	select {
	case j := <-got:
		if j.ID != id || j.Attempt != 1 {
			t.Fatalf("delivered %+v, want job %d attempt 1", j, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Hand did not run the job")
	}
	b.Release() // the dispatcher may briefly hold it for a lease
	var c hookwarden.Slot
	for deadline := time.Now().Add(5 * time.Second); c == nil && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		c, _ = p.Reserve("s/app")
	}
	if c == nil {
		t.Fatal("a released slot was not free again")
	}
	c.Release()
	close(block)
	if got := q.MustFinal(t, id); got[0].Verdict != hookwarden.Delivered || got[0].Number != 1 {
		t.Errorf("attempt %+v, want attempt 1 delivered", got[0])
	}
	stop()
	if _, ok := p.Reserve("s/app"); ok {
		t.Error("Reserve succeeded after Close")
	}
}
