package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// Flow control across instances: what storetest's Flow subtests cannot
// break with one store, two instances on one database leasing at once.

// instances opens n stores on one fresh database with one clock, each
// with policies.
func instances(t *testing.T, n int, policies ...hookwarden.FlowPolicy) ([]*Store, *clock) {
	t.Helper()
	t.Parallel()
	c := &clock{t: t0}
	url := pgtest.Database(t)
	var out []*Store
	for range n {
		s := open(t, url, Options{Now: c.Now})
		if err := s.SetFlow(context.Background(), policies); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out, c
}

// leaseAtOnce has every instance lease up to max jobs of dest, w workers
// each, all at once, and returns what they got.
func leaseAtOnce(t *testing.T, stores []*Store, w int, dest string, max int) []hookwarden.Job {
	t.Helper()
	var mu sync.Mutex
	var got []hookwarden.Job
	var errs []error
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range stores {
		for range w {
			wg.Go(func() {
				<-start
				jobs, err := s.Lease(context.Background(), dest, max, time.Hour)
				mu.Lock()
				defer mu.Unlock()
				got = append(got, jobs...)
				errs = append(errs, err)
			})
		}
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestFlowConcurrencyAcrossInstances: concurrency bounds the leases in
// flight on every instance together, whatever slots each has free.
func TestFlowConcurrencyAcrossInstances(t *testing.T) {
	stores, c := instances(t, 2, hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 3})
	f := &fixture{t: t, s: stores[0]}
	for i := range 20 {
		r := receipt("std", fmt.Sprint("e", i), `{}`, "std/app")
		r.ReceivedAt = c.Now()
		f.record(r)
	}
	inflight := leaseAtOnce(t, stores, 4, "std/app", 3)
	if len(inflight) != 3 {
		t.Fatalf("8 workers on 2 instances leased %d jobs at once, want concurrency 3", len(inflight))
	}
	for round := range 5 {
		// One finishes: one slot frees across both instances.
		done := inflight[0]
		a := hookwarden.Attempt{JobID: done.ID, Number: done.Attempt, StartedAt: c.Now(), ExitCode: -1,
			StatusCode: 200, Verdict: hookwarden.Delivered}
		if err := stores[round%2].Finish(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		got := leaseAtOnce(t, stores, 4, "std/app", 3)
		if len(got) != 1 {
			t.Fatalf("round %d: with 2 in flight leased %d, want 1", round, len(got))
		}
		inflight = append(inflight[1:], got...)
	}
	// An expired lease no longer counts: its instance died.
	c.Add(2 * time.Hour)
	if got := leaseAtOnce(t, stores, 2, "std/app", 3); len(got) != 3 {
		t.Fatalf("after every lease expired leased %d, want 3", len(got))
	}
}

// TestFlowRateAcrossInstances: one bucket for every instance.
func TestFlowRateAcrossInstances(t *testing.T) {
	stores, c := instances(t, 2, hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 100,
		Rate: hookwarden.Rate{N: 5, Per: time.Second}})
	f := &fixture{t: t, s: stores[0]}
	for i := range 30 {
		r := receipt("std", fmt.Sprint("e", i), `{}`, "std/app")
		r.ReceivedAt = c.Now()
		f.record(r)
	}
	for round := range 3 {
		if got := leaseAtOnce(t, stores, 3, "std/app", 10); len(got) != 5 {
			t.Fatalf("round %d: 6 workers on 2 instances leased %d, want the bucket's 5", round, len(got))
		}
		c.Add(time.Second)
	}
}

// TestFlowOrderAcrossInstances: events of one key recorded at once on two
// instances get one head between them, and the key's jobs are leased one
// at a time in the order their records committed (job id order).
func TestFlowOrderAcrossInstances(t *testing.T) {
	stores, c := instances(t, 2, hookwarden.FlowPolicy{Destination: "std/app", Concurrency: 10, Ordered: true})
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			r := receipt("std", fmt.Sprint("e", i), `{}`, "std/app")
			r.ReceivedAt = c.Now()
			r.Events[0].OrderKeys = []string{"K"}
			<-start
			_, errs[i] = stores[i%2].Record(context.Background(), r)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range n {
		got := leaseAtOnce(t, stores, 2, "std/app", 10)
		if len(got) != 1 {
			t.Fatalf("lease %d: %d jobs of one key at once, want 1", i, len(got))
		}
		if got[0].ID < last {
			t.Fatalf("lease %d: job %d after job %d: not in commit order", i, got[0].ID, last)
		}
		last = got[0].ID
		a := hookwarden.Attempt{JobID: got[0].ID, Number: got[0].Attempt, StartedAt: c.Now(), ExitCode: -1,
			StatusCode: 200, Verdict: hookwarden.Delivered}
		if err := stores[i%2].Finish(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
}
