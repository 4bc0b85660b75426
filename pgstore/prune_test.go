package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

const day = 24 * time.Hour

func (o *ops) prune(opt hookwarden.PruneOptions) hookwarden.PruneResult {
	o.t.Helper()
	res, err := o.s.Prune(o.ctx, opt)
	if err != nil {
		o.t.Fatalf("prune: %v", err)
	}
	return res
}

// held records a request of std without an event id, received now.
func (o *ops) held(body string) hookwarden.RecordResult {
	o.t.Helper()
	r := receipt("std", "", body)
	r.ReceivedAt = o.clock.Now()
	res := o.record(r)
	if res.Outcome != hookwarden.Quarantined {
		o.t.Fatalf("record %s: %+v, want quarantined", body, res)
	}
	return res
}

// totals is pruned_totals as "name/kind=n" lines, times left out.
func (o *ops) totals() string {
	o.t.Helper()
	rows, err := o.s.Pool().Query(o.ctx, `SELECT name, kind, n FROM pruned_totals WHERE kind NOT IN ('last_received', 'last_accepted') ORDER BY name || '/' || kind COLLATE "C"`)
	if err != nil {
		o.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, kind string
		var n int
		if err := rows.Scan(&name, &kind, &n); err != nil {
			o.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s/%s=%d", name, kind, n))
	}
	return fmt.Sprint(out)
}

// rowCounts counts the rows of every table retention touches.
func (o *ops) rowCounts() string {
	o.t.Helper()
	var out []string
	for _, table := range []string{"events", "receipts", "receipt_events", "jobs", "attempts", "quarantine", "body_keys",
		"seen_tokens", "prune_held", "pruned_totals"} {
		out = append(out, fmt.Sprintf("%s=%d", table, o.count(`SELECT count(*) FROM `+table)))
	}
	return fmt.Sprint(out)
}

// TestPrunePayloads: an event delivered everywhere longer ago than the
// cutoff is folded into its claim (summary kept, receipts, jobs and
// attempts gone, counts in pruned_totals); dead, pending and held ones
// keep everything and are counted; a dry run changes nothing; a late
// duplicate of a folded event is folded in turn on a later pass.
func TestPrunePayloads(t *testing.T) {
	o := setupOps(t)
	o.add("std", "A", `{"a":1}`, "std/a")
	o.deliver("std/a")
	o.add("std", "B", `{"b":1}`, "std/b")
	o.kill("std/b")
	o.add("std", "C", `{"c":1}`, "std/c") // stays pending
	o.held(`{"no":"id"}`)
	o.clock.Add(35 * day)
	ret := hookwarden.Retention{Payloads: 30 * day}
	before := o.rowCounts()

	dry := o.prune(hookwarden.PruneOptions{Retention: ret, DryRun: true, Audit: cli()})
	if dry.PayloadsPruned != 1 || dry.PayloadBytes != int64(len(`{"a":1}`)) || dry.HeldDead != 1 || dry.HeldPending != 1 ||
		dry.HeldQuarantined != 1 || !dry.PayloadCutoff.Equal(o.clock.Now().Add(-30*day)) || dry.AuditID != 0 {
		t.Fatalf("dry run: %+v, want A's 7 bytes, B, C and the held request kept, no audit entry", dry)
	}
	if got := o.rowCounts(); got != before {
		t.Fatalf("the dry run changed rows:\n%s\n%s", before, got)
	}

	res := o.prune(hookwarden.PruneOptions{Retention: ret, BatchSize: 1, Audit: cli()})
	if res.PayloadsPruned != 1 || res.PayloadBytes != 7 || res.PayloadReceipts != 1 || res.PayloadJobs != 1 || res.PayloadAttempts != 1 ||
		res.HeldDead != 1 || res.HeldPending != 1 || res.HeldQuarantined != 1 || res.AuditID == 0 {
		t.Fatalf("prune: %+v", res)
	}
	var receipts, jobs, attempts int
	var pruned, delivered, last *time.Time
	var sum []byte
	if err := o.s.Pool().QueryRow(o.ctx, `SELECT receipts, jobs, attempts, pruned_at, delivered_at, last_received_at, body_sha256
		FROM events WHERE event_id = 'A'`).Scan(&receipts, &jobs, &attempts, &pruned, &delivered, &last, &sum); err != nil {
		t.Fatal(err)
	}
	if receipts != 1 || jobs != 1 || attempts != 1 || pruned == nil || !pruned.Equal(o.clock.Now()) || delivered == nil ||
		!delivered.Equal(t0) || last == nil || !last.Equal(t0) || len(sum) != 0 {
		t.Fatalf("A's summary: receipts %d jobs %d attempts %d pruned %v delivered %v last %v hash %x",
			receipts, jobs, attempts, pruned, delivered, last, sum)
	}
	for table, want := range map[string]int{"receipts": 0, "jobs": 0} {
		if n := o.count(`SELECT count(*) FROM ` + table + ` WHERE event_ref = (SELECT id FROM events WHERE event_id = 'A')`); n != want {
			t.Errorf("A's %s: %d left", table, n)
		}
	}
	if n := o.count(`SELECT count(*) FROM receipts WHERE event_ref IN (SELECT id FROM events WHERE event_id IN ('B', 'C')) AND body IS NOT NULL`); n != 2 {
		t.Errorf("B and C kept %d receipts with bodies, want 2", n)
	}
	if got := o.totals(); got != "[std/a/delivered=1]" {
		t.Errorf("pruned totals %s", got)
	}
	if n := o.count(`SELECT count(*) FROM prune_held`); n != 2 {
		t.Errorf("%d events held for the next pass, want B and C", n)
	}
	if n := o.count(`SELECT count(*) FROM audit WHERE id = $1 AND action = 'prune' AND result LIKE '%"payloads_pruned":1%'`, res.AuditID); n != 1 {
		t.Errorf("audit entry %d without its result", res.AuditID)
	}
	if r := o.replay(hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"A"}}, hookwarden.ReplayOptions{}); skipsOf(r) != "[A:payload_pruned]" ||
		!r.Skipped[0].PrunedAt.Equal(o.clock.Now()) {
		t.Fatalf("replay of a folded event: %+v", r)
	}
	if again := o.prune(hookwarden.PruneOptions{Retention: ret}); again.PayloadsPruned != 0 || again.PayloadReceipts != 0 {
		t.Errorf("second prune: %+v, want nothing more", again)
	}

	// A late copy of A: a duplicate whose body is kept (the claim's hash
	// is gone), folded into A once it is past the cutoff too.
	late := receipt("std", "A", `{"a":1}`, "std/a")
	late.ReceivedAt = o.clock.Now()
	if r := o.record(late); r.Outcome != hookwarden.Duplicate {
		t.Fatalf("late copy: %+v", r)
	}
	o.clock.Add(31 * day)
	res = o.prune(hookwarden.PruneOptions{Retention: ret})
	if res.PayloadsPruned != 0 || res.PayloadReceipts != 1 || res.PayloadBytes != 7 {
		t.Fatalf("prune of the late copy: %+v", res)
	}
	if n := o.count(`SELECT receipts FROM events WHERE event_id = 'A'`); n != 2 {
		t.Errorf("A counts %d receipts, want 2", n)
	}
	if got := o.totals(); got != "[std/a/delivered=1 std/duplicate=1]" {
		t.Errorf("pruned totals %s", got)
	}
}

