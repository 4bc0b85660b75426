package pgstore

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// instance is one receiver's store on a database shared with others, on
// the test's clock.
type instance struct {
	*Store
	t   *testing.T
	run int64
}

func startInstance(t *testing.T, url, name string, c *clock) *instance {
	t.Helper()
	in := &instance{Store: open(t, url, Options{Instance: name, Now: c.Now}), t: t}
	in.start()
	return in
}

// start records a run of the instance, as serve does once it listens.
func (in *instance) start() {
	in.t.Helper()
	var err error
	if in.run, err = in.StartRun(context.Background(), "test"); err != nil {
		in.t.Fatal(err)
	}
}

func (in *instance) lease(dest string, n int) []hookwarden.Job {
	in.t.Helper()
	jobs, err := in.Lease(context.Background(), dest, n, time.Hour)
	if err != nil || len(jobs) != n {
		in.t.Fatalf("lease %d of %s: %d jobs, %v", n, dest, len(jobs), err)
	}
	return jobs
}

func (in *instance) release() int64 {
	in.t.Helper()
	n, err := in.ReleaseLeases(context.Background())
	if err != nil {
		in.t.Fatal(err)
	}
	return n
}

// holders lists the leased jobs by holder, "event@run" sorted, "-" for a
// lease taken outside a run.
func holders(t *testing.T, s *Store) string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `SELECT e.event_id, j.leased_by FROM jobs j JOIN events e ON e.id = j.event_ref
		WHERE j.state = 'pending' AND j.leased_until IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		var by *int64
		if err := rows.Scan(&id, &by); err != nil {
			t.Fatal(err)
		}
		h := "-"
		if by != nil {
			h = fmt.Sprint(*by)
		}
		out = append(out, id+"@"+h)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// TestReleaseLeasesSparesLiveInstances: two instances share one database.
// When one restarts, its start gives back only its own earlier run's
// leases: the other's jobs in flight, leased or handed over directly, keep
// their lease (they would be delivered twice otherwise). A run whose
// heartbeat went stale, or that stopped, is gone: any instance's start
// gives its leases back.
func TestReleaseLeasesSparesLiveInstances(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	c := &clock{t: t0}
	a := startInstance(t, url, "a", c)
	b := startInstance(t, url, "b", c)
	p := &slots{free: map[string]int{"std/app": 1}}
	b.SetDirect(p)
	for _, id := range []string{"a1", "a2", "b1", "b2"} {
		r := receipt("std", id, `{}`, "std/app")
		r.ReceivedAt = c.Now()
		if _, err := a.Record(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	r := receipt("std", "b3", `{}`, "std/app")
	r.ReceivedAt = c.Now()
	if _, err := b.Record(context.Background(), r); err != nil { // handed over to b's slot
		t.Fatal(err)
	}
	a.lease("std/app", 2)
	b.lease("std/app", 2)
	want := fmt.Sprintf("[a1@%d a2@%d b1@%d b2@%d b3@%d]", a.run, a.run, b.run, b.run, b.run)
	if got := holders(t, a.Store); got != want {
		t.Fatalf("leases %s, want %s", got, want)
	}

	// a is killed and starts again: it releases before it records its run,
	// as serve does.
	c.Add(2 * time.Second)
	a2 := &instance{Store: open(t, url, Options{Instance: "a", Now: c.Now}), t: t}
	if n := a2.release(); n != 2 {
		t.Fatalf("a's restart released %d leases, want a's 2", n)
	}
	if got, want := holders(t, a2.Store), fmt.Sprintf("[b1@%d b2@%d b3@%d]", b.run, b.run, b.run); got != want {
		t.Fatalf("after a's restart: leases %s, want b's untouched: %s", got, want)
	}
	a2.start()
	jobs := a2.lease("std/app", 2)
	for _, j := range jobs {
		if j.Attempt != 2 || (j.EventID != "a1" && j.EventID != "a2") {
			t.Fatalf("a's restart leased %+v, want a1 and a2 at attempt 2", jobs)
		}
	}

	// A third instance starting sees a and b alive and leaves their leases
	// alone.
	x := startInstance(t, url, "x", c)
	if n := x.release(); n != 0 {
		t.Fatalf("x's start released %d leases with a and b alive, want 0", n)
	}

	// b stops beating (a hung host, a partition); a keeps beating.
	c.Add(8 * time.Second)
	if err := a2.Heartbeat(context.Background(), a2.run); err != nil {
		t.Fatal(err)
	}
	if n := x.release(); n != 0 {
		t.Fatalf("x released %d leases with b's heartbeat 10s old (not older than Stale), want 0", n)
	}
	c.Add(time.Second)
	if n := x.release(); n != 3 {
		t.Fatalf("x released %d leases with b's heartbeat stale, want b's 3", n)
	}
	if got, want := holders(t, x.Store), fmt.Sprintf("[a1@%d a2@%d]", a2.run, a2.run); got != want {
		t.Fatalf("after b went stale: leases %s, want a's live run's: %s", got, want)
	}

	// a stops cleanly (its workers drained); its run's leases, if any
	// remain, are a dead process's.
	if err := a2.StopRun(context.Background(), a2.run); err != nil {
		t.Fatal(err)
	}
	if n := x.release(); n != 2 {
		t.Fatalf("x released %d leases of a's stopped run, want 2", n)
	}
	if got := holders(t, x.Store); got != "[]" {
		t.Fatalf("leases left: %s, want none", got)
	}
}

// TestReleaseLeasesOwnRun: a store's own run's leases are live (its
// workers hold them): ReleaseLeases after StartRun leaves them alone, and
// a lease taken before the run (outside serve) is nobody's.
func TestReleaseLeasesOwnRun(t *testing.T) {
	t.Parallel()
	c := &clock{t: t0}
	url := pgtest.Database(t)
	s := &instance{Store: open(t, url, Options{Instance: "a", Now: c.Now}), t: t}
	for _, id := range []string{"e1", "e2"} {
		if _, err := s.Record(context.Background(), receipt("std", id, `{}`, "std/app")); err != nil {
			t.Fatal(err)
		}
	}
	s.lease("std/app", 1) // no run yet
	s.start()
	s.lease("std/app", 1)
	if n := s.release(); n != 1 {
		t.Fatalf("released %d leases, want the one taken outside a run", n)
	}
	if got, want := holders(t, s.Store), fmt.Sprintf("[e2@%d]", s.run); got != want {
		t.Fatalf("leases %s, want the run's own: %s", got, want)
	}
}
