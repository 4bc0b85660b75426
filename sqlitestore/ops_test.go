package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testClock is an injected clock the tests move by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// ops bundles a store on a test clock with helpers to drive events through
// their life.
type ops struct {
	t     *testing.T
	s     *Store
	clock *testClock
	ctx   context.Context
}

func setupOps(t *testing.T) *ops {
	t.Helper()
	c := newTestClock()
	return &ops{t: t, s: MustOpen(t, Options{Now: c.Now}), clock: c, ctx: context.Background()}
}

// record records one event of source at the clock's time.
func (o *ops) record(source, id, body string, dests ...string) hookwarden.RecordResult {
	o.t.Helper()
	r := receipt(source, id, body, dests...)
	r.ReceivedAt = o.clock.Now()
	res, err := o.s.Record(o.ctx, r)
	if err != nil {
		o.t.Fatal(err)
	}
	return res
}

// recordBatch records a batch receipt carrying one element per id.
func (o *ops) recordBatch(source string, dest string, ids ...string) {
	o.t.Helper()
	r := receipt(source, "", `[batch]`)
	r.QuarantineReason = ""
	r.ReceivedAt = o.clock.Now()
	for _, id := range ids {
		b := []byte(fmt.Sprintf(`{"id":%q}`, id))
		r.Events = append(r.Events, hookwarden.Event{ID: id, Type: "batch.el", Body: b, BodySHA256: sha256.Sum256(b),
			Destinations: []string{dest}})
	}
	if _, err := o.s.Record(o.ctx, r); err != nil {
		o.t.Fatal(err)
	}
}

// finish leases every due job of dest and applies verdict to the one of
// event id (others are released as retries due now).
func (o *ops) finish(dest, id string, v hookwarden.Verdict) {
	o.t.Helper()
	jobs, err := o.s.Lease(o.ctx, dest, 1000, time.Minute)
	if err != nil {
		o.t.Fatal(err)
	}
	found := false
	for _, j := range jobs {
		a := hookwarden.Attempt{JobID: j.ID, Number: j.Attempt, StartedAt: o.clock.Now(), ExitCode: -1,
			Verdict: hookwarden.Retry, RetryAt: o.clock.Now(), Error: "not this one"}
		if j.EventID == id {
			found = true
			a.Verdict, a.StatusCode, a.Error = v, 200, ""
			if v == hookwarden.Dead {
				a.StatusCode, a.Error = 422, "unprocessable"
			}
		}
		if err := o.s.Finish(o.ctx, a); err != nil {
			o.t.Fatal(err)
		}
	}
	if !found {
		o.t.Fatalf("no due job of %s for %s", id, dest)
	}
}

func (o *ops) count(q string, args ...any) int {
	o.t.Helper()
	return count(o.t, o.s, q, args...)
}

