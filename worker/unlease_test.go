package worker_test

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
	"github.com/hookwarden/hookwarden/worker"
)

type deliverFunc func(ctx context.Context, job *hookwarden.Job) worker.Result

func (f deliverFunc) Deliver(ctx context.Context, job *hookwarden.Job) worker.Result {
	return f(ctx, job)
}

// drainingSlot stands for the few milliseconds of a reload in which the
// store has reserved a slot of the old pool for a new job and the old pool
// starts draining before the commit hands the job over.
type drainingSlot struct {
	hookwarden.Slot
	drain func()
}

func (s drainingSlot) Hand(job hookwarden.Job) {
	s.drain()
	s.Slot.Hand(job)
}

type drainOnReserve struct {
	p     *worker.Pool
	drain func()
}

// Reserve waits out a lease cycle of the old pool's dispatcher (a freed slot
// wakes it; its take holds every slot for a moment). Spinning on the writer
// is safe only because leaseSignal answers every lease after the first
// without the writer.
func (d drainOnReserve) Reserve(dest string) (hookwarden.Slot, bool) {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if slot, ok := d.p.Reserve(dest); ok {
			return drainingSlot{Slot: slot, drain: d.drain}, true
		}
	}
	return nil, false
}

// leaseSignal tells when a Lease returned. Only the first lease reaches the
// store: the old pool must never take the job by leasing it (the property
// under test is the hand-over), and later leases must not need the writer
// (see drainOnReserve).
type leaseSignal struct {
	*sqlitestore.Store
	leased chan struct{}
	calls  atomic.Int32
}

func (q *leaseSignal) Lease(ctx context.Context, dest string, max int, leaseFor time.Duration) ([]hookwarden.Job, error) {
	var jobs []hookwarden.Job
	var err error
	if q.calls.Add(1) == 1 {
		jobs, err = q.Store.Lease(ctx, dest, max, leaseFor)
	}
	select {
	case q.leased <- struct{}{}:
	default:
	}
	return jobs, err
}

// TestDrainingPoolGivesHandedJobBack: a job handed to a pool that began
// draining (a reload) is not left leased until its lease ends: the pool
// taking over delivers it at once, as attempt 1, and the old pool never
// delivers it.
func TestDrainingPoolGivesHandedJobBack(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "hw.db"), sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const dest = "std/app"
	q := &leaseSignal{Store: s, leased: make(chan struct{}, 1)}
	old := worker.New(q, []worker.Destination{{Name: dest, Concurrency: 2, Timeout: time.Minute,
		Deliverer: deliverFunc(func(ctx context.Context, job *hookwarden.Job) worker.Result {
			t.Errorf("the draining pool delivered job %d", job.ID)
			return worker.Result{Class: worker.Success}
		})}}, worker.Options{PollInterval: time.Hour})
	if err := old.Open(ctx); err != nil {
		t.Fatal(err)
	}
	// The dispatcher's first lease (nothing due) holds the free slots until
	// it gives them back; after that, with an hour's poll and no job
	// waiting, it leases nothing until stopped.
	<-q.leased
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if slot, ok := old.Reserve(dest); ok {
			slot.Release()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old pool never had a free slot")
		}
	}
	// Drain on the writer, after the reservation and before the hand-over:
	// close the old pool, which waits for it to drain. Safe here: with an
	// hour's poll and no hint its dispatcher is idle, not waiting on the
	// writer.
	drain := old.Close
	s.SetDirect(drainOnReserve{p: old, drain: drain})

	body := []byte(`{"id":"evt_reload"}`)
	sum := sha256.Sum256(body)
	res, err := s.Record(ctx, &hookwarden.Receipt{Source: "std", Header: http.Header{"Content-Type": {"application/json"}},
		Body: body, BodySHA256: sum, RemoteAddr: "127.0.0.1:5555", ReceivedAt: time.Now(),
		Events: []hookwarden.Event{{ID: "evt_reload", Type: "t", BodySHA256: sum, Destinations: []string{dest}}}})
	if err != nil || res.Outcome != hookwarden.Accepted {
		t.Fatalf("Record = %+v, %v", res, err)
	}
	if old.Healthy() != worker.ErrNotRunning {
		t.Fatal("the job was not handed to the old pool's slot (no drain ran)")
	}

	// The pool taking over. The handed job's lease would last the timeout
	// plus 30 s, far beyond the wait below, so it is delivered in time only
	// if it was given back (found by the first lease or a 200 ms poll).
	got := make(chan hookwarden.Job, 1)
	next := worker.New(s, []worker.Destination{{Name: dest, Concurrency: 2, Timeout: time.Minute,
		Deliverer: deliverFunc(func(ctx context.Context, job *hookwarden.Job) worker.Result {
			got <- *job
			return worker.Result{Class: worker.Success}
		})}}, worker.Options{PollInterval: 200 * time.Millisecond})
	s.SetDirect(next)
	if err := next.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	select {
	case job := <-got:
		if job.EventID != "evt_reload" || job.Attempt != 1 {
			t.Errorf("delivered %s as attempt %d, want evt_reload as attempt 1", job.EventID, job.Attempt)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job handed to the draining pool was not delivered by the next one (still leased?)")
	}
}
