package sqlitestore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestFinishAndLease: the attempt is recorded and the next due job leased in
// one write; nothing is leased when nothing is due or max is 0.
func TestFinishAndLease(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	for i := range 2 {
		if _, err := s.Record(ctx, receipt("stripe", fmt.Sprint("evt_", i), fmt.Sprintf(`{"n":%d}`, i), "stripe/app")); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := s.Lease(ctx, "stripe/app", 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v %v", jobs, err)
	}
	first := jobs[0]
	done := func(j hookwarden.Job) hookwarden.Attempt {
		return hookwarden.Attempt{JobID: j.ID, Number: j.Attempt, StartedAt: time.Now(), StatusCode: 200,
			ExitCode: -1, Verdict: hookwarden.Delivered}
	}
	next, err := s.FinishAndLease(ctx, done(first), "stripe/app", 1, time.Minute)
	if err != nil || len(next) != 1 {
		t.Fatalf("FinishAndLease: %v %v, want the second job", next, err)
	}
	if j := next[0]; j.ID == first.ID || j.Attempt != 1 || j.EventID != "evt_1" || string(j.Body) != `{"n":1}` ||
		j.ContentType != "application/json" || j.Destination != "stripe/app" {
		t.Fatalf("next job: %+v", j)
	}
	if got := count(t, s, `SELECT count(*) FROM jobs WHERE id = ? AND state = 'delivered'`, first.ID); got != 1 {
		t.Fatal("the first job was not finished")
	}
	if got := count(t, s, `SELECT count(*) FROM jobs WHERE id = ? AND leased_until IS NOT NULL`, next[0].ID); got != 1 {
		t.Fatal("the second job is not leased")
	}
	// Nothing left to lease: the finish still happens.
	more, err := s.FinishAndLease(ctx, done(next[0]), "stripe/app", 1, time.Minute)
	if err != nil || len(more) != 0 {
		t.Fatalf("FinishAndLease with nothing due: %v %v", more, err)
	}
	if got := count(t, s, `SELECT count(*) FROM jobs WHERE state = 'delivered'`); got != 2 {
		t.Fatalf("delivered jobs: %d, want 2", got)
	}
	if got := count(t, s, `SELECT count(*) FROM attempts`); got != 2 {
		t.Fatalf("attempts: %d, want 2", got)
	}
	// max 0 leases nothing even when a job is due.
	if _, err := s.Record(ctx, receipt("stripe", "evt_2", `{}`, "stripe/app")); err != nil {
		t.Fatal(err)
	}
	j, _ := s.Lease(ctx, "stripe/app", 1, time.Minute)
	if _, err := s.Record(ctx, receipt("stripe", "evt_3", `{}`, "stripe/app")); err != nil {
		t.Fatal(err)
	}
	if more, err := s.FinishAndLease(ctx, done(j[0]), "stripe/app", 0, time.Minute); err != nil || len(more) != 0 {
		t.Fatalf("FinishAndLease max 0: %v %v", more, err)
	}
	if got := count(t, s, `SELECT count(*) FROM jobs WHERE state = 'pending' AND leased_until IS NULL`); got != 1 {
		t.Fatalf("unleased pending jobs: %d, want 1", got)
	}
}
