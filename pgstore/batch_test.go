package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// firstRound is a workload of one request each: new events (one from a
// backfill), an id sent four times at once, exact and changed copies of
// some of the new ones at once with them, a body signed under two ids,
// events without a destination.
func firstRound() []*hookwarden.Receipt {
	var rs []*hookwarden.Receipt
	for i := range 40 {
		rs = append(rs, receipt("std", fmt.Sprint("n", i), fmt.Sprintf(`{"n":%d}`, i), "std/app"))
	}
	for i := range 4 {
		rs = append(rs, receipt("std", fmt.Sprint("n", i), fmt.Sprintf(`{"n":%d}`, i), "std/app"))
	}
	rs = append(rs, receipt("std", "n39", `{"n":39,"changed":true}`, "std/app"))
	for range 4 {
		rs = append(rs, receipt("std", "twin", `{"twin":1}`, "std/app"))
	}
	rs = append(rs, keyed("k1", `{"same":"body"}`), keyed("k2", `{"same":"body"}`))
	for i := range 4 {
		rs = append(rs, receipt("std", fmt.Sprint("nodest", i), `{}`))
	}
	b := receipt("std", "b1", `{"from":"the api"}`, "std/app")
	b.Backfill = true
	return append(rs, b)
}

// secondRound repeats claimed events among new ones: exact copies, changed
// ones, a copy of a claim whose hash retention emptied (n12) and a changed
// webhook copy of the backfilled claim (neither flagged divergent).
func secondRound() []*hookwarden.Receipt {
	var rs []*hookwarden.Receipt
	for i := 40; i < 50; i++ {
		rs = append(rs, receipt("std", fmt.Sprint("n", i), fmt.Sprintf(`{"n":%d}`, i), "std/app"))
	}
	for i := range 8 {
		rs = append(rs, receipt("std", fmt.Sprint("n", i), fmt.Sprintf(`{"n":%d}`, i), "std/app"))
	}
	for i := 8; i < 12; i++ {
		rs = append(rs, receipt("std", fmt.Sprint("n", i), fmt.Sprintf(`{"n":%d,"changed":true}`, i), "std/app"))
	}
	rs = append(rs, receipt("std", "n12", `{"n":12,"changed":true}`, "std/app"),
		receipt("std", "b1", `{"from":"the webhook"}`, "std/app"),
		receipt("std", "nodest0", `{}`))
	return rs
}

// outcomes sums a run's results: per event id, how many copies were
// accepted, duplicates, divergent; and how many requests were held.
type outcomes struct {
	accepted, duplicate, divergent map[string]int
	held                           int
}

func (o *outcomes) add(rs []*hookwarden.Receipt, res []hookwarden.RecordResult) {
	if o.accepted == nil {
		o.accepted, o.duplicate, o.divergent = map[string]int{}, map[string]int{}, map[string]int{}
	}
	for i, r := range res {
		if r.Outcome == hookwarden.Quarantined {
			o.held++
			continue
		}
		id := rs[i].Events[0].ID
		if id == "k1" || id == "k2" {
			id = "k1|k2" // which of the two claims the body is a race
		}
		switch ev := r.Events[0]; {
		case ev.Outcome == hookwarden.Accepted:
			o.accepted[id]++
		case ev.Divergent:
			o.divergent[id]++
		default:
			o.duplicate[id]++
		}
	}
}

