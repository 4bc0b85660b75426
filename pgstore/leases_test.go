package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// checkLeaseMirror fails unless job_leases holds exactly the jobs that are
// pending and leased, each with its destination and lease end (schema 12:
// what the count of leases in flight reads instead of the backlog).
func checkLeaseMirror(t *testing.T, s *Store, step string) {
	t.Helper()
	var missing, extra []string
	rows, err := s.pool.Query(context.Background(), `
SELECT 'missing', j.id, j.destination, j.leased_until::text FROM jobs j
	WHERE j.state = 'pending' AND j.leased_until IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM job_leases l WHERE l.job_id = j.id AND l.destination = j.destination AND l.leased_until = j.leased_until)
UNION ALL
SELECT 'extra', l.job_id, l.destination, l.leased_until::text FROM job_leases l
	WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = l.job_id AND j.state = 'pending' AND j.leased_until = l.leased_until)`)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, dest, until string
		var id int64
		if err := rows.Scan(&kind, &id, &dest, &until); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		row := fmt.Sprintf("job %d of %s until %s", id, dest, until)
		if kind == "missing" {
			missing = append(missing, row)
		} else {
			extra = append(extra, row)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if len(missing)+len(extra) > 0 {
		t.Errorf("after %s: job_leases lacks [%s] and has [%s] beyond the pending leased jobs",
			step, strings.Join(missing, "; "), strings.Join(extra, "; "))
	}
}

// TestJobLeasesMirror: after every kind of write that takes or ends a
// lease (a lease, a hand-over at Record, each verdict, a stale finish, a
// finish and lease, an expiry and a new lease, Unlease, ReleaseLeases, a
// replay, a prune) job_leases holds exactly the pending leased jobs, and
// Destinations' in_flight and a lease under a concurrency count the live
// ones. (storetest's counters case checks the mirror after its steps too:
// fullCount.)
func TestJobLeasesMirror(t *testing.T) {
	q := setupQueue(t)
	ctx := q.ctx
	if err := q.s.SetFlow(ctx, []hookwarden.FlowPolicy{{Destination: "std/app", Concurrency: 3}}); err != nil {
		t.Fatal(err)
	}
	inFlight := func(dest string, want, pending int) {
		t.Helper()
		st, err := q.s.Destinations(ctx, []string{dest})
		if err != nil {
			t.Fatal(err)
		}
		if st[0].InFlight != want || st[0].Pending != pending {
			t.Errorf("%s: in_flight %d, pending %d; want %d, %d", dest, st[0].InFlight, st[0].Pending, want, pending)
		}
	}
	for i := range 6 {
		q.add("std", fmt.Sprint("e", i), fmt.Sprintf(`{"n":%d}`, i), "std/app", "std/ops")
		q.clock.Add(time.Microsecond)
	}
	checkLeaseMirror(t, q.s, "records")
	inFlight("std/app", 0, 6)

	jobs := q.lease("std/app", 2, time.Minute)
	ops := q.lease("std/ops", 6, time.Minute)
	checkLeaseMirror(t, q.s, "leases")
	inFlight("std/app", 2, 6)
	inFlight("std/ops", 6, 6)
	if more := q.lease("std/app", 6, time.Minute); len(more) != 1 {
		t.Fatalf("leased %d more of std/app with 2 of 3 in flight, want 1", len(more))
	} else {
		jobs = append(jobs, more...)
	}
	checkLeaseMirror(t, q.s, "a lease up to the concurrency")

	q.finish(q.attempt(jobs[0], hookwarden.Delivered))
	q.finish(q.attempt(jobs[1], hookwarden.Retry))
	q.finish(q.attempt(ops[0], hookwarden.Dead))
	checkLeaseMirror(t, q.s, "a delivery, a retry and a dead letter")
	inFlight("std/app", 1, 5)
	inFlight("std/ops", 5, 5)

	// A finish and lease in one transaction.
	next, err := q.s.FinishAndLease(ctx, q.attempt(jobs[2], hookwarden.Delivered), "std/app", 1, time.Minute)
	if err != nil || len(next) != 1 {
		t.Fatalf("FinishAndLease: %d jobs, %v; want 1", len(next), err)
	}
	checkLeaseMirror(t, q.s, "a finish and lease")
	inFlight("std/app", 1, 4)

	// An expired lease is out of the count, then leased again; the stale
	// finish of the first lease ends nothing.
	q.clock.Add(2 * time.Minute)
	inFlight("std/app", 0, 4)
	inFlight("std/ops", 0, 5)
	again := q.lease("std/app", 3, time.Minute)
	if len(again) != 3 {
		t.Fatalf("leased %d after the leases expired, want 3", len(again))
	}
	checkLeaseMirror(t, q.s, "a lease after an expiry")
	q.finish(q.attempt(next[0], hookwarden.Delivered)) // the attempt before the expiry
	checkLeaseMirror(t, q.s, "a stale finish")
	inFlight("std/app", 3, 4)

	if err := q.s.Unlease(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	checkLeaseMirror(t, q.s, "Unlease")
	inFlight("std/app", 2, 4)

	// A replay of jobs whose leases expired (a dead letter's and a live
	// job's).
	q.clock.Add(2 * time.Minute)
	if _, err := q.s.Replay(ctx, hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"e0", "e1", "e2", "e3"}}, hookwarden.ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	checkLeaseMirror(t, q.s, "a replay")

	q.lease("std/app", 3, time.Minute)
	if n, err := q.s.ReleaseLeases(ctx); err != nil || n == 0 {
		t.Fatalf("ReleaseLeases = %d, %v; want the leases given back", n, err)
	}
	checkLeaseMirror(t, q.s, "ReleaseLeases")
	inFlight("std/app", 0, 6)

	// A hand-over at Record: the job is written leased.
	p := &slots{free: map[string]int{"std/app": 1, "std/ops": 1}}
	q.s.SetDirect(p)
	q.add("std", "h", `{"n":"h"}`, "std/app", "std/ops")
	if _, started, _ := p.counts(); started != 2 {
		t.Fatalf("handed over %d jobs, want 2", started)
	}
	checkLeaseMirror(t, q.s, "a hand-over")
	inFlight("std/app", 1, 7)

	// Deliver everything, then prune it all away.
	q.s.SetDirect(nil)
	q.clock.Add(2 * time.Minute) // the handed jobs' leases expire
	for _, d := range []string{"std/app", "std/ops"} {
		for jobs := q.lease(d, 100, time.Minute); len(jobs) > 0; jobs = q.lease(d, 100, time.Minute) {
			for _, j := range jobs {
				q.finish(q.attempt(j, hookwarden.Delivered))
			}
		}
	}
	checkLeaseMirror(t, q.s, "deliveries")
	q.clock.Add(100 * 24 * time.Hour)
	if _, err := q.s.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: time.Hour, Claims: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	checkLeaseMirror(t, q.s, "a prune")
	var rows int
	if err := q.s.pool.QueryRow(ctx, `SELECT count(*) FROM job_leases`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("job_leases holds %d rows with nothing in flight (%v), want none", rows, err)
	}
}

// TestLeaseCountsReadTheLeases: with a backlog parked behind a few leases,
// the reads that count a destination's leases in flight (a lease under a
// concurrency, Record's hand-over, GET /api/destinations and the
// dashboard) read the leases, not the backlog, whatever the planner
// knows of it.
func TestLeaseCountsReadTheLeases(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	const n = 30000
	seedHistory(t, s, n)
	// A fifth of the history parked behind std/app, three of it leased.
	for _, q := range []string{
		`UPDATE jobs SET state = 'pending' WHERE event_ref > $1 AND state = 'delivered'`,
		`UPDATE jobs SET leased_until = now() + interval '1 hour', attempts = 1
			WHERE id IN (SELECT id FROM jobs WHERE destination = 'std/app' AND state = 'pending' ORDER BY id LIMIT 3) AND $1::int > 0`,
	} {
		if _, err := s.Pool().Exec(ctx, q, n-n/5); err != nil {
			t.Fatal(err)
		}
	}
	var pending int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE destination = 'std/app' AND state = 'pending'`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	st, err := s.Destinations(ctx, []string{"std/app"})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].InFlight != 3 || st[0].Pending != pending {
		t.Fatalf("Destinations: in_flight %d, pending %d; want 3, %d", st[0].InFlight, st[0].Pending, pending)
	}
	checkPlans(t, s, []stmt{
		{"leases in flight", inflightSQL, []any{"std/app", nil}},
		{"destination counts", destinationCountsSQL, []any{"std/app", time.Now()}},
		{"hand-over's lease test", `SELECT l.lease FROM (SELECT 'std/app'::text AS dest, 60000000::bigint AS lease, 4 AS cap) d,
			now() AS t, ` + leaseTestSQL, nil},
	}, n, "")
}

// TestJobLeasesMigration: a store of schema 11 with leases in flight gets
// job_leases filled with them when 0012 runs, and counts them after.
func TestJobLeasesMigration(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx := context.Background()
	s := open(t, url, Options{})
	for i := range 4 {
		if _, err := s.Record(ctx, receipt("std", fmt.Sprint("e", i), fmt.Sprintf(`{"n":%d}`, i), "std/app")); err != nil {
			t.Fatal(err)
		}
	}
	// Back to schema 11, as the store was before 0012 (and 13, 14): then three
	// leases.
	if _, err := s.Pool().Exec(ctx, `DROP TABLE refusal_hours; DROP TABLE seq_ranges, seq_epochs, late_events; DROP TABLE unavailable_minutes; DROP TABLE request_hours; DROP TABLE minutely; DROP TABLE job_leases; DROP TRIGGER job_leases_insert ON jobs;
		DROP TRIGGER job_leases_update ON jobs; DROP TRIGGER job_leases_delete ON jobs; DROP FUNCTION hw_job_lease();
		UPDATE schema_version SET version = 11`); err != nil {
		t.Fatal(err)
	}
	if jobs, err := s.Lease(ctx, "std/app", 3, time.Hour); err != nil || len(jobs) != 3 {
		t.Fatalf("lease on schema 11: %d jobs, %v", len(jobs), err)
	}
	s = open(t, url, Options{}) // migrates
	checkLeaseMirror(t, s, "the migration")
	st, err := s.Destinations(ctx, []string{"std/app"})
	if err != nil || st[0].InFlight != 3 || st[0].Pending != 4 {
		t.Fatalf("after the migration: %+v, %v; want 3 in flight of 4 pending", st, err)
	}
}
