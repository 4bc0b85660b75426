package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// slots is a Direct with a fixed number of free slots per destination that
// records what the store hands over.
type slots struct {
	mu       sync.Mutex
	free     map[string]int
	started  []hookwarden.Job
	released int
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

func (p *slots) Reserve(dest string) (hookwarden.Slot, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.free[dest] == 0 {
		return nil, false
	}
	p.free[dest]--
	return slot{p}, true
}

// TestDirectHandsNewJobsOver: jobs created while the pool has free slots are
// committed leased (attempt 1 counted, due only when the lease ends) and
// handed over with everything a delivery needs; the others wait pending for
// a lease. Duplicates create nothing. Both the multi-row batch and the
// single-request path do it.
func TestDirectHandsNewJobsOver(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	d := &slots{free: map[string]int{"standard/app": 3}}
	s.SetDirect(d)

	// A batch of five requests (one duplicate) behind a held writer, then one alone.
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	for i, id := range []string{"a", "b", "a", "c", "d"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				time.Sleep(time.Duration(i) * 5 * time.Millisecond) // keep queue order
			}
			if _, err := s.Record(ctx, receipt("standard", id, `{"id":"`+id+`"}`, "standard/app")); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	release()
	wg.Wait()
	if _, err := s.Record(ctx, receipt("standard", "e", `{"id":"e"}`, "standard/app")); err != nil {
		t.Fatal(err)
	}

	d.mu.Lock()
	started := append([]hookwarden.Job(nil), d.started...)
	d.mu.Unlock()
	if len(started) != 3 {
		t.Fatalf("handed over %d jobs, want 3 (the free slots)", len(started))
	}
	for _, j := range started {
		var attempts int
		var leased *string
		var next, eventID string
		if err := s.DB().QueryRow(`SELECT j.attempts, j.leased_until, j.next_at, e.event_id FROM jobs j JOIN events e ON e.id = j.event_ref WHERE j.id = ?`,
			j.ID).Scan(&attempts, &leased, &next, &eventID); err != nil {
			t.Fatalf("job %d: %v", j.ID, err)
		}
		if attempts != 1 || leased == nil || *leased != next || eventID != j.EventID {
			t.Errorf("job %d stored attempts=%d leased_until=%v next_at=%s event=%s; want a lease for attempt 1 of %s",
				j.ID, attempts, leased, next, eventID, j.EventID)
		}
		if j.Attempt != 1 || j.Source != "standard" || j.Destination != "standard/app" || j.EventType != "t.created" ||
			j.ContentType != "application/json" || string(j.Body) != `{"id":"`+j.EventID+`"}` || j.ReceivedAt.IsZero() {
			t.Errorf("handed job %+v lacks delivery fields", j)
		}
	}
	if got := count(t, s, `SELECT count(*) FROM jobs WHERE leased_until IS NULL AND attempts = 0 AND state = 'pending'`); got != 2 {
		t.Errorf("%d jobs waiting for a lease, want 2 (5 events, 3 slots)", got)
	}
	if got := count(t, s, `SELECT count(*) FROM jobs`); got != 5 {
		t.Errorf("%d jobs, want 5 (the duplicate creates none)", got)
	}
	// A lease takes only the jobs nobody holds.
	jobs, err := s.Lease(ctx, "standard/app", 10, time.Minute)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Lease = %d jobs, %v; want the 2 not handed over", len(jobs), err)
	}
}

// TestDirectReleasesOnFailedCommit: when the transaction that created a
// leased job fails, its slot is given back and nothing is started.
func TestDirectReleasesOnFailedCommit(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	d := &slots{free: map[string]int{"standard/app": 100}}
	s.SetDirect(d)
	if _, err := s.Record(ctx, receipt("standard", "before", `{}`, "standard/app")); err != nil {
		t.Fatal(err)
	}
	// A temporary trigger on the writer's connection makes every job insert
	// fail after its slot was reserved.
	if err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TEMP TRIGGER refuse_jobs BEFORE INSERT ON jobs BEGIN SELECT RAISE(ABORT, 'jobs refused'); END`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	for i := range 4 { // a multi-row batch, then each alone again
		wg.Go(func() {
			if _, err := s.Record(ctx, receipt("standard", fmt.Sprint("refused-", i), `{}`, "standard/app")); err == nil {
				t.Error("Record succeeded despite the trigger")
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	release()
	wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.started) != 1 || d.released < 4 || 100-d.free["standard/app"]-d.released != 1 {
		t.Errorf("started %d, released %d, reserved %d; want 1 started and every other reservation released",
			len(d.started), d.released, 100-d.free["standard/app"])
	}
}

// TestUnleaseGivesBackOnlyThatLease: a handed job whose pool refused it is
// due at once with its attempt uncounted; an Unlease for another attempt
// (the job was leased again since) or of a finished job changes nothing.
func TestUnleaseGivesBackOnlyThatLease(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	d := &slots{free: map[string]int{"standard/app": 2}}
	s.SetDirect(d)
	for _, id := range []string{"a", "b"} {
		if _, err := s.Record(ctx, receipt("standard", id, `{"id":"`+id+`"}`, "standard/app")); err != nil {
			t.Fatal(err)
		}
	}
	d.mu.Lock()
	a, b := d.started[0], d.started[1]
	d.mu.Unlock()
	state := func(id int64) (attempts int, leased bool, due bool) {
		t.Helper()
		var until sql.NullString
		var next string
		if err := s.DB().QueryRow(`SELECT attempts, leased_until, next_at FROM jobs WHERE id = ?`, id).Scan(&attempts, &until, &next); err != nil {
			t.Fatal(err)
		}
		return attempts, until.Valid, next <= fmtTime(time.Now())
	}

	stale := a
	stale.Attempt = 2 // as if leased again after the hand-over
	if err := s.Unlease(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if n, leased, _ := state(a.ID); n != 1 || !leased {
		t.Fatalf("after a stale Unlease: attempts %d leased %v, want 1 and still leased", n, leased)
	}
	if err := s.Unlease(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n, leased, due := state(a.ID); n != 0 || leased || !due {
		t.Fatalf("after Unlease: attempts %d leased %v due %v, want 0, no lease, due now", n, leased, due)
	}
	if err := s.Unlease(ctx, a); err != nil { // twice: no lease left to give back
		t.Fatal(err)
	}
	if n, _, _ := state(a.ID); n != 0 {
		t.Fatalf("a second Unlease took the count to %d", n)
	}
	if err := s.Finish(ctx, hookwarden.Attempt{JobID: b.ID, Number: b.Attempt, StartedAt: time.Now(), Verdict: hookwarden.Delivered}); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlease(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, `SELECT count(*) FROM jobs WHERE id = ? AND state = 'delivered' AND attempts = 1`, b.ID); got != 1 {
		t.Fatal("Unlease changed a delivered job")
	}
}