// TestPruneClaims: a claim finished longer ago than the claims cutoff goes
// with its receipts, jobs, attempts and body key; dead and pending events
// stay; the counts go to pruned_totals; a later copy is a new event.
func TestPruneClaims(t *testing.T) {
	o := setupOps(t)
	o.add("std", "A", `{"a":1}`, "std/a")
	dup := receipt("std", "A", `{"a":1}`, "std/a")
	if r := o.record(dup); r.Outcome != hookwarden.Duplicate {
		t.Fatal(r)
	}
	o.deliver("std/a")
	k := keyed("K", `{"k":1}`)
	k.Events[0].Destinations = nil
	o.record(k)
	o.record(batch(element("s1"), element("s2")))
	o.deliver("sg/app")
	o.add("std", "B", `{"b":1}`, "std/b")
	o.kill("std/b")
	o.add("std", "C", `{"c":1}`, "std/c")
	o.clock.Add(100 * day)
	ret := hookwarden.Retention{Claims: 90 * day}
	before := o.rowCounts()

	dry := o.prune(hookwarden.PruneOptions{Retention: ret, DryRun: true})
	if dry.EventsDeleted != 4 || dry.BodyKeysDeleted != 1 {
		t.Fatalf("dry run: %+v, want A, K, s1 and s2 and K's body key", dry)
	}
	if got := o.rowCounts(); got != before {
		t.Fatalf("the dry run changed rows:\n%s\n%s", before, got)
	}
	res := o.prune(hookwarden.PruneOptions{Retention: ret, BatchSize: 1})
	if res.EventsDeleted != 4 || res.BodyKeysDeleted != 1 || res.ReceiptsDeleted != 4 || res.JobsDeleted != 3 || res.AttemptsDeleted != 3 {
		t.Fatalf("prune: %+v, want 4 claims with 4 receipts (A twice, K, the batch), 3 jobs and attempts, 1 body key", res)
	}
	var left []string
	rows, err := o.s.Pool().Query(o.ctx, `SELECT event_id FROM events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		left = append(left, id)
	}
	rows.Close()
	if fmt.Sprint(left) != "[B C]" {
		t.Fatalf("claims left %v, want the dead and the pending one", left)
	}
	if n := o.count(`SELECT count(*) FROM receipts`) + o.count(`SELECT count(*) FROM receipt_events`); n != 2 {
		t.Fatalf("%d receipts and links left, want B's and C's", n)
	}
	if got := o.totals(); got != "[gh/accepted=1 sg/accepted=2 sg/app/delivered=2 std/a/delivered=1 std/accepted=1 std/duplicate=1]" {
		t.Errorf("pruned totals %s", got)
	}
	if r := o.record(receipt("std", "A", `{"a":1}`, "std/a")); r.Outcome != hookwarden.Accepted || r.Events[0].Jobs != 1 {
		t.Fatalf("a copy after its claim went: %+v, want accepted again", r)
	}
	if r := o.record(keyed("K2", `{"k":1}`)); r.Outcome != hookwarden.Accepted {
		t.Fatalf("K's body under a new id after its key went: %+v, want accepted", r)
	}
}

// TestPruneQuarantineAndTokens: held requests go once their last copy is
// older than the cutoff, released ones that long after their release,
// their copies counted in pruned_totals; seen tokens go once expired, and
// never before.
func TestPruneQuarantineAndTokens(t *testing.T) {
	o := setupOps(t)
	old := o.held(`{"old":1}`)
	o.held(`{"old":1}`) // a repeat
	tok := func(id, token string, expires time.Time) {
		r := receipt("mg", id, `{"`+id+`":1}`, "mg/app")
		r.ReceivedAt = o.clock.Now()
		r.Token = &hookwarden.Token{SHA256: sha256.Sum256([]byte(token)), Expires: expires}
		o.record(r)
	}
	tok("t1", "expired", o.clock.Now().Add(10*time.Minute))
	o.clock.Add(40 * day)
	tok("t2", "live", o.clock.Now().Add(10*time.Minute))
	recent := o.held(`{"new":1}`)
	ret := hookwarden.Retention{Quarantine: 30 * day}

	if dry := o.prune(hookwarden.PruneOptions{Retention: ret, DryRun: true}); dry.QuarantineDeleted != 1 || dry.TokensDeleted != 1 {
		t.Fatalf("dry run: %+v", dry)
	}
	res := o.prune(hookwarden.PruneOptions{Retention: ret})
	if res.QuarantineDeleted != 1 || res.TokensDeleted != 1 {
		t.Fatalf("prune: %+v, want the old request and the expired token deleted", res)
	}
	if n := o.count(`SELECT count(*) FROM receipts WHERE id = $1`, old.ReceiptID); n != 0 {
		t.Errorf("the old held receipt is still there")
	}
	if n := o.count(`SELECT count(*) FROM seen_tokens WHERE token_sha256 = $1`, sum("live")); n != 1 {
		t.Errorf("the live token went")
	}
	if got := o.totals(); got != "[std/quarantined=2]" {
		t.Errorf("pruned totals %s, want the old request's 2 copies", got)
	}
	if _, err := o.s.ReleaseQuarantined(o.ctx, hookwarden.Release{ReceiptID: recent.ReceiptID, EventID: "r-1"}); err != nil {
		t.Fatal(err)
	}
	o.clock.Add(31 * day)
	if res := o.prune(hookwarden.PruneOptions{Retention: ret}); res.QuarantineDeleted != 1 {
		t.Fatalf("prune after release: %+v, want the released request deleted", res)
	}
	if n := o.count(`SELECT count(*) FROM quarantine`); n != 0 {
		t.Fatalf("%d held requests left", n)
	}
	if n := o.count(`SELECT count(*) FROM receipts r JOIN events e ON e.id = r.event_ref WHERE e.event_id = 'r-1' AND r.body = '{"new":1}'`); n != 1 {
		t.Fatal("the released event lost its receipt")
	}
	if got := o.totals(); got != "[std/quarantined=3]" {
		t.Errorf("pruned totals %s", got)
	}
}

// TestPruneConcurrentInstances: two instances running the same pass at
// once, in small batches, neither deadlock nor count anything twice: the
// events folded or deleted add up to exactly what there was, and so do
// the totals kept.
func TestPruneConcurrentInstances(t *testing.T) {
	o := setupOps(t)
	const n = 120
	for i := range n {
		o.add("std", fmt.Sprint("e", i), `{"x":1}`, "std/app")
		if i%3 == 0 {
			o.record(receipt("std", fmt.Sprint("e", i), `{"x":1}`, "std/app")) // a duplicate
		}
	}
	o.deliver("std/app")
	for i := range 20 {
		o.held(fmt.Sprintf(`{"held":%d}`, i))
	}
	a, b := o.instance(), o.instance()
	run := func(ret hookwarden.Retention) [2]hookwarden.PruneResult {
		var res [2]hookwarden.PruneResult
		var errs [2]error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range []*Store{a, b} {
			wg.Go(func() {
				<-start
				res[i], errs[i] = s.Prune(o.ctx, hookwarden.PruneOptions{Retention: ret, BatchSize: 7, Pause: time.Microsecond})
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatal(err)
		}
		return res
	}

	o.clock.Add(40 * day)
	res := run(hookwarden.Retention{Payloads: 30 * day, Quarantine: 30 * day})
	if got := res[0].PayloadsPruned + res[1].PayloadsPruned; got != n {
		t.Fatalf("folded %d + %d events, want %d exactly", res[0].PayloadsPruned, res[1].PayloadsPruned, n)
	}
	if got := res[0].QuarantineDeleted + res[1].QuarantineDeleted; got != 20 {
		t.Fatalf("deleted %d + %d held requests, want 20", res[0].QuarantineDeleted, res[1].QuarantineDeleted)
	}
	if got := res[0].PayloadReceipts + res[1].PayloadReceipts; got != n+n/3 {
		t.Fatalf("deleted %d receipts, want %d", got, n+n/3)
	}
	want := fmt.Sprintf("[std/app/delivered=%d std/duplicate=%d std/quarantined=20]", n, n/3)
	if got := o.totals(); got != want {
		t.Fatalf("pruned totals %s, want %s", got, want)
	}

	o.clock.Add(60 * day)
	res = run(hookwarden.Retention{Claims: 90 * day})
	if got := res[0].EventsDeleted + res[1].EventsDeleted; got != n {
		t.Fatalf("deleted %d + %d claims, want %d exactly", res[0].EventsDeleted, res[1].EventsDeleted, n)
	}
	want = fmt.Sprintf("[std/accepted=%d std/app/delivered=%d std/duplicate=%d std/quarantined=20]", n, n, n/3)
	if got := o.totals(); got != want {
		t.Fatalf("pruned totals %s, want %s", got, want)
	}
}

// TestPruneLeavesReplayedEvent: a replay that resets a delivered job while
// a prune batch is checking the same event is ordered by the job's row
// lock: the event is either pruned (and the replay finds nothing) or kept
// pending; never pruned with a replay reported done.
func TestPruneLeavesReplayedEvent(t *testing.T) {
	o := setupOps(t)
	o.add("std", "A", `{"a":1}`, "std/a")
	o.deliver("std/a")
	o.clock.Add(40 * day)
	other := o.instance()
	var replayed hookwarden.ReplayResult
	var pruneErr error
	done := make(chan struct{})
	o.s.testReplayChecked = func() {
		o.s.testReplayChecked = nil
		// The replay holds A's job; the prune must wait for it, then see
		// the job pending and keep A.
		go func() {
			defer close(done)
			_, pruneErr = other.Prune(o.ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: 30 * day}})
		}()
		waitFor(o.t, func() bool {
			return o.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
		})
	}
	replayed = o.replay(hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"A"}}, hookwarden.ReplayOptions{})
	<-done
	if pruneErr != nil {
		t.Fatal(pruneErr)
	}
	j := o.job("std", "A", "std/a")
	if replayed.Replayed != 1 || j.State != "pending" {
		t.Fatalf("replay %+v, job %v: want it replayed and kept", replayed, j)
	}
	if n := o.count(`SELECT count(*) FROM events WHERE event_id = 'A' AND pruned_at IS NULL`); n != 1 {
		t.Fatal("A was folded under a replay")
	}
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sum(s string) []byte {
	b := sha256.Sum256([]byte(s))
	return b[:]
}

// statements records every statement a store runs, with its arguments.
type statementLog struct {
	mu   sync.Mutex
	list []traced
}

type traced struct {
	sql  string
	args []any
}

func (s *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	s.list = append(s.list, traced{d.SQL, d.Args})
	s.mu.Unlock()
	return ctx
}

func (s *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// reset forgets the statements logged so far.
func (s *statementLog) reset() {
	s.mu.Lock()
	s.list = nil
	s.mu.Unlock()
}

// sqls is the text of the statements logged since the last reset.
func (s *statementLog) sqls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.list))
	for i, st := range s.list {
		out[i] = st.sql
	}
	return out
}

// blocks runs each statement again under EXPLAIN (ANALYZE, BUFFERS), in a
// transaction rolled back, and adds up the shared buffers they touched:
// the pages a pass reads, whatever the clock and the cache say.
func (o *ops) blocks(list []traced) (total int, worst string) {
	o.t.Helper()
	most := -1
	for _, st := range list {
		switch strings.ToLower(strings.TrimSpace(st.sql)) {
		case "begin", "commit", "rollback":
			continue
		}
		tx, err := o.s.Pool().Begin(o.ctx)
		if err != nil {
			o.t.Fatal(err)
		}
		var out string
		err = tx.QueryRow(o.ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+st.sql, st.args...).Scan(&out)
		tx.Rollback(o.ctx)
		if err != nil {
			o.t.Fatalf("explain %s: %v", st.sql, err)
		}
		var plan []struct {
			Plan struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal([]byte(out), &plan); err != nil || len(plan) != 1 {
			o.t.Fatalf("explain %s: %v %s", st.sql, err, out)
		}
		n := plan[0].Plan.Hit + plan[0].Plan.Read
		total += n
		if n > most {
			most, worst = n, fmt.Sprintf("%d blocks: %s", n, st.sql)
		}
	}
	return total, worst
}

// idlePassBlocks builds a history of n events delivered 40 days ago (with
// their receipts, jobs and attempts), a small backlog that retention must
// keep (a dead letter, a pending event, a held request) and a few recent
// events, runs a pass that folds the history, and measures a second pass,
// which has nothing to do.
func idlePassBlocks(t *testing.T, n int) (blocks, statements int, worst string) {
	o := newOps(t)
	o.add("std", "dead", `{}`, "std/dead")
	o.kill("std/dead")
	o.add("std", "waiting", `{}`, "std/waiting")
	o.held(`{"held":1}`)
	o.clock.Add(40 * day)
	for _, q := range []string{
		`INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256)
			SELECT 'std', 'h' || g, 't', $1::timestamptz - interval '40 days' + g * interval '1 millisecond', sha256(g::text::bytea)
			FROM generate_series(1, $2::int) g`,
		`INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
			SELECT 'std', id, 'accepted', claimed_at, '127.0.0.1:1', 'Content-Type: application/json', convert_to('{"n":' || id || '}', 'UTF8'), ''::bytea
			FROM events WHERE event_id LIKE 'h%'`,
		`INSERT INTO jobs (event_ref, destination, state, attempts, next_at, created_at, finished_at)
			SELECT id, 'std/app', 'delivered', 1, claimed_at, claimed_at, claimed_at FROM events WHERE event_id LIKE 'h%'`,
		`INSERT INTO attempts (job_id, number, started_at, duration_us, status_code, verdict)
			SELECT id, 1, created_at, 1000, 200, 'delivered' FROM jobs WHERE destination = 'std/app'`,
	} {
		args := []any{o.clock.Now(), n}
		if !strings.Contains(q, "$1") {
			args = nil
		}
		if _, err := o.s.Pool().Exec(o.ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := range 3 {
		o.add("std", fmt.Sprint("recent", i), `{}`, "std/app")
	}
	// What retention keeps grows with the traffic too: live tokens and
	// recent held requests, a tenth of the history each.
	for _, q := range []string{
		`INSERT INTO seen_tokens (source, token_sha256, body_sha256, expires_at)
			SELECT 'mg', sha256(('t' || g)::bytea), sha256(g::text::bytea), $1::timestamptz + interval '10 minutes'
			FROM generate_series(1, $2::int / 10) g`,
		`INSERT INTO receipts (id, source, kind, received_at, remote_addr, headers, body, body_sha256, quarantine_reason)
			SELECT 1000000 + g, 'std', 'quarantined', $1::timestamptz, '127.0.0.1:1', '', '{}', sha256(('q' || g)::bytea), 'no id'
			FROM generate_series(1, $2::int / 10) g`,
		`INSERT INTO quarantine (source, body_sha256, receipt_id, reason, first_at, last_at, count, kind)
			SELECT 'std', sha256(('q' || g)::bytea), 1000000 + g, 'no id', $1::timestamptz, $1::timestamptz, 1, 'no_event_id'
			FROM generate_series(1, $2::int / 10) g`,
	} {
		if _, err := o.s.Pool().Exec(o.ctx, q, o.clock.Now(), n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	opt := hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: 30 * day, Claims: 90 * day, Quarantine: 60 * day},
		Pause: time.Microsecond}
	first := opt
	first.BatchSize = 1000
	if res := o.prune(first); res.PayloadsPruned != n || res.HeldDead != 1 || res.HeldPending != 1 || res.HeldQuarantined != 1 ||
		res.QuarantineDeleted != 0 || res.TokensDeleted != 0 {
		t.Fatalf("first pass: %+v, want the %d events folded and the backlog kept", res, n)
	}
	if _, err := o.s.Pool().Exec(o.ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	trace := &statementLog{}
	measured := open(t, o.url, Options{Now: o.clock.Now, tracer: trace})
	if res, err := measured.Prune(o.ctx, opt); err != nil || res.PayloadsPruned != 0 || res.EventsDeleted != 0 || res.HeldDead != 1 {
		t.Fatalf("idle pass: %+v %v", res, err)
	}
	blocks, worst = o.blocks(trace.list)
	return blocks, len(trace.list), worst
}

// TestPruneIdlePassCostFlat: a pass with nothing to do reads as many pages
// over a history of 10,000 folded events as over one of 1,000: every walk
// starts at its cursor or at the start of what is kept and stops at its
// first row, the held counts read the partial indexes of the backlog, and
// tokens and held requests are found by their expiry indexes.
func TestPruneIdlePassCostFlat(t *testing.T) {
	t.Parallel()
	small, _, _ := idlePassBlocks(t, 1000)
	large, statements, worst := idlePassBlocks(t, 10000)
	t.Logf("idle pass: %d pages over 1000 events, %d over 10000, in %d statements (most: %s)", small, large, statements, worst)
	// A deeper index costs a page per look-up; a scan of the history
	// would cost hundreds.
	if large > small+statements {
		t.Fatalf("idle pass over 10000 events read %d pages, over 1000 %d: its cost grows with the history (most: %s)",
			large, small, worst)
	}
}

// historyPassBlocks fills a store with FillHistory (n claims, a tenth with
// payloads, a dead letter per 1,000 of those), closes it (its connections'
// count rows are then a gone backend's), runs a first pass on a new store
// and measures a second one: neither has anything to do.
func historyPassBlocks(t *testing.T, n int) (blocks, statements int, worst string) {
	o := newOps(t)
	o.clock.Add(100 * day)
	fill := open(t, o.url, Options{Now: o.clock.Now})
	if err := fill.FillHistory(o.ctx, hookwarden.History{Claims: n, Payloads: n / 10, Body: 64}, nil); err != nil {
		t.Fatal(err)
	}
	fill.Close()
	opt := hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: 30 * day, Claims: 90 * day}}
	for range 2 {
		trace := &statementLog{}
		measured := open(t, o.url, Options{Now: o.clock.Now, tracer: trace})
		res, err := measured.Prune(o.ctx, opt)
		if err != nil || res.PayloadsPruned != 0 || res.EventsDeleted != 0 || res.HeldDead != 0 {
			t.Fatalf("a pass over the history: %+v %v, want nothing to do", res, err)
		}
		measured.Close()
		blocks, worst = o.blocks(trace.list)
		statements = len(trace.list)
	}
	return blocks, statements, worst
}

// TestPruneIdleHistoryPassFlat: a pass with nothing to do reads as many
// pages over the benchmark's history of 200,000 claims as over one of
// 10,000: the held counts read prune_held (not every dead letter's event)
// and the fold of the count rows finds the unfolded shards on their
// partial indexes (not by reading every hour's counts).
func TestPruneIdleHistoryPassFlat(t *testing.T) {
	t.Parallel()
	small, _, _ := historyPassBlocks(t, 10000)
	large, statements, worst := historyPassBlocks(t, 200000)
	t.Logf("idle pass: %d pages over 10,000 claims, %d over 200,000, in %d statements (most: %s)", small, large, statements, worst)
	if large > small+statements {
		t.Fatalf("idle pass over 200,000 claims read %d pages, over 10,000 %d: its cost grows with the history (most: %s)",
			large, small, worst)
	}
}

// TestDuplicateMeetsClaimsPrune: a copy of an old event whose claim the
// claims tier deletes between the copy's claim (a duplicate) and its
// receipt (which references the claim) is not a 503: Record runs again
// and the copy is a new event, as it would be a moment later.
func TestDuplicateMeetsClaimsPrune(t *testing.T) {
	o := setupOps(t)
	o.add("std", "A", `{"a":1}`, "std/a")
	o.deliver("std/a")
	o.clock.Add(100 * day)

	// A trigger holds every receipt insert until the test lets it go.
	const gate = 4242
	conn, err := pgx.ConnectConfig(o.ctx, o.s.Pool().Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(o.ctx)
	if _, err := conn.Exec(o.ctx, fmt.Sprintf(`CREATE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NEW; END $$;
		CREATE TRIGGER gate BEFORE INSERT ON receipts FOR EACH ROW EXECUTE FUNCTION gate();
		SELECT pg_advisory_lock(%d)`, gate, gate)); err != nil {
		t.Fatal(err)
	}
	copyOfA := receipt("std", "A", `{"a":1}`, "std/a")
	copyOfA.ReceivedAt = o.clock.Now()
	var res hookwarden.RecordResult
	var recErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, recErr = o.s.Record(o.ctx, copyOfA)
	}()
	// The copy found A claimed and waits at its receipt.
	waitFor(t, func() bool {
		return o.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'`) == 1
	})
	if pr := o.prune(hookwarden.PruneOptions{Retention: hookwarden.Retention{Claims: 90 * day}}); pr.EventsDeleted != 1 {
		t.Fatalf("prune: %+v, want A's claim deleted", pr)
	}
	if _, err := conn.Exec(o.ctx, fmt.Sprintf(`SELECT pg_advisory_unlock(%d)`, gate)); err != nil {
		t.Fatal(err)
	}
	<-done
	if recErr != nil || res.Outcome != hookwarden.Accepted || res.Events[0].Jobs != 1 {
		t.Fatalf("the copy: %+v %v, want accepted again (its claim went)", res, recErr)
	}
	if n := o.count(`SELECT count(*) FROM jobs j JOIN events e ON e.id = j.event_ref WHERE e.event_id = 'A' AND j.state = 'pending'`); n != 1 {
		t.Fatalf("A has %d pending jobs, want 1", n)
	}
}
