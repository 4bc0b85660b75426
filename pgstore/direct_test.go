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
	"github.com/jackc/pgx/v5"
)

// The direct hand-over beyond storetest's Direct/*: what concurrent
// requests on one instance can break (each slot handed once or given back,
// whatever the interleaving, a deadlocked try included), a commit cut off,
// batch elements, and the run that holds a handed job's lease.

// slots is a hookwarden.Direct with a number of free slots per destination
// that records what the store does with them.
type slots struct {
	mu       sync.Mutex
	free     map[string]int
	reserved int
	started  []hookwarden.Job
	released int
}

func (p *slots) Reserve(dest string) (hookwarden.Slot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free[dest] == 0 {
		return nil, false
	}
	p.free[dest]--
	p.reserved++
	return slot{p}, true
}

// counts are the slots reserved, handed a job and given back.
func (p *slots) counts() (reserved, started, released int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reserved, len(p.started), p.released
}

func (p *slots) jobs() []hookwarden.Job {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]hookwarden.Job(nil), p.started...)
}

type slot struct{ p *slots }

func (s slot) LeaseFor() time.Duration { return time.Minute }

func (s slot) Hand(j hookwarden.Job) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.started = append(s.p.started, j)
}

func (s slot) Release() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.released++
}

// run names a lease holder.
func run(id *int64) string {
	if id == nil {
		return "none"
	}
	return fmt.Sprint("run ", *id)
}

// checkHanded checks that every handed job is stored as handed: leased for
// attempt 1 until the slot's lease ends, to holder (nil: none), each once.
func (f *fixture) checkHanded(p *slots, holder *int64) {
	f.t.Helper()
	seen := map[int64]bool{}
	for _, j := range p.jobs() {
		if seen[j.ID] {
			f.t.Fatalf("job %d handed twice", j.ID)
		}
		seen[j.ID] = true
		var attempts int
		var leased time.Time
		var by *int64
		err := f.s.Pool().QueryRow(context.Background(), `SELECT j.attempts, j.leased_until, j.leased_by FROM jobs j
			JOIN events e ON e.id = j.event_ref WHERE j.id = $1 AND e.event_id = $2 AND j.destination = $3 AND j.state = 'pending'`,
			j.ID, j.EventID, j.Destination).Scan(&attempts, &leased, &by)
		if err != nil {
			f.t.Fatalf("handed job %d (%s for %s): %v", j.ID, j.EventID, j.Destination, err)
		}
		if attempts != 1 || j.Attempt != 1 || !leased.Equal(t0.Add(time.Minute)) || run(by) != run(holder) {
			f.t.Fatalf("handed job %d stored with attempts %d, lease until %v, holder %s; want 1, %v, %s",
				j.ID, attempts, leased, run(by), t0.Add(time.Minute), run(holder))
		}
	}
}

// TestDirectConcurrentRecords: 64 requests at once, each a new event for
// two destinations, and 64 copies of one more event: every free slot of
// std/app is handed exactly one job, std/ops (slots for all) gets every one
// of its jobs, a duplicate keeps no slot (the one-statement path reserves
// before it knows, and gives the 63 duplicates' slots back), and the jobs
// without a slot wait for a lease.
func TestDirectConcurrentRecords(t *testing.T) {
	f := setup(t)
	p := &slots{free: map[string]int{"std/app": 20, "std/ops": 1000}}
	f.s.SetDirect(p)
	var rs []*hookwarden.Receipt
	for i := range 64 {
		rs = append(rs, receipt("std", fmt.Sprint("e", i), fmt.Sprintf(`{"n":%d}`, i), "std/app", "std/ops"))
		rs = append(rs, receipt("std", "same", `{"same":1}`, "std/ops"))
	}
	f.recordAll(rs)
	reserved, started, released := p.counts()
	if reserved != 20+65+63 || started != 20+65 || released != 63 {
		t.Fatalf("reserved %d, started %d, released %d; want 85 handed over (20 std/app, 65 std/ops), the 63 duplicates' given back",
			reserved, started, released)
	}
	f.checkHanded(p, nil)
	leased, err := f.s.Lease(context.Background(), "std/app", 100, time.Minute)
	if err != nil || len(leased) != 44 {
		t.Fatalf("lease of std/app: %d jobs, %v; want the 44 without a slot", len(leased), err)
	}
	if more, _ := f.s.Lease(context.Background(), "std/ops", 100, time.Minute); len(more) != 0 {
		t.Fatalf("lease of std/ops: %d jobs, want none (all handed over)", len(more))
	}
}