func TestListAndShowEvents(t *testing.T) {
	o := setupOps(t)
	o.record("std", "e1", `{"n":1}`, "std/app", "std/ops")
	o.clock.Add(time.Minute)
	o.record("std", "e2", `{"n":2}`, "std/app")
	o.record("std", "e2", `{"n":2}`, "std/app")       // duplicate
	o.record("std", "e2", `{"n":2,"x":1}`, "std/app") // divergent
	o.clock.Add(time.Minute)
	o.record("std", "e3", `{"n":3}`, "std/app")
	o.record("gh", "g1", `{}`, "gh/app")
	o.record("std", "", `{"no":"id"}`) // quarantined
	o.finish("std/app", "e1", hookwarden.Delivered)
	o.finish("std/ops", "e1", hookwarden.Delivered)
	o.finish("std/app", "e2", hookwarden.Dead)

	ids := func(f hookwarden.EventFilter) []string {
		t.Helper()
		items, _, err := o.s.ListEvents(o.ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Source+"/"+it.EventID+"="+string(it.Status))
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    hookwarden.EventFilter
		want string
	}{
		{"all", hookwarden.EventFilter{}, "[gh/g1=pending std/e3=pending std/e2=dead std/e1=delivered]"},
		{"source", hookwarden.EventFilter{Source: "std"}, "[std/e3=pending std/e2=dead std/e1=delivered]"},
		{"dead", hookwarden.EventFilter{Status: hookwarden.StatusDead}, "[std/e2=dead]"},
		{"pending", hookwarden.EventFilter{Status: hookwarden.StatusPending}, "[gh/g1=pending std/e3=pending]"},
		{"delivered", hookwarden.EventFilter{Status: hookwarden.StatusDelivered}, "[std/e1=delivered]"},
		{"quarantined", hookwarden.EventFilter{Status: hookwarden.StatusQuarantined}, "[std/=quarantined]"},
		{"since", hookwarden.EventFilter{Since: o.clock.Now().Add(-30 * time.Second)}, "[gh/g1=pending std/e3=pending]"},
		{"type prefix", hookwarden.EventFilter{Type: "t.*"}, "[gh/g1=pending std/e3=pending std/e2=dead std/e1=delivered]"},
		{"type none", hookwarden.EventFilter{Type: "x.created"}, "[]"},
	} {
		if got := fmt.Sprint(ids(c.f)); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}

	// Pagination: pages of 3 then 1, no overlap.
	page1, next, err := o.s.ListEvents(o.ctx, hookwarden.EventFilter{Limit: 3})
	if err != nil || len(page1) != 3 || next == 0 {
		t.Fatalf("page 1: %d items, next %d, %v", len(page1), next, err)
	}
	page2, next2, err := o.s.ListEvents(o.ctx, hookwarden.EventFilter{Limit: 3, Cursor: next})
	if err != nil || len(page2) != 1 || next2 != 0 || page2[0].EventID != "e1" {
		t.Fatalf("page 2: %+v, next %d, %v", page2, next2, err)
	}

	d, err := o.s.ShowEvent(o.ctx, "std", "e2")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Body) != `{"n":2}` || d.ContentType != "application/json" {
		t.Errorf("body %q (%s), want the first copy's bytes", d.Body, d.ContentType)
	}
	if d.Receipts != 3 || len(d.ReceiptLog) != 3 || !d.Divergent {
		t.Errorf("receipts %d/%d divergent %v, want 3 and divergent", d.Receipts, len(d.ReceiptLog), d.Divergent)
	}
	if k := d.ReceiptLog[2]; k.Kind != "divergent" || string(k.Body) != `{"n":2,"x":1}` || k.Header.Get("Webhook-Id") != "e2" {
		t.Errorf("divergent receipt: %+v", k)
	}
	// Attempt 1 was a retry (the helper leased e2 while finishing e1), 2 the poison.
	if len(d.JobLog) != 1 || d.JobLog[0].State != "dead" || len(d.JobLog[0].Log) != 2 ||
		d.JobLog[0].Log[1].StatusCode != 422 || d.JobLog[0].Log[1].Verdict != "dead" || d.JobLog[0].Log[0].Verdict != "retry" {
		t.Errorf("jobs: %+v", d.JobLog)
	}
	if _, err := o.s.ShowEvent(o.ctx, "std", "nope"); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Errorf("missing event: %v, want ErrNotFound", err)
	}

	dead, _, err := o.s.ListDead(o.ctx, hookwarden.DeadFilter{})
	if err != nil || len(dead) != 1 || dead[0].EventID != "e2" || dead[0].DeadCount != 1 || dead[0].LastError != "unprocessable" {
		t.Fatalf("dead letters: %+v %v", dead, err)
	}
	for _, f := range []hookwarden.DeadFilter{{Source: "gh"}, {Destination: "std/ops"}, {Since: o.clock.Now().Add(time.Second)}} {
		if got, _, _ := o.s.ListDead(o.ctx, f); len(got) != 0 {
			t.Errorf("filter %+v: %d dead letters, want 0", f, len(got))
		}
	}

	st, err := o.s.Stats(o.ctx, []string{"std", "quiet"}, []string{"std/app"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%+v", st.Sources[0]); st.Sources[0].Accepted != 3 || st.Sources[0].Duplicates != 2 ||
		st.Sources[0].Divergent != 1 || st.Sources[0].Quarantined != 1 {
		t.Errorf("std stats: %s", got)
	}
	if st.Sources[1].Source != "quiet" || st.Sources[1].Accepted != 0 || st.Sources[2].Source != "gh" {
		t.Errorf("source order: %+v", st.Sources)
	}
	app := st.Destinations[0]
	if app.Destination != "std/app" || app.Pending != 1 || app.Delivered != 1 || app.Dead != 1 || app.OldestPendingAge != 0 {
		t.Errorf("std/app stats: %+v", app)
	}
}

func TestShowBatchEvent(t *testing.T) {
	o := setupOps(t)
	o.recordBatch("sg", "sg/app", "a", "b")
	o.recordBatch("sg", "sg/app", "b", "c")
	d, err := o.s.ShowEvent(o.ctx, "sg", "b")
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Body) != `{"id":"b"}` || len(d.ReceiptLog) != 2 || !d.ReceiptLog[0].Batch ||
		d.ReceiptLog[0].Kind != "accepted" || d.ReceiptLog[1].Kind != "duplicate" {
		t.Fatalf("batch event: body %q receipts %+v", d.Body, d.ReceiptLog)
	}
}

