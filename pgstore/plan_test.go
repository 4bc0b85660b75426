package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// seedHistory writes n events of three sources (one in 1000 of source
// rare, the others std and gh), ten seconds apart, one receipt and one job
// each (one job in 500 dead, the newest 1000 pending, the rest
// delivered), analyzes the tables and returns the newest event's time.
func seedHistory(tb testing.TB, s *Store, n int) time.Time {
	tb.Helper()
	for _, q := range []string{`
INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256)
SELECT CASE WHEN g % 1000 = 0 THEN 'rare' WHEN g % 2 = 0 THEN 'std' ELSE 'gh' END, 'e' || g, 't.created',
	timestamptz '2026-01-01 00:00:00+00' + g * interval '10 seconds', '\x00'::bytea FROM generate_series(1, $1::int) g`, `
INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
SELECT source, id, 'accepted', claimed_at, '127.0.0.1:1', 'Content-Type: application/json', '{}', '' FROM events
WHERE $1::int > 0`, `
INSERT INTO jobs (event_ref, destination, state, next_at, created_at, finished_at)
SELECT id, source || '/app', CASE WHEN id % 500 = 0 THEN 'dead' WHEN id > $1::int - 1000 THEN 'pending' ELSE 'delivered' END,
	claimed_at, claimed_at, claimed_at FROM events`,
	} {
		if _, err := s.Pool().Exec(context.Background(), q, n); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(context.Background(), `ANALYZE`); err != nil {
		tb.Fatal(err)
	}
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * 10 * time.Second)
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
	// Of EXPLAIN ANALYZE: rows per loop, the loops, rows dropped.
	ActualRows       float64 `json:"Actual Rows"`
	Loops            float64 `json:"Actual Loops"`
	RemovedByFilter  float64 `json:"Rows Removed by Filter"`
	RemovedByRecheck float64 `json:"Rows Removed by Index Recheck"`
	// Of BUFFERS.
	SharedHit  int64 `json:"Shared Hit Blocks"`
	SharedRead int64 `json:"Shared Read Blocks"`
}

// seqScans lists the big tables the plan reads whole.
func (n planNode) seqScans() []string {
	var out []string
	if n.NodeType == "Seq Scan" {
		switch n.Relation {
		case "events", "receipts", "jobs":
			out = append(out, n.Relation)
		}
	}
	for _, c := range n.Plans {
		out = append(out, c.seqScans()...)
	}
	return out
}

