package pgstore

// The planner's picture of the queue. PostgreSQL plans from statistics
// that ANALYZE samples, and autovacuum renews those of jobs only after
// a tenth of the table has changed: on a store with millions of jobs kept,
// a backlog of hundreds of thousands (an outage of the destination) grows
// in a picture that still shows none pending. The planner then reads "the
// few" pending jobs whole for statements that need one of them: the worker's
// next due time, the oldest pending age of /metrics, the leases in flight,
// the dashboard's blocked keys; each read the whole backlog (300,000 parked
// jobs: 250-450 ms and up to 835,000 buffers a call, against a few buffers
// once analyzed). The counters know the exact numbers; KeepPlannerStats
// compares them with the planner's estimates and, when they are far apart,
// runs ANALYZE on jobs (a sample: about 0.3 s at 1.3 M jobs).

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// statsOff is how far apart the planner's estimate and the count may
	// be, either way, before jobs is analyzed again.
	statsOff = 10
	// statsFloor: below this many jobs of a state, either way, a wrong
	// estimate costs less than an ANALYZE.
	statsFloor = 10_000
	// statsLock is the advisory lock that lets one instance at a time
	// analyze; the others skip their turn.
	statsLock = 0x6877_7374_6174 // "hwstat"
	// statsEvery bounds this instance's ANALYZEs to one a minute, whatever
	// the estimates say (counters changed by hand never meet them).
	statsEvery = time.Minute
)

// PlannerStats is what KeepPlannerStats found, for a state of jobs.
type PlannerStats struct {
	State     string
	Count     int64 // the counters'
	Estimated int64 // the planner's, before any ANALYZE
}

// KeepPlannerStats analyzes jobs when the planner's estimate of its pending
// or dead jobs is statsOff times off the counters' count, with at least
// statsFloor jobs on one side. It reports whether it analyzed and what it
// compared. Serve calls it every few seconds; it costs a read of the
// counters and the planning of two statements when nothing is off, and
// nothing within statsEvery of its last ANALYZE.
func (s *Store) KeepPlannerStats(ctx context.Context) (bool, []PlannerStats, error) {
	if last := s.analyzedAt.Load(); last != 0 && time.Since(time.Unix(0, last)) < statsEvery {
		return false, nil, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	stats := []PlannerStats{{State: "pending"}, {State: "dead"}}
	if err := s.pool.QueryRow(ctx, `SELECT COALESCE(sum(n) FILTER (WHERE kind = 'pending'), 0)::bigint,
		COALESCE(sum(n) FILTER (WHERE kind = 'dead'), 0)::bigint FROM counters WHERE kind IN ('pending', 'dead')`).
		Scan(&stats[0].Count, &stats[1].Count); err != nil {
		return false, nil, fmt.Errorf("planner statistics: count jobs: %w", err)
	}
	off := false
	for i := range stats {
		est, err := s.estimate(ctx, `SELECT 1 FROM jobs WHERE state = '`+stats[i].State+`'`)
		if err != nil {
			return false, stats, fmt.Errorf("planner statistics: %w", err)
		}
		stats[i].Estimated = est
		off = off || farApart(stats[i].Count, est)
	}
	if !off {
		return false, stats, nil
	}
	analyzed := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, statsLock).Scan(&analyzed); err != nil || !analyzed {
			return err
		}
		_, err := tx.Exec(ctx, `ANALYZE jobs`)
		return err
	})
	if err != nil {
		return false, stats, fmt.Errorf("planner statistics: analyze jobs: %w", err)
	}
	if analyzed {
		s.analyzedAt.Store(time.Now().UnixNano())
	}
	return analyzed, stats, nil
}

// farApart: estimate is statsOff times off count, either way, and one of
// them is at least statsFloor.
func farApart(count, estimate int64) bool {
	if max(count, estimate) < statsFloor {
		return false
	}
	lo, hi := max(min(count, estimate), 1), max(count, estimate)
	return hi >= statsOff*lo
}

// estimate is the planner's row estimate for query (EXPLAIN, not run).
func (s *Store) estimate(ctx context.Context, query string) (int64, error) {
	var raw []byte
	if err := s.pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+query).Scan(&raw); err != nil {
		return 0, err
	}
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		}
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) == 0 {
		return 0, fmt.Errorf("read the plan of %q: %v", query, err)
	}
	return int64(plan[0].Plan.Rows), nil
}
