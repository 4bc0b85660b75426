package pgstore

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// fullCount counts what Stats and Hourly must say by reading every row,
// not the counters: live rows grouped, plus what retention folded into
// pruned_totals. The conformance suite's FullCount.
func fullCount(t *testing.T, s *Store, now time.Time) (hookwarden.Stats, map[string][]hookwarden.HourCount) {
	t.Helper()
	checkLeaseMirror(t, s, "this step")
	checkMinutely(t, s, now)
	ctx := context.Background()
	out := hookwarden.Stats{At: now}
	src := map[string]*hookwarden.SourceStats{}
	rows, err := s.pool.Query(ctx, `
SELECT source, 'events', count(*), NULL::timestamptz FROM events GROUP BY source
UNION ALL SELECT source, kind, count(*), max(received_at) FROM receipts GROUP BY source, kind
UNION ALL SELECT r.source, 'batch-' || re.kind, count(*), NULL
	FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.kind <> 'accepted' GROUP BY r.source, re.kind
UNION ALL SELECT source, 'quarantine', sum(count), max(last_at) FROM quarantine GROUP BY source
UNION ALL SELECT name, 'pruned-' || kind, n, CASE WHEN kind = 'last_received' THEN at END FROM pruned_totals WHERE kind <> 'delivered'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, kind string
		var n int
		var last *time.Time
		if err := rows.Scan(&name, &kind, &n, &last); err != nil {
			t.Fatal(err)
		}
		if src[name] == nil {
			src[name] = &hookwarden.SourceStats{Source: name}
		}
		ss := src[name]
		switch kind {
		case "events", "pruned-accepted":
			ss.Accepted += n
		case "duplicate", "batch-duplicate", "pruned-duplicate":
			ss.Duplicates += n
		case "divergent", "batch-divergent", "pruned-divergent":
			ss.Duplicates += n
			ss.Divergent += n
		case "quarantine", "pruned-quarantined":
			ss.Quarantined += n
		}
		if last != nil && last.After(ss.LastReceivedAt) {
			ss.LastReceivedAt = last.UTC()
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, ss := range src {
		out.Sources = append(out.Sources, *ss)
	}
	rows, err = s.pool.Query(ctx, `
SELECT destination, sum(p)::bigint, sum(d)::bigint, sum(x)::bigint, min(o) FROM (
	SELECT destination, (state = 'pending')::int AS p, (state = 'delivered')::int AS d, (state = 'dead')::int AS x,
		CASE WHEN state = 'pending' THEN COALESCE(replayed_at, created_at) END AS o FROM jobs
	UNION ALL SELECT name, 0, n, 0, NULL FROM pruned_totals WHERE kind = 'delivered') j
GROUP BY destination`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d hookwarden.OutboxStat
		var oldest *time.Time
		if err := rows.Scan(&d.Destination, &d.Pending, &d.Delivered, &d.Dead, &oldest); err != nil {
			t.Fatal(err)
		}
		if oldest != nil {
			d.OldestPendingAge = max(now.Sub(*oldest), 0)
			d.OldestPendingSeconds = d.OldestPendingAge.Seconds()
		}
		out.Destinations = append(out.Destinations, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	hours := map[string][]hookwarden.HourCount{}
	rows, err = s.pool.Query(ctx, `
SELECT source, hour, sum(a)::bigint, sum(d)::bigint FROM (
	SELECT source, date_trunc('hour', claimed_at, 'UTC') AS hour, 1 AS a, 0 AS d FROM events
	UNION ALL SELECT source, date_trunc('hour', received_at, 'UTC'), 0, 1 FROM receipts WHERE kind IN ('duplicate', 'divergent')
	UNION ALL SELECT r.source, date_trunc('hour', r.received_at, 'UTC'), 0, 1 FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
		WHERE re.kind IN ('duplicate', 'divergent')) h
GROUP BY source, hour ORDER BY source, hour`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var c hookwarden.HourCount
		if err := rows.Scan(&name, &c.Hour, &c.Accepted, &c.Duplicates); err != nil {
			t.Fatal(err)
		}
		c.Hour = c.Hour.UTC()
		hours[name] = append(hours[name], c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, hours
}

// countsText renders stats and hours in name order, without the reading's
// time and without names that count nothing.
func countsText(st hookwarden.Stats, hours map[string][]hookwarden.HourCount) string {
	var lines []string
	for _, s := range st.Sources {
		if s != (hookwarden.SourceStats{Source: s.Source}) {
			lines = append(lines, fmt.Sprintf("source %s: %d %d %d %d %s", s.Source, s.Accepted, s.Duplicates, s.Divergent,
				s.Quarantined, s.LastReceivedAt.UTC().Format(time.RFC3339Nano)))
		}
	}
	for _, d := range st.Destinations {
		if d.Pending+d.Delivered+d.Dead > 0 {
			lines = append(lines, fmt.Sprintf("destination %s: %d %d %d %.0fs", d.Destination, d.Pending, d.Delivered, d.Dead, d.OldestPendingSeconds))
		}
	}
	for src, hs := range hours {
		for _, h := range hs {
			lines = append(lines, fmt.Sprintf("hour %s %s: %d %d", src, h.Hour.Format(time.RFC3339), h.Accepted, h.Duplicates))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestCountersFollowRows: after each write pgstore has (record, duplicate,
// divergent copy, batch, held request, body replay, deliver, retry,
// dead-letter, 32 concurrent records over several connections) and after
// deletes in the order retention makes them, the counters (summed over
// their shards) equal a full count of the rows.
func TestCountersFollowRows(t *testing.T) {
	q := setupQueue(t)
	var hoursBefore string
	check := func(step string, deleted bool) {
		t.Helper()
		now := q.clock.Now()
		st, err := q.s.counterStats(q.ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		hours, err := q.s.Hourly(q.ctx, []string{"std", "sg", "gh", "many"}, t0.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		full, fullHours := fullCount(t, q.s, now)
		if deleted {
			// Hourly counts what was recorded: deletes do not move it.
			if got := countsText(hookwarden.Stats{}, hours); got != hoursBefore {
				t.Errorf("after %s: hourly moved:\n%s\nwant\n%s", step, got, hoursBefore)
			}
			hours, fullHours = nil, nil
		} else { // raw deletes leave pruned_totals as it was
			checkRequestHours(t, q.s)
		}
		if got, want := countsText(st, hours), countsText(full, fullHours); got != want {
			t.Errorf("after %s: counters\n%s\nwant the full count\n%s", step, got, want)
		}
		if !deleted {
			hoursBefore = countsText(hookwarden.Stats{}, hours)
		}
	}
	check("nothing", false)
	q.add("std", "A", `{"a":1}`, "std/a", "std/b")
	check("record", false)
	q.record(withTime(receipt("std", "A", `{"a":1}`, "std/a"), q.clock.Now()))
	q.record(withTime(receipt("std", "A", `{"a":2}`, "std/a"), q.clock.Now()))
	check("duplicates", false)
	q.clock.Add(time.Hour)
	q.record(withTime(batch(element("s1"), element("s2"), element("s1")), q.clock.Now()))
	q.record(withTime(batch(element("s2"), element("s3")), q.clock.Now()))
	check("batches", false)
	q.record(withTime(receipt("std", "", `{"no":"id"}`), q.clock.Now()))
	q.record(withTime(receipt("std", "", `{"no":"id"}`), q.clock.Now()))
	q.record(withTime(keyed("d-1", `{"ping":1}`), q.clock.Now()))
	q.record(withTime(keyed("d-2", `{"ping":1}`), q.clock.Now()))
	check("quarantine", false)
	q.clock.Add(2 * time.Hour)
	q.add("std", "B", `{"b":1}`, "std/a")
	for _, j := range q.lease("std/a", 10, time.Minute) {
		v := hookwarden.Retry
		switch j.EventID {
		case "A":
			v = hookwarden.Delivered
		case "B":
			v = hookwarden.Dead
		}
		q.finish(q.attempt(j, v))
	}
	check("deliver, retry, dead-letter", false)
	var rs []*hookwarden.Receipt
	for i := range 32 {
		rs = append(rs, withTime(receipt("many", fmt.Sprint("m", i%24), fmt.Sprintf(`{"m":%d}`, i%24), "many/app"), q.clock.Now()))
	}
	q.recordAll(rs)
	check("32 concurrent records", false)
	var shards int
	if err := q.s.pool.QueryRow(q.ctx, `SELECT count(DISTINCT shard) FROM counters WHERE name = 'many'`).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	t.Logf("the counts of 32 concurrent records went to %d shard rows", shards)
	if shards < 2 {
		t.Errorf("32 concurrent records over the pool wrote %d count row(s) of their source: want one per connection", shards)
	}

	// The connections that wrote them close: Prune folds their rows into
	// one per count, and the sums do not move.
	var pids []int32
	if err := q.s.pool.QueryRow(q.ctx, `SELECT array_agg(DISTINCT shard) FROM counters WHERE shard <> 0`).Scan(&pids); err != nil {
		t.Fatal(err)
	}
	q.s.pool.Reset()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var live int
		if err := q.s.pool.QueryRow(q.ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the closed connections' server processes still live after 10 s", live)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := q.s.Prune(q.ctx, hookwarden.PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	check("a fold of closed connections' rows", false)
	var left int
	if err := q.s.pool.QueryRow(q.ctx, `SELECT (SELECT count(*) FROM counters WHERE shard = ANY($1))
		+ (SELECT count(*) FROM hourly WHERE shard = ANY($1))
		+ (SELECT count(*) FROM request_hours WHERE shard = ANY($1))`, pids).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("after the fold, %d count rows of closed connections are left", left)
	}
	if err := q.s.pool.QueryRow(q.ctx, `SELECT count(*) FROM counters WHERE name = 'many'`).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	if shards != 2 { // accepted and duplicate, in shard 0
		t.Errorf("after the fold, source many has %d count rows, want 2", shards)
	}
	// Counting goes on in the new connections' rows.
	q.recordAll(rs[:8])
	check("records after the fold", false)

	// Deletes as retention makes them, children first.
	for _, del := range []string{
		`DELETE FROM attempts WHERE job_id IN (SELECT j.id FROM jobs j JOIN events e ON e.id = j.event_ref WHERE e.source IN ('std', 'sg'))`,
		`DELETE FROM jobs WHERE event_ref IN (SELECT id FROM events WHERE source = 'sg' OR event_id = 'A')`,
		`DELETE FROM receipt_events WHERE event_ref IN (SELECT id FROM events WHERE source = 'sg')`,
		`DELETE FROM receipts WHERE event_ref IN (SELECT id FROM events WHERE source = 'sg' OR event_id = 'A')`,
		`DELETE FROM receipts WHERE kind = 'batch' AND NOT EXISTS (SELECT 1 FROM receipt_events WHERE receipt_id = receipts.id)`,
		`DELETE FROM events WHERE source = 'sg' OR event_id = 'A'`,
		`UPDATE quarantine SET count = count + 3`,
		`DELETE FROM quarantine WHERE kind = 'body_replayed'`,
	} {
		if _, err := q.s.pool.Exec(q.ctx, del); err != nil {
			t.Fatalf("%s: %v", del, err)
		}
		check(del, true)
	}
}

func withTime(r *hookwarden.Receipt, at time.Time) *hookwarden.Receipt {
	r.ReceivedAt = at
	return r
}

// checkMinutely fails unless the counts per minute of each hour whose
// minutes are all kept (hookwarden.MinuteCountsKeep before now) add up to
// the hour's count, shards summed: both count what was recorded, and the
// counters case checks hourly against the rows.
func checkMinutely(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	hour := now.Add(-hookwarden.MinuteCountsKeep).UTC()
	if h := hour.Truncate(time.Hour); h.Before(hour) {
		hour = h.Add(time.Hour)
	}
	rows, err := s.pool.Query(context.Background(), `
WITH m AS (SELECT source, date_trunc('hour', minute, 'UTC') AS hour, sum(accepted) AS a, sum(duplicates) AS d FROM minutely
	WHERE minute >= $1 GROUP BY 1, 2 HAVING sum(accepted) <> 0 OR sum(duplicates) <> 0),
h AS (SELECT source, hour, sum(accepted) AS a, sum(duplicates) AS d FROM hourly
	WHERE hour >= $1 GROUP BY 1, 2 HAVING sum(accepted) <> 0 OR sum(duplicates) <> 0)
SELECT 'minutely', * FROM (SELECT * FROM m EXCEPT SELECT * FROM h) x
UNION ALL SELECT 'hourly', * FROM (SELECT * FROM h EXCEPT SELECT * FROM m) y`, hour)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var side, source string
		var h time.Time
		var a, d int64
		if err := rows.Scan(&side, &source, &h, &a, &d); err != nil {
			t.Fatal(err)
		}
		t.Errorf("minutely and hourly differ: %s alone has %s %s accepted %d duplicates %d", side, source, h.UTC(), a, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMigration13CountsRecentMinutes: a store of schema 12 gets the counts
// per minute of its last 26 hours (by the database's clock) when 0013
// runs, and a prune pass later deletes the minutes older than that.
func TestMigration13CountsRecentMinutes(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second)
	clock := now.Add(-30 * time.Hour)
	s := open(t, url, Options{Now: func() time.Time { return clock }})
	rec := func(id, body string) {
		t.Helper()
		r := receipt("std", id, body)
		r.ReceivedAt = clock
		if _, err := s.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	rec("e_30h", `{"n":0}`) // older than the minutes kept
	clock = now.Add(-23*time.Hour - 40*time.Minute)
	rec("e_day", `{"n":1}`)
	rec("e_day", `{"n":1}`)
	clock = now.Add(-30 * time.Minute)
	rec("e_hour", `{"n":2}`)
	// Back to 12 (0013 and 0014 write the counting functions anew).
	if _, err := s.Pool().Exec(ctx, `DROP TABLE refusal_hours; DROP TABLE seq_ranges, seq_epochs, late_events; DROP TABLE unavailable_minutes; DROP TABLE request_hours; DROP TABLE minutely; UPDATE schema_version SET version = 12`); err != nil {
		t.Fatal(err)
	}
	clock = now
	s = open(t, url, Options{Now: func() time.Time { return clock }}) // migrates
	got, err := s.RecentCounts(ctx, []string{"std"}, now.Add(-time.Hour), now.Add(-24*time.Hour))
	if want := [2]hookwarden.WindowCounts{{Accepted: 1}, {Accepted: 2, Duplicates: 1}}; err != nil || got["std"] != want {
		t.Fatalf("after 0013: %+v, %v; want %+v", got["std"], err, want)
	}
	clock = now.Add(3 * time.Hour)
	if _, err := s.Prune(ctx, hookwarden.PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	var left []time.Time
	rows, err := s.Pool().Query(ctx, `SELECT DISTINCT minute FROM minutely ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	left, err = pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil || len(left) != 1 || !left[0].Equal(now.Add(-30*time.Minute).Truncate(time.Minute)) {
		t.Fatalf("minutes after a pass 3 h on: %v (%v), want e_hour's alone", left, err)
	}
}

// checkRequestHours fails unless request_hours (schema 14), shards merged,
// tells the first and last request of every source and hour that gaps
// reads: those after the hour of the last request retention deleted
// (pruned_totals' last_received), from which on every receipt is kept.
// There the rows match the receipts exactly, with no hour they do not
// have.
func checkRequestHours(t *testing.T, s *Store) {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `
WITH seed AS (SELECT name AS source, date_trunc('hour', at, 'UTC') AS hour FROM pruned_totals WHERE kind = 'last_received'),
r AS (SELECT source, date_trunc('hour', received_at, 'UTC') AS hour, min(received_at) AS a, max(received_at) AS b FROM receipts GROUP BY 1, 2),
q AS (SELECT source, hour, min(first_at) AS a, max(last_at) AS b FROM request_hours GROUP BY 1, 2)
SELECT 'receipts', * FROM (SELECT * FROM r EXCEPT SELECT * FROM q) x
	WHERE x.hour > COALESCE((SELECT s.hour FROM seed s WHERE s.source = x.source), '-infinity')
UNION ALL SELECT 'request_hours', * FROM (SELECT * FROM q EXCEPT SELECT * FROM r) y
	WHERE y.hour > COALESCE((SELECT s.hour FROM seed s WHERE s.source = y.source), '-infinity')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var side, source string
		var h, a, b time.Time
		if err := rows.Scan(&side, &source, &h, &a, &b); err != nil {
			t.Fatal(err)
		}
		t.Errorf("request_hours and receipts differ: %s alone has %s %s first %s last %s", side, source, h.UTC(), a.UTC(), b.UTC())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestMigration14RequestHours: a store of schema 13 gets the first and
// last request of each source and hour of the receipts it holds when 0014
// runs (quarantined requests and repeats too), and the trigger keeps them
// from there on.
func TestMigration14RequestHours(t *testing.T) {
	t.Parallel()
	url := pgtest.Database(t)
	ctx := context.Background()
	c := &clock{t: t0}
	s := open(t, url, Options{Now: c.Now})
	q := &queue{fixture: &fixture{t: t, s: s}, clock: c, ctx: ctx}
	for i, step := range []time.Duration{0, time.Minute, 2 * time.Hour, 10 * time.Second, 26 * time.Hour} {
		c.Add(step)
		q.recordAt(receipt("std", fmt.Sprint("e", i%3), `{}`), c.Now())
		q.recordAt(receipt("std", "", `{"no":"id"}`), c.Now().Add(time.Second))
		q.recordAt(receipt("gh", fmt.Sprint("g", i), `{}`), c.Now().Add(2*time.Second))
	}
	// Back to 13 (0014 writes the counting and folding functions anew).
	if _, err := s.Pool().Exec(ctx, `DROP TABLE refusal_hours; DROP TABLE seq_ranges, seq_epochs, late_events; DROP TABLE unavailable_minutes; DROP TABLE request_hours; UPDATE schema_version SET version = 13`); err != nil {
		t.Fatal(err)
	}
	s = open(t, url, Options{Now: c.Now}) // migrates
	q.s = s
	var hours int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM request_hours`).Scan(&hours); err != nil {
		t.Fatal(err)
	}
	if hours != 6 { // std and gh, each in three hours
		t.Errorf("request_hours holds %d rows after the upgrade, want 6", hours)
	}
	checkRequestHours(t, s)
	c.Add(time.Hour)
	q.recordAt(receipt("std", "late", `{}`), c.Now())
	checkRequestHours(t, s)
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM request_hours`).Scan(&hours); err != nil || hours != 7 {
		t.Errorf("request_hours holds %d rows after a new hour's request (%v), want 7", hours, err)
	}
	// The claims tier takes the hours before its cutoff's with it, as
	// hourly's; gaps then reads from pruned_totals' last request on.
	c.Add(25 * time.Hour)
	res, err := s.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: 24 * time.Hour, Claims: 48 * time.Hour}})
	if err != nil || res.EventsDeleted == 0 {
		t.Fatalf("claims tier: %+v, %v; want events deleted", res, err)
	}
	var before, after int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE hour < date_trunc('hour', $1::timestamptz, 'UTC')),
		count(*) FILTER (WHERE hour >= date_trunc('hour', $1::timestamptz, 'UTC')) FROM request_hours`, res.ClaimCutoff).
		Scan(&before, &after); err != nil {
		t.Fatal(err)
	}
	if before != 0 || after == 0 {
		t.Errorf("after the claims tier (cutoff %v): %d request hours before the cutoff's, %d after; want 0 and some", res.ClaimCutoff, before, after)
	}
	checkRequestHours(t, s)
}