// TestOperatorReadPlans: every statement behind the operator's reads
// (stats, hourly, the dashboard's windows, each listing filter, gaps'
// silences, an idle prune's statements) run with EXPLAIN ANALYZE on a store
// of 30,000 events: none reads events, receipts, receipt_events, jobs or
// attempts whole (no Seq Scan), and none touches more than a tenth of them
// (rows returned plus rows removed by a filter, over every loop): an index
// walk that reads the history row by row fails as a scan does.
func TestOperatorReadPlans(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	const n = 30000
	end := seedHistory(t, s, n)
	// A rare type, and a repeat for every tenth event.
	for _, q := range []string{
		`UPDATE events SET event_type = 'rare.type' WHERE id % 5000 = 7`,
		`INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body_sha256)
		SELECT source, id, 'duplicate', claimed_at, '127.0.0.1:1', '', '' FROM events WHERE id % 10 = 0`,
		`ANALYZE`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var stmts []stmt
	hour := end.Add(-time.Hour - 17*time.Minute) // inside an hour: the windows' partial first hour
	day := end.Add(-24*time.Hour - 17*time.Minute)
	for _, f := range []hookwarden.EventFilter{{}, {Since: hour}, {Since: hour, Cursor: n - 10}, {Status: hookwarden.StatusDelivered}} {
		q, args, _, err := eventsQuery(f)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, stmt{fmt.Sprintf("events %+v", f), q, args})
	}
	for _, f := range []hookwarden.EventFilter{{Status: hookwarden.StatusDead}, {Status: hookwarden.StatusPending},
		{Status: hookwarden.StatusDead, Source: "rare"}, {Status: hookwarden.StatusPending, Since: hour}} {
		stmts = append(stmts, chunkStmt(t, s, f, 0))
	}
	for _, f := range []hookwarden.EventFilter{{Source: "rare"}, {Type: "rare.type"}, {Type: "t.*"},
		{Source: "std", Type: "t.*"}, {Source: "rare", Type: "rare.type"}, {Source: "std", Since: hour},
		{Source: "gh", Status: hookwarden.StatusDelivered}, {Source: "std", Cursor: 100}} {
		if !byPairs(f) {
			t.Fatalf("%+v does not list by pairs", f)
		}
		var pairs [][2]string
		err := s.snapshot(ctx, func(tx pgx.Tx) error {
			var err error
			pairs, err = typePairs(ctx, tx, f)
			return err
		})
		if err != nil || pairs == nil {
			t.Fatalf("pairs of %+v: %v %v", f, pairs, err)
		}
		hi, lo := int64(1<<63-1), int64(0)
		if f.Cursor > 0 {
			hi = f.Cursor
		}
		var since *time.Time
		if !f.Since.IsZero() {
			since = &f.Since
			if err := s.Pool().QueryRow(ctx, sinceRefSQL, f.Since).Scan(&lo); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range pairs {
			stmts = append(stmts, stmt{fmt.Sprintf("events of pair %v %+v", p, f),
				pairListSQL(since != nil, f.Status == hookwarden.StatusDelivered), []any{p[0], p[1], hi, lo, since, limitOf(0) + 1}})
		}
	}
	stmts = append(stmts, stmt{"events: summaries of a page", summariesSQL, []any{[]int64{1, 2, 7, 29999, 30000}}},
		stmt{"events: since's first id", sinceRefSQL, []any{hour}})
	for _, f := range []hookwarden.DeadFilter{{}, {Source: "rare"}, {Since: hour}} {
		q, args, _ := deadQuery(f)
		stmts = append(stmts, stmt{fmt.Sprintf("dead %+v", f), q, args})
	}
	srcs := []string{"std", "gh", "rare"}
	stmts = append(stmts,
		stmt{"pairs of all sources", typePairsSQL, []any{2*maxTypePairs + 1}},
		stmt{"sources with events", sourcesSQL, nil},
		stmt{"pairs of a source", typeOfSourcePairsSQL, []any{2*maxTypePairs + 1, "std", "t."}},
		stmt{"recent counts", recentCountsSQL, windows(end, srcs, hour, day)},
		stmt{"recent counts on the hour", recentCountsSQL, windows(end, srcs, end.Truncate(time.Hour), end.Truncate(time.Hour).Add(-24*time.Hour))},
		stmt{"last accepted", lastAcceptedSQL, []any{srcs}},
		stmt{"silences: first and last request", requestBoundsSQL, []any{"std", end.Add(-7 * 24 * time.Hour)}},
		stmt{"silences: the walk", requestGapsSQL, []any{"std", end.Add(-7 * 24 * time.Hour), time.Hour}},
		stmt{"silences: the walk of a rare source", requestGapsSQL, []any{"rare", end.Add(-7 * 24 * time.Hour), time.Hour}},
		stmt{"silences: the request hours", requestHoursSQL, []any{"std", end.Add(-7 * 24 * time.Hour).Truncate(time.Hour)}},
	)
	checkPlans(t, s, stmts, n, "")

	// A backlog of a fifth of the history (a destination down for a
	// while) that grew after the statistics were taken, as a backlog
	// grows between two autovacuum ANALYZEs: --status pending and dead
	// read a page of it, not all of it. (--status delivered, walking the
	// events newest first, skips the backlog: it is left out here.)
	// The dead letters all older than a quarter of the history (replayed
	// or delivered since): a dead letters listing reads its page of them,
	// not every job newer than the newest.
	// An idle prune's count of held events (a few older than the payload
	// cutoff, held by a dead letter or a pending job) reads those, not the
	// backlog after the cutoff.
	for _, q := range []string{
		`UPDATE jobs SET state = 'pending' WHERE event_ref > $1 AND state = 'delivered'`,
		`UPDATE jobs SET state = 'pending' WHERE event_ref IN (1001, 1002) AND $1::int > 0`,
		`INSERT INTO prune_held (event_ref) SELECT id FROM events WHERE id IN (500, 1000, 1001, 1002) AND $1::int > 0`,
		`UPDATE jobs SET state = 'delivered' WHERE state = 'dead' AND event_ref > $1::int / 8 * 5 / 2`,
	} {
		if _, err := s.Pool().Exec(ctx, q, n-n/5); err != nil {
			t.Fatal(err)
		}
	}
	stmts = []stmt{{"prune: count held", countHeldSQL, []any{day}}}
	var dead []stmt
	for _, f := range []hookwarden.DeadFilter{{}, {Source: "gh"}, {Cursor: 5000}} {
		q, args, _ := deadQuery(f)
		dead = append(dead, stmt{fmt.Sprintf("dead, the letters old, %+v", f), q, args})
	}
	// At this size the planner sorts the few dead letters; at 10 M claims
	// (1 job in 10,000 dead) it walks an index newest first instead:
	// enable_sort off makes it take that plan here.
	checkPlans(t, s, dead, n, "SET LOCAL enable_sort = off")
	for _, f := range []hookwarden.EventFilter{{Status: hookwarden.StatusPending}, {Status: hookwarden.StatusPending, Cursor: n - 100},
		{Status: hookwarden.StatusPending, Since: day}, {Status: hookwarden.StatusPending, Source: "gh"},
		{Status: hookwarden.StatusPending, Type: "t.*"}, {Status: hookwarden.StatusDead}, {Status: hookwarden.StatusDead, Type: "t.created"}} {
		stmts = append(stmts, chunkStmt(t, s, f, 0), chunkStmt(t, s, f, maxJobsChunk/4))
	}
	checkPlans(t, s, stmts, n, "")
}

// chunkStmt is the statement of a chunk of listByJobs' walk for f, chunk
// jobs long (0: the first chunk's, the page's limit + 1).
func chunkStmt(t *testing.T, s *Store, f hookwarden.EventFilter, chunk int) stmt {
	t.Helper()
	if chunk == 0 {
		chunk = limitOf(f.Limit) + 1
	}
	var w *jobsWalk
	err := s.snapshot(context.Background(), func(tx pgx.Tx) error {
		var err error
		w, err = newJobsWalk(context.Background(), tx, f)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return stmt{fmt.Sprintf("events by jobs, chunk of %d %+v", chunk, f), jobsChunkSQL(f.Status), w.args(chunk)}
}

type stmt struct {
	name string
	q    string
	args []any
}

// checkPlans runs each statement with EXPLAIN ANALYZE and fails on a Seq
// Scan of a big table or on touching more than a tenth of n rows. set, if
// not empty, runs first in each statement's transaction (SET LOCAL: the
// plan the planner picks at a larger scale).
func checkPlans(t *testing.T, s *Store, stmts []stmt, n int, set string) {
	t.Helper()
	ctx := context.Background()
	for _, st := range stmts {
		var plan []struct{ Plan planNode }
		var raw []byte
		// ANALYZE runs the statement; in a transaction rolled back, in
		// case one writes.
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			if set != "" {
				if _, err := tx.Exec(ctx, set); err != nil {
					return err
				}
			}
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+st.q, st.args...).Scan(&raw); err != nil {
				return err
			}
			return errRollback
		})
		if err != nil && !errors.Is(err, errRollback) {
			t.Fatalf("%s: %v", st.name, err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		if scans := plan[0].Plan.seqScans(); len(scans) > 0 {
			t.Errorf("%s scans %v whole:\n%s", st.name, scans, raw)
		}
		if touched := plan[0].Plan.touched(); touched > n/10 {
			t.Errorf("%s touches %d rows of the history's %d events:\n%s", st.name, touched, n, raw)
		}
	}
}

var errRollback = errors.New("rolled back")

// touched is the rows the plan's nodes on the history's tables returned or
// filtered out, over all their loops.
func (n planNode) touched() int {
	sum := 0
	switch n.Relation {
	case "events", "receipts", "receipt_events", "jobs", "attempts":
		sum += int((n.ActualRows + n.RemovedByFilter + n.RemovedByRecheck) * max(n.Loops, 1))
	}
	for _, c := range n.Plans {
		sum += c.touched()
	}
	return sum
}

// TestListByJobsWalk: --status pending and dead, walked in chunks of the
// backlog and the dead letters, list page by page exactly what a plain
// query of the whole tables does, whatever the filter skips: events with
// several pending jobs across a chunk's end, pending events with a dead
// job too (not pending), a rare source found in the fifth chunk or later.
func TestListByJobsWalk(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	const n = 20000
	end := seedHistory(t, s, n)
	for _, q := range []string{
		`UPDATE jobs SET state = 'pending' WHERE event_ref > 15000 AND state = 'delivered'`,
		`INSERT INTO jobs (event_ref, destination, state, next_at, created_at)
		SELECT id, source || '/other', CASE WHEN id % 13 = 0 THEN 'dead' ELSE 'pending' END, claimed_at, claimed_at
		FROM events WHERE id > 15000 AND id % 7 = 0`,
		`UPDATE events SET event_type = 'rare.type' WHERE id % 300 = 1`,
		`UPDATE events SET source = 'rare' WHERE id % 997 = 3`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	want := func(f hookwarden.EventFilter) []int64 {
		var w where
		typeConds(&w, f)
		if !f.Since.IsZero() {
			w.add("e.claimed_at >= " + w.arg(f.Since))
		}
		w.add("EXISTS (SELECT 1 FROM jobs WHERE event_ref = e.id AND state = " + w.arg(string(f.Status)) + ")")
		if f.Status == hookwarden.StatusPending {
			w.add("NOT EXISTS (SELECT 1 FROM jobs WHERE event_ref = e.id AND state = 'dead')")
		}
		rows, err := s.Pool().Query(ctx, "SELECT e.id FROM events e"+w.String()+" ORDER BY e.id DESC", w.args...)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	since := end.Add(-3 * time.Hour)
	for _, st := range []hookwarden.EventStatus{hookwarden.StatusPending, hookwarden.StatusDead} {
		for _, f := range []hookwarden.EventFilter{{}, {Source: "rare"}, {Source: "gh"}, {Type: "rare.type"},
			{Type: "rare.*"}, {Source: "std", Type: "t.*"}, {Since: since}, {Source: "rare", Since: since},
			{Source: "none"}, {Limit: 7}, {Limit: 500, Source: "std"}} {
			f.Status = st
			expect := want(f)
			var got []int64
			for pages := 0; ; pages++ {
				if pages > n {
					t.Fatalf("%+v: no end of pages", f)
				}
				items, next, err := s.ListEvents(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range items {
					if ev.Status != st {
						t.Fatalf("%+v: event %d is %s", f, ev.Ref, ev.Status)
					}
					got = append(got, ev.Ref)
				}
				if next == 0 {
					break
				}
				f.Cursor = next
			}
			if len(expect) == 0 && f.Source != "none" {
				t.Fatalf("%+v: the seed has no such events", f)
			}
			if !slices.Equal(got, expect) {
				t.Errorf("%+v: listed %d events (%v…), want %d (%v…)", f, len(got), got[:min(5, len(got))], len(expect), expect[:min(5, len(expect))])
			}
		}
	}
}

// windows is recentCountsSQL's arguments for the bounds hour and day read
// at now.
func windows(now time.Time, srcs []string, hour, day time.Time) []any {
	hs, hw := hookwarden.WindowStart(now, hour)
	ds, dw := hookwarden.WindowStart(now, day)
	return []any{srcs, hs, hw, ds, dw}
}

// TestNoParallelWorkers: the store's sessions plan without parallel
// workers, even where the planner takes them for free (as an estimate
// gone stale at 10 M claims made it, for --since: docs/performance.md),
// because each one is a process the server starts for the statement. A
// URL that asks for workers keeps them: the same plan then gathers.
func TestNoParallelWorkers(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	s := open(t, url, Options{})
	end := seedHistory(t, s, 20000)
	ctx := context.Background()
	q, args, _, err := eventsQuery(hookwarden.EventFilter{Since: end.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	gathers := func(s *Store) (count int) {
		t.Helper()
		var raw []byte
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL parallel_setup_cost = 0; SET LOCAL parallel_tuple_cost = 0;
				SET LOCAL min_parallel_index_scan_size = 0; SET LOCAL min_parallel_table_scan_size = 0`); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+q, args...).Scan(&raw)
		})
		if err != nil {
			t.Fatal(err)
		}
		var plan []struct{ Plan planNode }
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		var walk func(planNode)
		walk = func(n planNode) {
			if strings.HasPrefix(n.NodeType, "Gather") {
				count++
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		walk(plan[0].Plan)
		return count
	}
	if n := gathers(s); n > 0 {
		t.Errorf("the --since listing gathers from parallel workers (%d Gather nodes)", n)
	}
	asks := open(t, url+"&max_parallel_workers_per_gather=2", Options{})
	if n := gathers(asks); n == 0 {
		t.Error("a URL with max_parallel_workers_per_gather=2: no Gather in the same plan")
	}
}

// nextDuePlain is what nextDueSQL answers, said plainly: the least, over
// the destination's pending jobs, of the later of next_at and the lease's
// end. It reads every pending job.
const nextDuePlain = `SELECT min(GREATEST(next_at, COALESCE(leased_until, next_at))) FROM jobs
WHERE destination = $1 AND state = 'pending'`

// TestLeaseReadsReadTheLeases: with a destination's backlog parked (a
// fifth of the history, the statistics taken after it, as autovacuum takes
// them) and some of it leased, the worker's next due time and the release
// of leases at start read the leases and the first job not leased, not the
// backlog; and the next due time is what the plain definition answers:
// leases ending before and after the first free job's time, a lease that
// expired without a finish, all of the backlog leased, none.
func TestLeaseReadsReadTheLeases(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	const n = 30000
	end := seedHistory(t, s, n)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// std/app's newest fifth parked; its 25 oldest in flight until a
	// minute after the newest event, 5 more until before the first free
	// job's time.
	exec(`UPDATE jobs SET state = 'pending' WHERE destination = 'std/app' AND event_ref > $1`, n-n/5*2)
	exec(`UPDATE jobs SET leased_until = $1 WHERE id IN (SELECT id FROM jobs WHERE destination = 'std/app' AND state = 'pending'
		ORDER BY next_at LIMIT 25)`, end.Add(time.Minute))
	exec(`ANALYZE jobs`)
	checkPlans(t, s, []stmt{{"next due", nextDueSQL, []any{"std/app"}},
		{"release leases", releaseSQL, []any{nil, "other", nil, int64(10_000_000)}}}, n, "")

	same := func(what string) {
		t.Helper()
		for _, dest := range []string{"std/app", "gh/app", "none/app"} {
			var got, want *time.Time
			if err := s.Pool().QueryRow(ctx, nextDueSQL, dest).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if err := s.Pool().QueryRow(ctx, nextDuePlain, dest).Scan(&want); err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (want == nil) || got != nil && !got.Equal(*want) {
				t.Errorf("%s, %s: next due %v, want %v", what, dest, got, want)
			}
		}
	}
	same("the oldest leased past the first free job")
	// A lease ending before the first free job's time: it is the answer.
	exec(`UPDATE jobs SET leased_until = next_at WHERE id = (SELECT min(job_id) FROM job_leases)`)
	same("a lease ending at its own time")
	// A lease that expired without a finish, its job due after it and
	// before the first free job: the later of the two.
	exec(`UPDATE jobs SET leased_until = f.u - interval '2 hours', next_at = f.u - interval '1 hour'
		FROM (SELECT min(next_at) AS u FROM jobs WHERE destination = 'std/app' AND state = 'pending' AND leased_until IS NULL) f
		WHERE id = (SELECT max(job_id) FROM job_leases)`)
	same("an expired lease")
	// Every pending job of std/app leased: no free job to bound them.
	exec(`UPDATE jobs SET leased_until = next_at + interval '1 second' WHERE destination = 'std/app' AND state = 'pending' AND leased_until IS NULL`)
	same("the whole backlog leased")
	exec(`UPDATE jobs SET state = 'delivered', leased_until = NULL WHERE destination = 'std/app'`)
	same("nothing pending")
}

// TestExactTypeSkipsThePairsWalk: a listing of one exact type over every
// source pairs it with the sources of the counters and never walks the
// store's (source, type) pairs (a seek per pair of the whole store, 6.5-9.9
// ms of a CLI read at 10 M claims); the page is the same as a listing of each
// source's pair.
func TestExactTypeSkipsThePairsWalk(t *testing.T) {
	q, trace := tracedQueue(t)
	c := q.clock
	var want []string
	for i := range 90 {
		c.Add(time.Second)
		src := []string{"std", "gh", "sg"}[i/30]
		r := receipt(src, fmt.Sprint("e", i), "{}")
		r.Events[0].Type = fmt.Sprint("t.", i%30)
		q.record(r)
		if i%30 == 7 {
			want = append([]string{src + "/" + r.Events[0].ID}, want...)
		}
	}
	trace.reset()
	items, _, err := q.s.ListEvents(q.ctx, hookwarden.EventFilter{Type: "t.7"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Source+"/"+it.EventID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events of type t.7: %v, want %v", got, want)
	}
	for _, sql := range trace.sqls() {
		if strings.Contains(sql, "WITH RECURSIVE pairs") {
			t.Errorf("an exact type walked the pairs: %s", sql)
		}
	}
}
