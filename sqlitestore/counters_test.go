package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestMigration12CountsExistingRows: a file written before schema 12 (rows of
// every kind: events, duplicates, divergent copies, batches, held requests,
// delivered, dead and pending jobs, a folded event) gets counters equal to
// what Stats, Hourly and RecentCounts read from its rows, and they keep
// counting after the upgrade.
func TestMigration12CountsExistingRows(t *testing.T) {
	c := newTestClock()
	o, path := fileOps(t, c)
	s, ctx := o.s, o.ctx
	o.record("stripe", "evt_old", `{"old":1}`, "stripe/app")
	o.finish("stripe/app", "evt_old", hookwarden.Delivered)
	c.Add(40 * 24 * time.Hour)
	if _, err := s.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: 30 * 24 * time.Hour}}); err != nil {
		t.Fatal(err)
	}
	o.record("stripe", "evt_old", `{"old":1}`, "stripe/app") // a copy of a folded event
	for i := range 5 {
		o.record("stripe", fmt.Sprint("evt_", i), fmt.Sprintf(`{"i":%d}`, i), "stripe/app", "stripe/audit")
		c.Add(25 * time.Minute)
	}
	o.record("stripe", "evt_1", `{"i":1}`, "stripe/app")
	o.record("stripe", "evt_2", `{"i":"two"}`, "stripe/app")
	o.recordBatch("sendgrid", "sendgrid/app", "sg1", "sg2", "sg1")
	o.recordBatch("sendgrid", "sendgrid/app", "sg2")
	o.record("stripe", "", `{"no":"id"}`)
	o.record("stripe", "", `{"no":"id"}`)
	o.finish("stripe/app", "evt_0", hookwarden.Delivered)
	o.finish("stripe/app", "evt_1", hookwarden.Dead)
	o.finish("stripe/audit", "evt_2", hookwarden.Delivered)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Back to schema 11: the rows as a schema 11 file holds them.
	execRaw(t, path, schema14(t)...)
	execRaw(t, path,
		`DROP TRIGGER count_event_insert`, `DROP TRIGGER count_event_delete`,
		`DROP TRIGGER count_receipt_insert`, `DROP TRIGGER count_receipt_delete`,
		`DROP TRIGGER count_link_insert`, `DROP TRIGGER count_link_delete`,
		`DROP TRIGGER count_quarantine_insert`, `DROP TRIGGER count_quarantine_update`, `DROP TRIGGER count_quarantine_delete`,
		`DROP TRIGGER count_job_insert`, `DROP TRIGGER count_job_state`, `DROP TRIGGER count_job_delete`,
		`DROP TABLE counters`, `DROP TABLE hourly`, `DROP INDEX events_source_type`,
		`DROP INDEX jobs_dead_id`, `DROP INDEX jobs_dead_event`, // and schema 13's
		`DROP TABLE minutely`, `PRAGMA user_version = 11`, // and 14's
	)

	s = openFile(t, path, c)
	defer s.Close()
	o.s = s
	check := func(when string) {
		t.Helper()
		st, err := s.Stats(ctx, []string{"stripe", "sendgrid"}, []string{"stripe/app", "stripe/audit", "sendgrid/app"})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]hookwarden.SourceStats{
			// evt_old, evt_0..4; copies: evt_old's, evt_1's, evt_2's (divergent).
			"stripe": {Source: "stripe", Accepted: 6, Duplicates: 3, Divergent: 1, Quarantined: 2},
			// sg1, sg2; copies: sg2 in the second batch (a repeat inside
			// one batch is linked once).
			"sendgrid": {Source: "sendgrid", Accepted: 2, Duplicates: 1},
		}
		for _, ss := range st.Sources {
			w := want[ss.Source]
			ss.LastReceivedAt, w.LastReceivedAt = time.Time{}, time.Time{}
			if ss != w {
				t.Errorf("%s: %s: %+v, want %+v", when, ss.Source, ss, w)
			}
		}
		wantDst := map[string][3]int{"stripe/app": {3, 2, 1}, "stripe/audit": {4, 1, 0}, "sendgrid/app": {2, 0, 0}}
		for _, d := range st.Destinations {
			if got := [3]int{d.Pending, d.Delivered, d.Dead}; got != wantDst[d.Destination] {
				t.Errorf("%s: %s pending, delivered, dead = %v, want %v", when, d.Destination, got, wantDst[d.Destination])
			}
		}
		hours, err := s.Hourly(ctx, []string{"stripe"}, c.Now().Add(-24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var acc, dup int
		for _, h := range hours["stripe"] {
			acc, dup = acc+h.Accepted, dup+h.Duplicates
		}
		if acc != 5 || dup != 3 || len(hours["stripe"]) < 2 {
			t.Errorf("%s: hourly of stripe over the last day: %+v, want 5 accepted, 3 duplicates over several hours", when, hours["stripe"])
		}
	}
	check("after the upgrade")
	if n := count(t, s, `SELECT count(*) FROM counters`); n == 0 {
		t.Fatal("no counters after the upgrade")
	}
	o.finish("stripe/app", "evt_3", hookwarden.Delivered)
	o.record("stripe", "evt_3", `{"i":3}`, "stripe/app")
	st, err := s.Stats(ctx, []string{"stripe"}, []string{"stripe/app"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Sources[0].Duplicates != 4 || st.Destinations[0].Delivered != 3 || st.Destinations[0].Pending != 2 {
		t.Errorf("counting on after the upgrade: %+v %+v", st.Sources[0], st.Destinations[0])
	}
}

// TestOperatorReadPlans: every query behind stats, /api/stats (hourly), the
// dashboard (recent counts, outbox), /metrics (OutboxStats), the filtered
// event listings and a prune pass's count of what it keeps reads small tables (counters, pruned_totals,
// hourly, quarantine), seeks an index, or scans a partial index that holds
// the backlog (pending or dead jobs) — never a scan of a table that grows
// with the history.
func TestOperatorReadPlans(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	for i := range 20 {
		r := receipt("stripe", fmt.Sprint("evt_", i), fmt.Sprintf(`{"i":%d}`, i), "stripe/app")
		if _, err := s.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	history := regexp.MustCompile(`\b(SCAN|SEARCH) (events|receipts|receipt_events|jobs|attempts|e|r|re|j|d)\b(.*)`)
	// A seek (an index with a key, or the min/max of one: "SEARCH t"
	// alone), or a partial index of the backlog.
	allowed := regexp.MustCompile(`USING (COVERING )?INDEX (jobs_dead|jobs_dead_id|jobs_dead_event|jobs_due|jobs_pending_age)\b|USING (INTEGER PRIMARY KEY|(COVERING )?INDEX \w+) \(|^SEARCH \w+$`)
	since := []string{"e.claimed_at >= ?", "e.id >= ?", "e.id < ?"}
	delivered := "NOT EXISTS (SELECT 1 FROM jobs WHERE event_ref = e.id AND state != 'delivered')"
	// Listings that walk their partial index in the page's order: no sort
	// of every letter before the first row.
	walked := map[string]bool{"list --status dead": true, "dead letters (the dashboard, dead list)": true,
		"dead letters of a source since": true}
	for _, c := range []struct {
		name, q string
		args    int
	}{
		{"stats: counters", statsCountersSQL, 0},
		{"stats: last request", lastReceivedSQL, 1},
		{"stats, outbox: oldest pending", oldestPendingSQL, 1},
		{"outbox: counters", outboxCountersSQL, 0},
		{"hourly", hourlySQL, 2},
		{"recent: whole hours", windowHoursSQL, 2},
		{"recent: minutes of the first hour", windowMinutesSQL, 3},
		{"list --since", firstRefSinceSQL, 1},
		{"list --source/--type: one pair", pairListSQL(since), 6},
		{"list --source/--type --status delivered: one pair", pairListSQL(append(since, delivered)), 6},
		{"list --status dead", jobsListSQL(hookwarden.StatusDead, []string{"e.source = ?", "e.event_type = ?"}), 3},
		{"list --status pending --since", jobsListSQL(hookwarden.StatusPending, since), 4},
		{"list: first pair of a source", firstPairOfSourceSQL, 2},
		{"list: next pair of a source", nextPairOfSourceSQL, 2},
		{"list: the sources", sourcesSQL, 0},
		{"prune: held events and requests", countHeldSQL, 1},
		{"prune --dry-run: held events and requests", countHeldDrySQL, 1},
		{"dead letters (the dashboard, dead list)", deadListSQL([]string{"j.state = 'dead'", "j.id < ?"}), 2},
		{"dead letters of a source since", deadListSQL([]string{"j.state = 'dead'", "e.source = ?", "j.finished_at >= ?"}), 3},
	} {
		args := make([]any, c.args)
		for i := range args {
			args[i] = "x"
		}
		plan := queryPlan(t, s, c.q, args...)
		for _, line := range plan {
			if m := history.FindStringSubmatch(line); m != nil && !allowed.MatchString(line) {
				t.Errorf("%s reads a table that grows with the history: %q\nplan: %q", c.name, line, plan)
			}
			if walked[c.name] && strings.Contains(line, "TEMP B-TREE FOR ORDER BY") {
				t.Errorf("%s sorts every dead letter before its page: %q\nplan: %q", c.name, line, plan)
			}
		}
	}
}

// TestRequestGapsJumpsAsRowsSay: the two short ways of finding silences
// (a row an hour of request_hours, and the jumping walk on the receipts)
// find the same gaps as reading every request (LAG), on irregular traffic
// with bursts, quarantined requests, exact-limit gaps and long silences,
// for an expect_within of an hour and of more.
func TestRequestGapsJumpsAsRowsSay(t *testing.T) {
	c := newTestClock()
	o := &ops{t: t, s: MustOpen(t, Options{Now: c.Now}), clock: c, ctx: context.Background()}
	rng := rand.New(rand.NewPCG(18, 18))
	for i := range 400 {
		// Exactly expect_within is no silence; a second more is (LAG's
		// julianday arithmetic cannot tell microseconds apart).
		steps := []time.Duration{time.Second, 10 * time.Minute, 59 * time.Minute, time.Hour, time.Hour + time.Second,
			90 * time.Minute, 90*time.Minute + time.Second, 2 * time.Hour, 3 * time.Hour}
		c.Add(steps[rng.IntN(len(steps))])
		switch rng.IntN(8) {
		case 0:
			o.record("stripe", "", "{}") // no id: quarantined, a request all the same
		case 1:
			o.record("other", fmt.Sprint("o_", i), "{}") // another source's traffic in between
		default:
			o.record("stripe", fmt.Sprint("evt_", i), "{}")
		}
		if rng.IntN(5) == 0 {
			o.record("stripe", fmt.Sprint("evt_", i), "{}") // a duplicate at the same time
		}
	}
	var firstAt string
	if err := o.s.rdb.QueryRow(`SELECT min(received_at) FROM receipts WHERE source = 'stripe'`).Scan(&firstAt); err != nil {
		t.Fatal(err)
	}
	firstReq, err := parseTime(firstAt)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []time.Duration{time.Hour, 90 * time.Minute, 2 * time.Hour} {
		p := hookwarden.SourcePolicy{Name: "stripe", ExpectWithin: e}
		collect := func(way string) string {
			var out []string
			add := func(a, b time.Time, _ bool) {
				if b.Sub(a) > p.ExpectWithin { // as silences' add
					out = append(out, a.Format(time.RFC3339Nano)+"→"+b.Format(time.RFC3339Nano))
				}
			}
			tx, err := o.s.rdb.BeginTx(o.ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var first, last time.Time
			switch way {
			case "requestGaps":
				first, last, err = o.s.requestGaps(o.ctx, p, "", c.Now(), add)
			case "walk":
				first = firstReq
				last, err = requestGapsWalk(o.ctx, tx, p, first, add)
			case "by hour":
				first = firstReq
				var ok bool
				last, ok, err = requestGapsByHour(o.ctx, tx, p, first, add)
				if !ok {
					t.Errorf("expect_within %v: request_hours does not tell the first request's hour", e)
				}
			case "by row":
				first, last, err = o.s.requestGapsByRow(o.ctx, tx, p, "", add)
			}
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(first, last, out)
		}
		rows := collect("by row")
		for _, way := range []string{"requestGaps", "walk", "by hour"} {
			if got := collect(way); got != rows {
				t.Errorf("expect_within %v, %s:\n%s\nreading every request:\n%s", e, way, got, rows)
			}
		}
		if !strings.Contains(rows, "→") {
			t.Fatalf("expect_within %v: no gap at all: the traffic does not test anything", e)
		}
	}
}

// TestDestinationCountsSkipTheDueBacklog: GET /api/destinations' counts
// read the pending count from the counters and the leases in flight on a
// range of jobs_due after now, not the destination's whole backlog (which
// the plan test above allows any listing of the backlog).
func TestDestinationCountsSkipTheDueBacklog(t *testing.T) {
	plan := queryPlan(t, MustOpen(t, Options{}), destinationCountsSQL, "x", "x")
	want := []string{"SEARCH counters USING PRIMARY KEY (name=? AND kind=?)", "SEARCH jobs USING INDEX jobs_due (destination=? AND next_at>?)"}
	for _, w := range want {
		if !slices.Contains(plan, w) {
			t.Errorf("plan %q lacks %q", plan, w)
		}
	}
}

// TestMigration14CountsRecentMinutes: a file of schema 13 gets the counts
// per minute of its last 26 hours (by the wall clock, as the migration
// reads it) when 0014 runs: the recent windows then count what came before
// the upgrade, and nothing older is kept.
func TestMigration14CountsRecentMinutes(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Minute).Add(30 * time.Second)
	c := &testClock{t: now.Add(-30 * time.Hour)}
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	s := openFile(t, path, c)
	o := &ops{t: t, s: s, clock: c, ctx: ctx}
	o.record("stripe", "evt_30h", `{"n":0}`) // older than the minutes kept
	c.Add(6*time.Hour + 20*time.Minute)      // 23 h 40 min before now
	o.record("stripe", "evt_day", `{"n":1}`)
	o.record("stripe", "evt_day", `{"n":1}`)
	o.recordBatch("sendgrid", "sendgrid/app", "sg1", "sg2")
	c.Add(23*time.Hour + 10*time.Minute) // 30 min before now
	o.recordBatch("sendgrid", "sendgrid/app", "sg2", "sg3")
	o.record("stripe", "evt_hour", `{"n":2}`)
	s.Close()

	// Schema 13's file: no minutely (0014 writes the counting triggers
	// anew).
	execRaw(t, path, schema14(t)...)
	execRaw(t, path, `DROP TABLE minutely`, `PRAGMA user_version = 13`)

	c.Add(30 * time.Minute)
	s = openFile(t, path, c)
	defer s.Close()
	var minutes, old int
	if err := s.DB().QueryRow(`SELECT count(*), count(*) FILTER (WHERE minute < ?) FROM minutely`,
		minuteOf(now.Add(-26*time.Hour))).Scan(&minutes, &old); err != nil || minutes == 0 || old != 0 {
		t.Fatalf("after 0014: %d minute rows, %d older than 26 h (%v); want the recent ones only", minutes, old, err)
	}
	got, err := s.RecentCounts(ctx, []string{"stripe", "sendgrid"}, now.Add(-time.Hour), now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]hookwarden.WindowCounts{
		"stripe":   {{Accepted: 1}, {Accepted: 2, Duplicates: 1}},
		"sendgrid": {{Accepted: 1, Duplicates: 1}, {Accepted: 3, Duplicates: 1}},
	}
	for src, w := range want {
		if got[src] != w {
			t.Errorf("%s after 0014: %+v, want %+v", src, got[src], w)
		}
	}

	// Three hours on, a pass (no retention set) deletes the minutes of
	// evt_day and the first batch, 26 h 40 min old, and keeps the others.
	c.Add(3 * time.Hour)
	if _, err := s.Prune(ctx, hookwarden.PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := s.DB().Query(`SELECT source || ' ' || minute FROM minutely ORDER BY minute, source`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var m string
		rows.Scan(&m)
		left = append(left, m)
	}
	rows.Close()
	if want := []string{"sendgrid " + minuteOf(now.Add(-30*time.Minute)), "stripe " + minuteOf(now.Add(-30*time.Minute))}; !slices.Equal(left, want) {
		t.Errorf("minutes after a pass 3 h on: %q, want %q", left, want)
	}
}

// queryPlan is the detail column of EXPLAIN QUERY PLAN q, one line a step.
func queryPlan(t *testing.T, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// openFile opens the store at path on the clock c; the caller closes it
// (the upgrade tests close it to take the file back a schema).
func openFile(t *testing.T, path string, c *testClock) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fileOps opens a new file for an upgrade test, which closes it, takes
// it back to an older schema and opens it again (openFile).
func fileOps(t *testing.T, c *testClock) (*ops, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hw.db")
	return &ops{t: t, s: openFile(t, path, c), clock: c, ctx: context.Background()}, path
}

// execRaw runs qs on the file at path through a connection of its own, as
// an older build would have left it: the upgrade tests take a file back.
func execRaw(t *testing.T, path string, qs ...string) {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range qs {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// schema14 turns a file of this build back into schema 14's layout, for the
// tests of older migrations: events with its unique claim and the
// counting triggers as 0012 and 0014 left them (their shipped text), no
// claim levels, no kept claims filter.
func schema14(t *testing.T) []string {
	return []string{
		`DROP TABLE refusal_hours`,                                                 // schema 23's
		`DROP TABLE seq_ranges`, `DROP TABLE seq_epochs`, `DROP TABLE late_events`, // schema 22's
		`DROP TABLE unavailable_minutes`,                        // schema 21's
		`ALTER TABLE events DROP COLUMN derived`,                // schema 20's
		`DROP TABLE claims_filter_parts`,                        // schema 19's
		`DROP TRIGGER request_hour`, `DROP TABLE request_hours`, // schema 18's
		`DROP TABLE claims_filter`, // schema 17's
		`DROP VIEW claim_refs`, `DROP TABLE claims`, `DROP TABLE claims_log`, `DROP TABLE claim_levels`, `DROP TABLE claim_fold`,
		`CREATE TABLE events_old (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    claimed_at  TEXT NOT NULL,
    body_sha256 BLOB NOT NULL,
    body        BLOB,
    retired_pruned_at INTEGER, receipts INTEGER, jobs INTEGER, attempts INTEGER,
    retired_last_received_at INTEGER, retired_delivered_at INTEGER,
    pruned_at TEXT, last_received_at TEXT, delivered_at TEXT,
    UNIQUE (source, event_id)
) STRICT`,
		`INSERT INTO events_old SELECT * FROM events`,
		`DROP TABLE events`,
		`ALTER TABLE events_old RENAME TO events`,
		`CREATE INDEX events_source_type ON events (source, event_type)`,
		shippedTrigger(t, "0014_minutely.sql", "count_event_insert"),
		shippedTrigger(t, "0012_counters.sql", "count_event_delete"),
		`PRAGMA user_version = 14`,
	}
}

// shippedTrigger is the CREATE TRIGGER statement of name in a shipped
// migration.
func shippedTrigger(t *testing.T, file, name string) string {
	t.Helper()
	b, err := migrationFS.ReadFile("migrations/" + file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "CREATE TRIGGER "+name+" ")
	body, _, ok2 := strings.Cut(rest, "\nEND;")
	if !ok || !ok2 {
		t.Fatalf("%s has no trigger %s", file, name)
	}
	return "CREATE TRIGGER " + name + " " + body + "\nEND"
}

// TestMigration18FillsRequestHours: a file of schema 17 gets the first and
// last request of each source and hour from its receipts when 0018 runs,
// and gaps reads the same silences from them as a read-only open of the
// old file finds by walking the receipts.
func TestMigration18FillsRequestHours(t *testing.T) {
	c := newTestClock()
	o, path := fileOps(t, c)
	s, ctx := o.s, o.ctx
	for i, step := range []time.Duration{0, time.Minute, 3 * time.Hour, 20 * time.Minute, 61 * time.Minute, 5 * time.Hour} {
		c.Add(step)
		o.record("stripe", fmt.Sprint("evt_", i), "{}")
		if i == 2 {
			o.record("stripe", "", `{"no":"id"}`) // quarantined
			o.record("stripe", fmt.Sprint("evt_", i), "{}")
		}
	}
	c.Add(2 * time.Hour)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	schema18Filter(t, path) // schema 19's
	execRaw(t, path, `ALTER TABLE events DROP COLUMN derived`, `DROP TRIGGER request_hour`, `DROP TABLE request_hours`, `PRAGMA user_version = 17`)

	policy := hookwarden.GapOptions{Sources: []hookwarden.SourcePolicy{{Name: "stripe", RetryHorizon: 4 * time.Hour, ExpectWithin: time.Hour}}}
	silences := func(s *Store) string {
		rep, err := s.Gaps(ctx, policy)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sl := range rep.Silences {
			out = append(out, fmt.Sprintf("%s-%s open=%v", sl.Start.Format(time.TimeOnly), sl.End.Format(time.TimeOnly), sl.Open))
		}
		return fmt.Sprint(out)
	}
	old, err := Open(ctx, path, Options{Now: c.Now, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	walked := silences(old)
	old.Close()
	if want := "[12:01:00-15:01:00 open=false 15:21:00-16:22:00 open=false 16:22:00-21:22:00 open=false 21:22:00-00:00:00 open=true]"; walked != want {
		t.Errorf("schema 17, read-only: silences %s, want %s", walked, want)
	}

	s = openFile(t, path, c)
	defer s.Close()
	o.s = s
	if n := o.count(`SELECT count(*) FROM (
		SELECT source, substr(received_at, 1, 13), min(received_at), max(received_at) FROM receipts GROUP BY 1, 2
		EXCEPT SELECT source, hour, first_at, last_at FROM request_hours)`); n != 0 {
		t.Errorf("%d hours of receipts missing from request_hours after the upgrade", n)
	}
	if n := o.count(`SELECT count(*) FROM request_hours`); n != 4 {
		t.Errorf("request_hours holds %d hours, want 4", n)
	}
	if got := silences(s); got != walked {
		t.Errorf("after the upgrade: silences %s, want %s", got, walked)
	}
	o.record("stripe", "evt_late", "{}") // and the trigger counts from there on
	if n := o.count(`SELECT count(*) FROM request_hours`); n != 5 {
		t.Errorf("request_hours holds %d hours after a new request, want 5", n)
	}
}