func TestReplayRules(t *testing.T) {
	o := setupOps(t)
	o.record("std", "e1", `{}`, "std/app", "std/ops")
	o.finish("std/app", "e1", hookwarden.Dead)
	o.finish("std/ops", "e1", hookwarden.Delivered)
	o.clock.Add(time.Hour)

	// Unknown events are reported, known ones replayed: every job, dead or delivered.
	res, err := o.s.Replay(o.ctx, hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"e1", "nope"}}, hookwarden.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed != 2 || len(res.Skipped) != 1 || res.Skipped[0].Reason != hookwarden.SkipNotFound {
		t.Fatalf("replay: %+v", res)
	}
	now := fmtTime(o.clock.Now())
	if n := o.count(`SELECT count(*) FROM jobs WHERE state = 'pending' AND attempts = 0 AND next_at = ? AND replayed_at = ?
		AND finished_at IS NULL AND leased_until IS NULL`, now, now); n != 2 {
		t.Fatalf("reset jobs: %d, want 2", n)
	}
	if n := o.count(`SELECT dead_count FROM jobs WHERE destination = 'std/app'`); n != 1 {
		t.Fatalf("dead_count %d, want 1 (kept across replays)", n)
	}

	// In flight: left alone.
	jobs, err := o.s.Lease(o.ctx, "std/app", 1, time.Minute)
	if err != nil || len(jobs) != 1 || jobs[0].Attempt != 1 {
		t.Fatalf("lease after replay: %+v %v (want attempt 1: the full budget again)", jobs, err)
	}
	res, _ = o.s.Replay(o.ctx, hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"e1"}, Destination: "std/app"}, hookwarden.ReplayOptions{})
	if res.Replayed != 0 || len(res.Skipped) != 1 || res.Skipped[0].Reason != hookwarden.SkipInFlight {
		t.Fatalf("in flight: %+v", res)
	}

	// Three strikes: dead three times needs Force.
	if err := o.s.Finish(o.ctx, hookwarden.Attempt{JobID: jobs[0].ID, Number: 1, StartedAt: o.clock.Now(), ExitCode: -1,
		Verdict: hookwarden.Dead, Error: "again"}); err != nil {
		t.Fatal(err)
	}
	for range 1 {
		if res, _ := o.s.Replay(o.ctx, hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{}); res.Replayed != 1 {
			t.Fatalf("second replay: %+v", res)
		}
		o.finish("std/app", "e1", hookwarden.Dead)
	}
	if n := o.count(`SELECT dead_count FROM jobs WHERE destination = 'std/app'`); n != 3 {
		t.Fatalf("dead_count %d, want 3", n)
	}
	res, _ = o.s.Replay(o.ctx, hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{})
	if res.Replayed != 0 || len(res.Skipped) != 1 || res.Skipped[0].Reason != hookwarden.SkipNeedsForce || res.Skipped[0].DeadCount != 3 {
		t.Fatalf("third strike without force: %+v", res)
	}
	res, _ = o.s.Replay(o.ctx, hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{Force: true})
	if res.Replayed != 1 || len(res.Destinations) != 1 || res.Destinations[0] != "std/app" {
		t.Fatalf("with force: %+v", res)
	}

	// By job id (the dashboard's button).
	o.finish("std/app", "e1", hookwarden.Dead)
	var id int64
	o.s.DB().QueryRow(`SELECT id FROM jobs WHERE destination = 'std/app'`).Scan(&id)
	res, _ = o.s.Replay(o.ctx, hookwarden.ReplaySelector{JobIDs: []int64{id, 999}}, hookwarden.ReplayOptions{Force: true})
	if res.Replayed != 1 || len(res.Skipped) != 1 || res.Skipped[0].JobID != 999 {
		t.Fatalf("by job id: %+v", res)
	}

	// A lease that expired (its process died) is no longer "in flight".
	if jobs, err := o.s.Lease(o.ctx, "std/app", 1, time.Minute); err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v %v", jobs, err)
	}
	if res, _ := o.s.Replay(o.ctx, hookwarden.ReplaySelector{JobIDs: []int64{id}}, hookwarden.ReplayOptions{Force: true}); res.Replayed != 0 {
		t.Fatalf("replayed a job in flight: %+v", res)
	}
	o.clock.Add(2 * time.Minute)
	if res, _ := o.s.Replay(o.ctx, hookwarden.ReplaySelector{JobIDs: []int64{id}}, hookwarden.ReplayOptions{Force: true}); res.Replayed != 1 {
		t.Fatalf("expired lease: %+v, want replayed", res)
	}
	if n := o.count(`SELECT count(*) FROM jobs WHERE id = ? AND leased_until IS NULL AND attempts = 0`, id); n != 1 {
		t.Fatal("replay did not clear the expired lease")
	}
}

