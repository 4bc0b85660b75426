package pgstore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// TestKeepPlannerStats: a backlog that grew after the last ANALYZE is
// planned as the few pending jobs the statistics show, and the oldest
// pending age (/metrics, stats) reads all of it; KeepPlannerStats sees the
// counters' backlog far from the planner's estimate, analyzes jobs, and the
// same statement then reads a few pages. With another instance holding the
// turn it skips; with nothing off it does nothing.
func TestKeepPlannerStats(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	seedHistory(t, s, 3000)
	for _, q := range []string{
		// autovacuum would analyze a table this small by itself, when it
		// pleases: the test decides.
		`ALTER TABLE jobs SET (autovacuum_enabled = off)`,
		// Analyzed with no backlog, then one grows.
		`UPDATE jobs SET state = 'delivered' WHERE state = 'pending'`,
		`ANALYZE jobs`,
		`INSERT INTO jobs (event_ref, destination, state, next_at, created_at)
		SELECT e.id, 'std/hold', 'pending', e.claimed_at, e.claimed_at FROM events e, generate_series(1, 10) g`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var pending int64
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE state = 'pending'`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	oldest := func() int64 {
		t.Helper()
		var raw []byte
		if err := s.Pool().QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+oldestPendingSQL, "std/hold").Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var plan []struct{ Plan planNode }
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		return plan[0].Plan.SharedHit + plan[0].Plan.SharedRead
	}
	before := oldest()

	// Another instance's turn: nothing analyzed.
	other, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			other.Release()
			released = true
		}
	}()
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, statsLock); err != nil {
		t.Fatal(err)
	}
	analyzed, stats, err := s.KeepPlannerStats(ctx)
	if err != nil || analyzed {
		t.Fatalf("KeepPlannerStats with the turn held elsewhere = %v, %v", analyzed, err)
	}
	if stats[0].State != "pending" || stats[0].Count != pending || stats[0].Estimated*statsOff > pending {
		t.Fatalf("pending: %+v; want the count %d and an estimate from before the backlog", stats[0], pending)
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, statsLock); err != nil {
		t.Fatal(err)
	}
	other.Release()
	released = true

	analyzed, stats, err = s.KeepPlannerStats(ctx)
	if err != nil || !analyzed {
		t.Fatalf("KeepPlannerStats = %v, %+v, %v; want jobs analyzed", analyzed, stats, err)
	}
	after := oldest()
	if after > 10 || before < 10*after {
		t.Errorf("oldest pending age: %d buffers before the ANALYZE, %d after; want a few after, a tenth of before at most", before, after)
	}
	est, err := s.estimate(ctx, `SELECT 1 FROM jobs WHERE state = 'pending'`)
	if err != nil || farApart(pending, est) {
		t.Errorf("estimate after the ANALYZE %d (%v), count %d", est, err, pending)
	}
	s.analyzedAt.Store(0) // as a minute later
	if analyzed, stats, err := s.KeepPlannerStats(ctx); err != nil || analyzed || len(stats) != 2 {
		t.Errorf("KeepPlannerStats with the estimates current = %v, %+v, %v; want both compared, nothing done", analyzed, stats, err)
	}
	// Drained: the estimate is now far above the count, and is renewed too.
	if _, err := s.Pool().Exec(ctx, `DELETE FROM jobs WHERE destination = 'std/hold'`); err != nil {
		t.Fatal(err)
	}
	s.analyzedAt.Store(time.Now().UnixNano()) // as just analyzed
	if analyzed, _, err := s.KeepPlannerStats(ctx); err != nil || analyzed {
		t.Errorf("KeepPlannerStats within a minute of its ANALYZE = %v, %v; want nothing done", analyzed, err)
	}
	s.analyzedAt.Store(0)
	if analyzed, stats, err := s.KeepPlannerStats(ctx); err != nil || !analyzed || stats[0].Count != 0 {
		t.Errorf("KeepPlannerStats after the drain = %v, %+v, %v; want jobs analyzed, none pending", analyzed, stats, err)
	}
}

// TestFarApart: both ways, and not below the floor.
func TestFarApart(t *testing.T) {
	for _, c := range []struct {
		count, est int64
		want       bool
	}{
		{0, 1, false}, {9_999, 1, false}, {10_000, 1, true}, {10_000, 1_000, true}, {10_000, 1_001, false},
		{1, 300_000, true}, {300_000, 250_000, false}, {0, 0, false},
	} {
		if got := farApart(c.count, c.est); got != c.want {
			t.Errorf("farApart(%d, %d) = %v, want %v", c.count, c.est, got, c.want)
		}
	}
}