// TestDirectBatch: each new element of a batch goes to a slot with its own
// bytes as JSON, as Lease would give it; a repeated element takes none.
func TestDirectBatch(t *testing.T) {
	f := setup(t)
	p := &slots{free: map[string]int{"sg/app": 10}}
	f.s.SetDirect(p)
	f.record(batch(element("a"), element("b")))
	f.record(batch(element("b"), element("c")))
	got := map[string]string{}
	for _, j := range p.jobs() {
		if j.ContentType != "application/json" || j.Source != "sg" || j.EventType != "delivered" {
			t.Errorf("handed %+v, want a JSON element of sg", j)
		}
		got[j.EventID] = string(j.Body)
	}
	if want := fmt.Sprint(map[string]string{"a": element("a")[1], "b": element("b")[1], "c": element("c")[1]}); fmt.Sprint(got) != want {
		t.Fatalf("handed %v, want %s", got, want)
	}
	f.checkHanded(p, nil)
}

// TestDirectCrossedBatches: batches carrying the same ids the other way
// round, at once: each new job is handed over once, and any slot a try
// reserved without committing (a try run again) is given back.
func TestDirectCrossedBatches(t *testing.T) {
	f := setup(t)
	p := &slots{free: map[string]int{"sg/app": 1000}}
	f.s.SetDirect(p)
	var rs []*hookwarden.Receipt
	for i := range 16 {
		x, y := element(fmt.Sprint("x", i)), element(fmt.Sprint("y", i))
		rs = append(rs, batch(x, y), batch(y, x))
	}
	f.recordAll(rs)
	reserved, started, released := p.counts()
	if started != 32 || reserved-released != 32 {
		t.Fatalf("reserved %d, started %d, released %d; want 32 handed, the rest given back", reserved, started, released)
	}
	f.checkHanded(p, nil)
}

// TestDirectCommitLost: when the connection dies as the commit is sent,
// the slot is given back, never handed a job whose commit is unknown; the
// provider's retry is handed over.
func TestDirectCommitLost(t *testing.T) {
	// Not parallel: the hook is the package's.
	s := open(t, pgtest.Database(t), Options{Now: func() time.Time { return t0 }})
	f := &fixture{t: t, s: s}
	p := &slots{free: map[string]int{"std/app": 10}}
	s.SetDirect(p)
	ctx := context.Background()
	testBeforeCommit = func(ctx context.Context, tx pgx.Tx) {
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Error(err)
			return
		}
		if _, err := s.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Error(err)
		}
	}
	_, err := s.Record(ctx, receipt("std", "lost", `{}`, "std/app"))
	testBeforeCommit = nil
	if !errors.Is(err, hookwarden.ErrUnavailable) {
		t.Fatalf("record whose commit was cut off: %v, want ErrUnavailable", err)
	}
	if r, st, rel := p.counts(); r != 1 || st != 0 || rel != 1 {
		t.Fatalf("reserved %d, started %d, released %d; want the one slot given back", r, st, rel)
	}
	f.record(receipt("std", "lost", `{}`, "std/app"))
	if r, st, rel := p.counts(); r != 2 || st != 1 || rel != 1 {
		t.Fatalf("after the retry: reserved %d, started %d, released %d; want it handed over", r, st, rel)
	}
	f.checkHanded(p, nil)
}

// TestDirectConcurrencyAcrossInstances: two stores on one database (two
// instances), std/app with concurrency 2 and each instance with slots to
// spare: 64 new events recorded at once over both hand over at most 2 jobs
// between them, the store never has more than 2 leases in flight, and a
// lease on either takes nothing more while they are.
func TestDirectConcurrencyAcrossInstances(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx := context.Background()
	policy := []hookwarden.FlowPolicy{{Destination: "std/app", Concurrency: 2}}
	var fs [2]*fixture
	var ps [2]*slots
	for i := range fs {
		s := open(t, url, Options{Now: func() time.Time { return t0 }})
		if err := s.SetFlow(ctx, policy); err != nil {
			t.Fatal(err)
		}
		ps[i] = &slots{free: map[string]int{"std/app": 64}}
		s.SetDirect(ps[i])
		fs[i] = &fixture{t: t, s: s}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 64 {
		wg.Go(func() {
			<-start
			if _, err := fs[i%2].s.Record(ctx, receipt("std", fmt.Sprint("e", i), fmt.Sprintf(`{"n":%d}`, i), "std/app")); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	_, a, _ := ps[0].counts()
	_, b, _ := ps[1].counts()
	var leased int
	if err := fs[0].s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE leased_until IS NOT NULL`).Scan(&leased); err != nil {
		t.Fatal(err)
	}
	if a+b > 2 || leased != a+b {
		t.Fatalf("handed over %d + %d, %d leased in the store; want at most 2 in all, each handed job leased", a, b, leased)
	}
	for i, f := range fs {
		jobs, err := f.s.Lease(ctx, "std/app", 64, time.Minute)
		if err != nil || len(jobs) != 2-a-b {
			t.Fatalf("lease on instance %d: %d jobs, %v; want %d (concurrency 2 less the %d handed over)", i, len(jobs), err, 2-a-b, a+b)
		}
		a += len(jobs)
	}
	if n, err := fs[1].s.Lease(ctx, "std/app", 64, time.Minute); err != nil || len(n) != 0 {
		t.Fatalf("a lease with 2 in flight: %d jobs, %v; want none", len(n), err)
	}
}