func TestReplayInBatchesWithProgress(t *testing.T) {
	o := setupOps(t)
	for i := range 7 {
		id := fmt.Sprintf("e%d", i)
		o.record("std", id, `{}`, "std/app")
		o.finish("std/app", id, hookwarden.Dead)
	}
	var calls []string
	res, err := o.s.Replay(o.ctx, hookwarden.ReplaySelector{Dead: true, Source: "std", Destination: "std/app"},
		hookwarden.ReplayOptions{BatchSize: 3, Progress: func(done, total int) {
			calls = append(calls, fmt.Sprintf("%d/%d", done, total))
		}})
	if err != nil || res.Replayed != 7 || res.Selected != 7 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if fmt.Sprint(calls) != "[3/7 6/7 7/7]" {
		t.Fatalf("progress %v, want three batches", calls)
	}
	if n := o.count(`SELECT count(*) FROM jobs WHERE state = 'pending'`); n != 7 {
		t.Fatalf("pending %d, want 7", n)
	}
}

func TestRunsAndGaps(t *testing.T) {
	o := setupOps(t)
	t0 := o.clock.Now()
	at := func(d time.Duration) string { return fmtTime(t0.Add(d)) }
	// Run 1: crashed (last heartbeat at +10m); run 2 starts at +25m, stops
	// cleanly at +1h; run 3 starts 2s later (a deploy), stops at +2h;
	// run 4 starts at +3h and is alive (heartbeat now).
	err := o.s.write(o.ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		for _, r := range [][3]any{
			{at(0), at(10 * time.Minute), nil},
			{at(25 * time.Minute), at(time.Hour), at(time.Hour)},
			{at(time.Hour + 2*time.Second), at(2 * time.Hour), at(2 * time.Hour)},
			{at(3 * time.Hour), at(4*time.Hour - 3*time.Second), nil},
		} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO runs (started_at, heartbeat_at, stopped_at, version, pid) VALUES (?, ?, ?, 'test', 1)`,
				r[0], r[1], r[2]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	o.clock.Add(4 * time.Hour)
	// Source traffic: at 0, +1m, then silence until +3h30m.
	for _, d := range []time.Duration{0, time.Minute, 3*time.Hour + 30*time.Minute} {
		r := receipt("std", fmt.Sprintf("s%d", d), `{}`)
		r.ReceivedAt = t0.Add(d)
		if _, err := o.s.Record(o.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := o.s.Gaps(o.ctx, hookwarden.GapOptions{Sources: []hookwarden.SourcePolicy{
		{Name: "std", RetryHorizon: 30 * time.Minute, ExpectWithin: time.Hour},
		{Name: "gh", RetryHorizon: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range rep.Outages {
		got = append(got, fmt.Sprintf("%s-%s crash=%v open=%v beyond=%v", w.Start.Sub(t0), w.End.Sub(t0), w.Crash, w.Open, w.BeyondRetryHorizon))
	}
	want := "[10m0s-25m0s crash=true open=false beyond=[gh] 2h0m0s-3h0m0s crash=false open=false beyond=[std gh]]"
	if fmt.Sprint(got) != want {
		t.Fatalf("outages:\n got %v\nwant %s", got, want)
	}
	if len(rep.Silences) != 1 || rep.Silences[0].Start.Sub(t0) != time.Minute ||
		rep.Silences[0].End.Sub(t0) != 3*time.Hour+30*time.Minute || !rep.Silences[0].BeyondRetryHorizon {
		t.Fatalf("silences: %+v", rep.Silences)
	}

	// The live run dies: after Stale, an open window from its last heartbeat.
	o.clock.Add(time.Minute)
	rep, _ = o.s.Gaps(o.ctx, hookwarden.GapOptions{Stale: 10 * time.Second})
	last := rep.Outages[len(rep.Outages)-1]
	if !last.Open || !last.Crash || last.Length != time.Minute+3*time.Second {
		t.Fatalf("open window: %+v", last)
	}
	// Since drops older windows.
	rep, _ = o.s.Gaps(o.ctx, hookwarden.GapOptions{Since: t0.Add(time.Hour)})
	if len(rep.Outages) != 2 {
		t.Fatalf("since: %d outages, want 2", len(rep.Outages))
	}
}

func TestBackupIsConsistentUnderWrites(t *testing.T) {
	o := setupOps(t)
	body := `{"exact":"bytes \u00e9\n"}`
	o.record("std", "keep", body, "std/app")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			o.record("std", fmt.Sprintf("load%d", i), `{"load":true}`, "std/app")
		}
	})
	dest := filepath.Join(t.TempDir(), "copy.db")
	var calls int
	err := o.s.Backup(o.ctx, dest, func(w, total int64) { calls++ })
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Error("progress never called")
	}
	if err := o.s.Backup(o.ctx, dest, nil); !errors.Is(err, hookwarden.ErrExists) {
		t.Fatalf("second backup to the same file: %v, want ErrExists", err)
	}
	ro, err := Open(o.ctx, dest, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var ok string
	if err := ro.DB().QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q %v", ok, err)
	}
	d, err := ro.ShowEvent(o.ctx, "std", "keep")
	if err != nil || string(d.Body) != body {
		t.Fatalf("event in backup: %v %q", err, d.Body)
	}
	matches, _ := filepath.Glob(dest + ".partial-*")
	if len(matches) != 0 {
		t.Fatalf("temporary files left: %v", matches)
	}
}

func TestPruneRemovesExactlyWhatRetentionSays(t *testing.T) {
	o := setupOps(t)
	day := 24 * time.Hour
	ret := hookwarden.Retention{Payloads: 30 * day, Claims: 90 * day}

	// Day 0.
	o.record("std", "A", `{"a":1}`, "std/a")
	o.record("std", "A", `{"a":1}`, "std/a")       // identical duplicate: no body of its own
	o.record("std", "A", `{"a":1,"x":2}`, "std/a") // divergent: keeps its body
	o.finish("std/a", "A", hookwarden.Delivered)
	o.record("std", "B", `{"b":1}`, "std/b")
	o.finish("std/b", "B", hookwarden.Dead)
	o.record("std", "C", `{"c":1}`, "std/c") // stays pending
	o.record("std", "F", `{"f":1}`, "std/f") // delivered late, on day 35
	o.recordBatch("sg", "sg/app", "X", "Y")
	o.finish("sg/app", "X", hookwarden.Delivered)
	o.finish("sg/app", "Y", hookwarden.Delivered)
	o.record("std", "", `{"no":"id"}`) // quarantined
	o.clock.Add(35 * day)
	o.finish("std/f", "F", hookwarden.Delivered)
	o.clock.Add(5 * day) // day 40
	o.record("std", "E", `{"e":1}`, "std/e")
	o.finish("std/e", "E", hookwarden.Delivered)

	dry, err := o.s.Prune(o.ctx, hookwarden.PruneOptions{Retention: ret, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := o.count(`SELECT count(*) FROM events WHERE pruned_at IS NOT NULL`); n != 0 {
		t.Fatalf("dry run pruned %d events", n)
	}
	before, err := o.s.Stats(o.ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := o.s.Prune(o.ctx, hookwarden.PruneOptions{Retention: ret, BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A (its receipt, a duplicate and a divergent copy, one job, one
	// attempt), X and Y (their batch, two jobs, three attempts: X's lease
	// also retried Y once): 3 events, 3 bodies.
	want := hookwarden.PruneResult{PayloadsPruned: 3, PayloadBytes: int64(len(`{"a":1}`) + len(`{"a":1,"x":2}`) + len(`[batch]`)),
		HeldDead: 1, HeldPending: 1, HeldQuarantined: 1}
	dry.DryRun, dry.PayloadCutoff, dry.ClaimCutoff = false, time.Time{}, time.Time{}
	if dry != want {
		t.Errorf("dry run at day 40:\n got %+v\nwant %+v", dry, want)
	}
	want.PayloadReceipts, want.PayloadJobs, want.PayloadAttempts = 4, 3, 4
	res.PayloadCutoff, res.ClaimCutoff = time.Time{}, time.Time{}
	if res != want {
		t.Errorf("prune at day 40:\n got %+v\nwant %+v", res, want)
	}
	if got := o.count(`SELECT count(*) FROM events WHERE pruned_at IS NOT NULL AND body IS NULL AND body_sha256 = x''`); got != 3 {
		t.Errorf("folded events: %d, want 3", got)
	}
	for q, want := range map[string]int{
		`SELECT count(*) FROM receipts r JOIN events e ON e.id = r.event_ref WHERE e.event_id = 'A'`:    0,
		`SELECT count(*) FROM receipts WHERE kind = 'batch'`:                                            0,
		`SELECT count(*) FROM receipt_events`:                                                           0,
		`SELECT count(*) FROM jobs j JOIN events e ON e.id = j.event_ref WHERE e.pruned_at IS NOT NULL`: 0,
		`SELECT count(*) FROM jobs`:                                                                     4, // B, C, E, F
		`SELECT count(*) FROM attempts`:                                                                 3, // B, E and F: one each
		`SELECT count(*) FROM receipts`:                                                                 5, // B, C, E, F and the quarantined request
		`SELECT count(*) FROM prune_held`:                                                               3, // B (dead), C (pending), F (delivered after the cutoff)
	} {
		if got := o.count(q); got != want {
			t.Errorf("%s = %d, want %d", q, got, want)
		}
	}
	after, err := o.s.Stats(o.ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	after.At = before.At
	if fmt.Sprintf("%+v", after) != fmt.Sprintf("%+v", before) {
		t.Errorf("stats changed across the prune:\nbefore %+v\n after %+v", before, after)
	}
	for _, id := range []string{"B", "C", "E", "F"} {
		if d, err := o.s.ShowEvent(o.ctx, "std", id); err != nil || d.Body == nil || d.PayloadPruned || d.SummaryOnly {
			t.Errorf("event %s lost its payload: %v", id, err)
		}
	}
	d, err := o.s.ShowEvent(o.ctx, "std", "A")
	if err != nil || d.Body != nil || !d.PayloadPruned || d.PrunedAt.IsZero() || !d.SummaryOnly {
		t.Fatalf("A after pruning: body %q pruned %v at %v, %v", d.Body, d.PayloadPruned, d.PrunedAt, err)
	}
	if d.Receipts != 3 || d.Jobs != 1 || d.Delivered != 1 || d.Attempts != 1 || d.Status != hookwarden.StatusDelivered ||
		!d.DeliveredAt.Equal(d.ClaimedAt) || !d.LastReceivedAt.Equal(d.ClaimedAt) || len(d.ReceiptLog) != 0 || len(d.JobLog) != 0 {
		t.Errorf("A's summary: %+v", d.EventSummary)
	}
	if again, _ := o.s.Prune(o.ctx, hookwarden.PruneOptions{Retention: ret}); again.PayloadsPruned != 0 {
		t.Errorf("second prune removed %d more", again.PayloadsPruned)
	}

	// The dedup promise outlives the payload.
	if res := o.record("std", "A", `{"a":1}`, "std/a"); res.Outcome != hookwarden.Duplicate {
		t.Fatalf("repeat of a pruned-payload event: %v, want duplicate", res.Outcome)
	}
	if n := o.count(`SELECT count(*) FROM jobs j JOIN events e ON e.id = j.event_ref WHERE e.event_id = 'A'`); n != 0 {
		t.Fatalf("jobs of A: %d, want 0 (a duplicate creates none)", n)
	}
	// Nothing is left to replay.
	rr, _ := o.s.Replay(o.ctx, hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"A"}}, hookwarden.ReplayOptions{})
	if rr.Replayed != 0 || len(rr.Skipped) != 1 || rr.Skipped[0].Reason != hookwarden.SkipPruned || rr.Skipped[0].PrunedAt.IsZero() {
		t.Fatalf("replay of a pruned event: %+v", rr)
	}

	// Day 100: claims older than 90 days whose jobs all finished before then go.
	o.clock.Add(60 * day)
	res, err = o.s.Prune(o.ctx, hookwarden.PruneOptions{Retention: ret, BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	// A, X and Y, folded on day 40, and A's late duplicate of day 40: the
	// claims tier runs first and takes it with A's claim.
	if res.EventsDeleted != 3 || res.ReceiptsDeleted != 1 || res.JobsDeleted != 0 || res.AttemptsDeleted != 0 {
		t.Errorf("claims at day 100: %+v", res)
	}
	var left []string
	rows, _ := o.s.DB().Query(`SELECT event_id FROM events ORDER BY event_id`)
	for rows.Next() {
		var id string
		rows.Scan(&id)
		left = append(left, id)
	}
	rows.Close()
	if fmt.Sprint(left) != "[B C E F]" {
		t.Errorf("events left: %v, want [B C E F] (dead, pending, recent, finished late)", left)
	}
	if n := o.count(`SELECT count(*) FROM quarantine`); n != 1 {
		t.Errorf("quarantine rows: %d, want 1 (never pruned silently)", n)
	}
	if n := o.count(`SELECT count(*) FROM receipts WHERE kind = 'batch'`); n != 0 {
		t.Errorf("orphan batch receipts: %d", n)
	}
	var fk int
	if rows, err := o.s.DB().Query(`PRAGMA foreign_key_check`); err == nil {
		for rows.Next() {
			fk++
		}
		rows.Close()
	}
	if fk != 0 {
		t.Errorf("foreign key violations: %d", fk)
	}
}

// TestGapsOfAnExport: the runs an export copied from PostgreSQL keep their
// instances, and gaps reads them as PostgreSQL does: instance a's crash and
// return while b served is a restart, not an outage.
func TestGapsOfAnExport(t *testing.T) {
	o := setupOps(t)
	t0 := o.clock.Now()
	at := func(d time.Duration) string { return fmtTime(t0.Add(d)) }
	err := o.s.write(o.ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		for _, r := range [][4]any{
			{"b", at(0), at(2 * time.Minute), at(2 * time.Minute)},
			{"a", at(0), at(5 * time.Second), nil},
			{"a", at(65 * time.Second), at(2 * time.Minute), at(2 * time.Minute)},
		} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO runs (instance, started_at, heartbeat_at, stopped_at, version, pid)
				VALUES (?, ?, ?, ?, 'test', 1)`, r[0], r[1], r[2], r[3]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	o.clock.Add(2 * time.Minute)
	rep, err := o.s.Gaps(o.ctx, hookwarden.GapOptions{Sources: []hookwarden.SourcePolicy{{Name: "std", RetryHorizon: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Outages) != 1 {
		t.Fatalf("outages %+v, want one restart", rep.Outages)
	}
	if w := rep.Outages[0]; w.Kind != "restart" || !w.Crash || w.Start.Sub(t0) != 5*time.Second || w.End.Sub(t0) != 65*time.Second ||
		len(w.BeyondRetryHorizon) != 0 {
		t.Fatalf("restart %+v, want a's crash from +5s to +65s, nothing beyond a horizon", w)
	}
	runs, err := o.s.Runs(o.ctx)
	if err != nil || len(runs) != 3 || runs[0].Instance != "b" || runs[1].Instance != "a" {
		t.Fatalf("runs %+v %v, want their instances", runs, err)
	}
}

// TestGapsReadOnlyBeforeSchema11: a --db command opens an older file
// read-only, without runs.instance: its runs read as one instance's.
func TestGapsReadOnlyBeforeSchema11(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	c := newTestClock()
	s, err := Open(context.Background(), path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.StartRun(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(time.Minute)
	if err := s.StopRun(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if err := s.write(context.Background(), true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `ALTER TABLE runs DROP COLUMN instance`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	c.Add(time.Hour)
	ro, err := Open(context.Background(), path, Options{Now: c.Now, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rep, err := ro.Gaps(context.Background(), hookwarden.GapOptions{})
	if err != nil || rep.Runs != 1 || len(rep.Outages) != 1 || !rep.Outages[0].Open || rep.Outages[0].Length != time.Hour {
		t.Fatalf("gaps %+v %v, want one run and the open hour since its stop", rep, err)
	}
}