// TestBatchesRecordAsOneByOne: two rounds of requests recorded at once,
// the batchers held until every call of a round waits so that batches
// form, give what one transaction per request gives: each id accepted once
// with its job, its repeats duplicates (the changed ones divergent but for
// a claim without a hash or from a backfill, whose bodies are kept), the
// body signed under a second id held, every receipt kept, the counters
// equal to a full count; and the batches did form.
func TestBatchesRecordAsOneByOne(t *testing.T) {
	t.Parallel()
	var gate sync.RWMutex // write-locked: batchers wait once they took a call
	var batched, biggest atomic.Int64
	onCommit := func(n int, _ time.Duration, err error) {
		if n > 1 && err == nil {
			batched.Add(int64(n))
			for m := biggest.Load(); int64(n) > m && !biggest.CompareAndSwap(m, int64(n)); m = biggest.Load() {
			}
		}
	}
	now := func() time.Time { return t0 }
	stores := map[string]*Store{
		"batched":    open(t, pgtest.Database(t), Options{Now: now, testHold: func() { gate.RLock(); gate.RUnlock() }, OnCommit: onCommit}),
		"one-by-one": open(t, pgtest.Database(t), Options{Now: now, batchers: -1}),
	}
	ctx := context.Background()
	got := map[string]*outcomes{}
	for name, s := range stores {
		f := &fixture{t: t, s: s}
		o := &outcomes{}
		got[name] = o
		calls := 0
		for round, rs := range [][]*hookwarden.Receipt{firstRound(), secondRound()} {
			if round == 1 {
				// Retention emptied n12's hash: a copy can no longer be told apart.
				if _, err := s.Pool().Exec(ctx, `UPDATE events SET body_sha256 = '\x' WHERE event_id = 'n12'`); err != nil {
					t.Fatal(err)
				}
			}
			calls += len(rs)
			if name == "batched" {
				// Every call queued behind the two held batchers, then let go.
				gate.Lock()
				go func() {
					for waiting(s) < calls {
						time.Sleep(time.Millisecond)
					}
					gate.Unlock()
				}()
			}
			o.add(rs, f.recordAll(rs))
		}
		for q, want := range map[string]int{
			`SELECT count(*) FROM events`:                                                 50 + 1 + 4 + 1 + 1, // n*, twin, nodest*, b1, one of k1/k2
			`SELECT count(*) FROM receipts WHERE kind = 'accepted'`:                       57,
			`SELECT count(*) FROM receipts WHERE kind = 'divergent'`:                      1 + 4,
			`SELECT count(*) FROM receipts WHERE kind = 'duplicate'`:                      4 + 3 + 8 + 2 + 1,
			`SELECT count(*) FROM receipts WHERE kind = 'duplicate' AND body IS NOT NULL`: 2,
			`SELECT count(*) FROM receipts WHERE kind = 'divergent' AND body IS NULL`:     0,
			`SELECT count(*) FROM quarantine`:                                             1,
			`SELECT count(*) FROM jobs WHERE destination = 'std/app'`:                     50 + 1 + 1,
			`SELECT count(*) FROM receipts WHERE kind = 'accepted' AND body IS NULL`:      0,
		} {
			if n := f.count(q); n != want {
				t.Errorf("%s: %s = %d, want %d", name, q, n, want)
			}
		}
		st, err := s.counterStats(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		hours, err := s.Hourly(ctx, []string{"std", "gh"}, t0.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		full, fullHours := fullCount(t, s, t0)
		if a, b := countsText(st, hours), countsText(full, fullHours); a != b {
			t.Errorf("%s: counters\n%s\nwant the full count\n%s", name, a, b)
		}
	}
	b, o := got["batched"], got["one-by-one"]
	for _, m := range []struct {
		name string
		x, y map[string]int
	}{{"accepted", b.accepted, o.accepted}, {"duplicate", b.duplicate, o.duplicate}, {"divergent", b.divergent, o.divergent}} {
		if fmt.Sprint(m.x) != fmt.Sprint(m.y) {
			t.Errorf("%s per id: batched %v, one by one %v", m.name, m.x, m.y)
		}
	}
	if b.held != 1 || o.held != 1 {
		t.Errorf("held: batched %d, one by one %d; want 1 each", b.held, o.held)
	}
	if batched.Load() < 40 {
		t.Errorf("%d requests committed in batches (biggest %d); want most of the workload", batched.Load(), biggest.Load())
	}
	if n := stores["batched"].batch.repeats.Load(); n < 8+4+2 {
		t.Errorf("%d repeats recorded in batches; want the second round's (14)", n)
	}
	t.Logf("%d requests committed in batches, the biggest of %d", batched.Load(), biggest.Load())
}

// waiting is how many calls came to s's batchers so far: with the
// batchers held, those they took and those queued behind them.
func waiting(s *Store) int { return int(s.batch.calls.Load()) }

// TestFailedBatchRunsEachAlone: a batch whose statement fails leaves
// nothing committed, and each member is then recorded on its own: every
// one accepted once.
func TestFailedBatchRunsEachAlone(t *testing.T) {
	t.Parallel()
	var failed atomic.Int64
	hold := make(chan struct{})
	s := open(t, pgtest.Database(t), Options{Now: func() time.Time { return t0 }, batchers: 1, testHold: func() { <-hold },
		testBatchTx: func(ctx context.Context, tx pgx.Tx) {
			// Aborts the transaction: the batch's statement then fails.
			if _, err := tx.Exec(ctx, `SELECT 1/0`); err != nil {
				failed.Add(1)
			}
		}})
	f := &fixture{t: t, s: s}
	var rs []*hookwarden.Receipt
	for i := range 32 {
		rs = append(rs, receipt("std", fmt.Sprint("e", i), fmt.Sprintf(`{"e":%d}`, i), "std/app"))
	}
	go func() {
		for waiting(s) < len(rs) {
			time.Sleep(time.Millisecond)
		}
		close(hold)
	}()
	for i, r := range f.recordAll(rs) {
		if r.Outcome != hookwarden.Accepted {
			t.Errorf("%s: %v, want accepted", rs[i].Events[0].ID, r.Outcome)
		}
	}
	if failed.Load() == 0 {
		t.Fatal("no batch formed")
	}
	if n := f.count(`SELECT count(*) FROM events`); n != 32 {
		t.Errorf("%d events, want 32", n)
	}
	if n := f.count(`SELECT count(*) FROM jobs`); n != 32 {
		t.Errorf("%d jobs, want 32", n)
	}
}

// TestBatchCommitLostIsUnavailable: a batch whose COMMIT's outcome is
// unknown (its connection cut just before) answers every member with
// ErrUnavailable, never a second try; the providers' retries are then
// recorded once.
func TestBatchCommitLostIsUnavailable(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	var cut atomic.Bool
	var s *Store
	s = open(t, pgtest.Database(t), Options{Now: func() time.Time { return t0 }, batchers: 1, testHold: func() { <-hold },
		testBatchCommit: func(ctx context.Context, tx pgx.Tx) {
			if !cut.CompareAndSwap(false, true) {
				return
			}
			var pid int
			if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				t.Error(err)
				return
			}
			if _, err := s.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
				t.Error(err)
			}
		}})
	var rs []*hookwarden.Receipt
	for i := range 16 {
		rs = append(rs, receipt("std", fmt.Sprint("e", i), fmt.Sprintf(`{"e":%d}`, i), "std/app"))
	}
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { _, errs[i] = s.Record(context.Background(), r) })
	}
	go func() {
		for waiting(s) < len(rs) {
			time.Sleep(time.Millisecond)
		}
		close(hold)
	}()
	wg.Wait()
	var lost int
	for _, err := range errs {
		if err != nil {
			if !errors.Is(err, hookwarden.ErrUnavailable) {
				t.Fatalf("%v, want ErrUnavailable", err)
			}
			lost++
		}
	}
	if lost < 2 {
		t.Fatalf("%d of %d calls failed; want the cut batch's members (more than one)", lost, len(rs))
	}
	f := &fixture{t: t, s: s}
	for i, r := range f.recordAll(rs) {
		if r.Outcome == hookwarden.Quarantined {
			t.Errorf("%d: held", i)
		}
	}
	if n := f.count(`SELECT count(*) FROM events`); n != len(rs) {
		t.Errorf("%d events after the retries, want %d", n, len(rs))
	}
	if n := f.count(`SELECT count(*) FROM jobs`); n != len(rs) {
		t.Errorf("%d jobs after the retries, want %d", n, len(rs))
	}
}
