package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// MustOpen opens a store on a fresh file in t.TempDir and closes it at cleanup.
func MustOpen(tb testing.TB, opts Options) *Store {
	tb.Helper()
	s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "hw.db"), opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func receipt(source, id string, body string, dests ...string) *hookwarden.Receipt {
	sum := sha256.Sum256([]byte(body))
	r := &hookwarden.Receipt{
		Source:     source,
		Header:     http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id}},
		Body:       []byte(body),
		BodySHA256: sum,
		RemoteAddr: "127.0.0.1:5555",
		ReceivedAt: time.Now(),
	}
	if id != "" {
		r.Events = []hookwarden.Event{{ID: id, Type: "t.created", BodySHA256: sum, Destinations: dests}}
	} else {
		r.QuarantineReason = "no event id at json:id"
	}
	return r
}

func count(tb testing.TB, s *Store, q string, args ...any) int {
	tb.Helper()
	var n int
	if err := s.DB().QueryRow(q, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestPragmasOnEveryConnection: every connection of both pools has the
// pragmas, and the read pool the page cache an operator command asks for
// (the writer keeps SQLite's default).
func TestPragmasOnEveryConnection(t *testing.T) {
	s := MustOpen(t, Options{ReadCacheKiB: 256})
	ctx := context.Background()
	// Hold several reader connections at once so the check covers more than one.
	var conns []*sql.Conn
	for i := 0; i < 3; i++ {
		c, err := s.rdb.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	wc, err := s.wdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, wc)
	for i, c := range conns {
		var sync, fk, busy int
		var mode string
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk)
		c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy)
		c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
		if sync != 2 || fk != 1 || busy != 10000 || mode != "wal" {
			t.Errorf("conn %d: synchronous=%d foreign_keys=%d busy_timeout=%d journal_mode=%s; want 2 (FULL), 1, 10000, wal",
				i, sync, fk, busy, mode)
		}
		var cache int
		c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&cache)
		if want := map[bool]int{true: -2000, false: -256}[c == wc]; cache != want {
			t.Errorf("conn %d: cache_size=%d, want %d", i, cache, want)
		}
	}
	for _, c := range conns {
		c.Close()
	}
}

// TestWriterJournalsStatementsInMemory: the writer's statement journals
// stay in memory (temp_store MEMORY) once the store is open, on a file
// created now and on one migrated from an older schema; the readers keep
// SQLite's default.
func TestWriterJournalsStatementsInMemory(t *testing.T) {
	ctx := context.Background()
	old := filepath.Join(t.TempDir(), "old.db")
	openAtVersion(t, old, 12).Close()
	for name, path := range map[string]string{"new": filepath.Join(t.TempDir(), "new.db"), "migrated": old} {
		s, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var w, r int
		if err := s.wdb.QueryRowContext(ctx, "PRAGMA temp_store").Scan(&w); err != nil {
			t.Fatal(err)
		}
		if err := s.rdb.QueryRowContext(ctx, "PRAGMA temp_store").Scan(&r); err != nil {
			t.Fatal(err)
		}
		if w != 2 || r != 0 {
			t.Errorf("%s: temp_store writer %d, readers %d; want 2 (MEMORY), 0 (default)", name, w, r)
		}
		s.Close()
	}
}

func TestRecordAcceptDuplicateDivergent(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()

	res, err := s.Record(ctx, receipt("stripe", "evt_1", `{"id":"evt_1"}`, "stripe/app", "stripe/notify"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != hookwarden.Accepted || res.Events[0].Jobs != 2 {
		t.Fatalf("first: got %+v, want accepted with 2 jobs", res)
	}
	res, err = s.Record(ctx, receipt("stripe", "evt_1", `{"id":"evt_1"}`, "stripe/app", "stripe/notify"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != hookwarden.Duplicate || res.Events[0].Divergent {
		t.Fatalf("identical repeat: got %+v, want duplicate, not divergent", res)
	}
	res, err = s.Record(ctx, receipt("stripe", "evt_1", `{"id":"evt_1","x":1}`, "stripe/app"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != hookwarden.Duplicate || !res.Events[0].Divergent {
		t.Fatalf("differing repeat: got %+v, want divergent duplicate", res)
	}
	// Same id at another source is another event.
	res, _ = s.Record(ctx, receipt("github", "evt_1", `{}`, "github/app"))
	if res.Outcome != hookwarden.Accepted {
		t.Fatalf("other source: got %v, want accepted", res.Outcome)
	}

	if got := count(t, s, `SELECT count(*) FROM jobs`); got != 3 {
		t.Errorf("jobs: got %d, want 3", got)
	}
	if got := count(t, s, `SELECT count(*) FROM receipts WHERE source='stripe'`); got != 3 {
		t.Errorf("receipts: got %d, want 3 (every delivery recorded)", got)
	}
	if got := count(t, s, `SELECT count(*) FROM receipts WHERE kind='duplicate' AND body IS NULL`); got != 1 {
		t.Errorf("identical duplicate should reference the first body, got %d rows without body", got)
	}
	if got := count(t, s, `SELECT count(*) FROM receipts WHERE kind='divergent' AND body = ?`, []byte(`{"id":"evt_1","x":1}`)); got != 1 {
		t.Errorf("divergent duplicate must keep its body")
	}
}

func TestConcurrentDoublesClaimOnce(t *testing.T) {
	var maxBatch atomic.Int64
	s := MustOpen(t, Options{OnCommit: func(n int, _ time.Duration, _ error) {
		for {
			m := maxBatch.Load()
			if int64(n) <= m || maxBatch.CompareAndSwap(m, int64(n)) {
				return
			}
		}
	}})
	ctx := context.Background()
	var accepted, dup atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Record(ctx, receipt("standard", "msg_same", `{"n":1}`, "standard/app"))
			if err != nil {
				t.Error(err)
				return
			}
			switch res.Outcome {
			case hookwarden.Accepted:
				accepted.Add(1)
			case hookwarden.Duplicate:
				dup.Add(1)
			}
		}()
	}
	wg.Wait()
	if accepted.Load() != 1 || dup.Load() != 63 {
		t.Fatalf("accepted=%d duplicates=%d, want 1 and 63", accepted.Load(), dup.Load())
	}
	if got := count(t, s, `SELECT count(*) FROM jobs`); got != 1 {
		t.Fatalf("jobs: got %d, want 1", got)
	}
	t.Logf("largest batch: %d", maxBatch.Load())
}

func TestQuarantineRepeatsCounted(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		res, err := s.Record(ctx, receipt("stripe", "", `{"no":"id"}`))
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != hookwarden.Quarantined {
			t.Fatalf("got %v, want quarantined", res.Outcome)
		}
	}
	if got := count(t, s, `SELECT count(*) FROM receipts WHERE kind='quarantined'`); got != 1 {
		t.Errorf("quarantined receipts: got %d, want 1 (repeats only counted)", got)
	}
	if got := count(t, s, `SELECT count FROM quarantine`); got != 5 {
		t.Errorf("quarantine count: got %d, want 5", got)
	}
}

func TestBatchClaimsEachElement(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	batch := func(ids ...string) *hookwarden.Receipt {
		r := receipt("sendgrid", "", `[...]`)
		r.QuarantineReason = ""
		for _, id := range ids {
			b := []byte(fmt.Sprintf(`{"sg_event_id":%q}`, id))
			r.Events = append(r.Events, hookwarden.Event{ID: id, Type: "delivered", Body: b, BodySHA256: sha256.Sum256(b),
				Destinations: []string{"sendgrid/app"}})
		}
		return r
	}
	res, err := s.Record(ctx, batch("a", "b"))
	if err != nil || res.Outcome != hookwarden.Accepted {
		t.Fatalf("first batch: %+v %v", res, err)
	}
	res, err = s.Record(ctx, batch("b", "c"))
	if err != nil || res.Outcome != hookwarden.Accepted ||
		res.Events[0].Outcome != hookwarden.Duplicate || res.Events[1].Outcome != hookwarden.Accepted {
		t.Fatalf("second batch: %+v %v", res, err)
	}
	jobs, err := s.Lease(ctx, "sendgrid/app", 10, time.Minute)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("lease: %d jobs, %v; want 3", len(jobs), err)
	}
	for _, j := range jobs {
		if want := fmt.Sprintf(`{"sg_event_id":%q}`, j.EventID); string(j.Body) != want {
			t.Errorf("job %s body %q, want the element %q", j.EventID, j.Body, want)
		}
	}
}

func TestLeaseFinishCycle(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := MustOpen(t, Options{Now: clock})
	ctx := context.Background()

	r := receipt("standard", "msg_1", `{"a":1}`, "standard/app")
	r.ReceivedAt = clock()
	if _, err := s.Record(ctx, r); err != nil {
		t.Fatal(err)
	}
	due, ok, err := s.NextDue(ctx, "standard/app")
	if err != nil || !ok || !due.Equal(now) {
		t.Fatalf("NextDue = %v %v %v, want %v", due, ok, err, now)
	}
	jobs, err := s.Lease(ctx, "standard/app", 5, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("lease: %v %v", jobs, err)
	}
	j := jobs[0]
	if j.Attempt != 1 || j.Source != "standard" || j.EventID != "msg_1" || j.EventType != "t.created" ||
		string(j.Body) != `{"a":1}` || j.ContentType != "application/json" {
		t.Fatalf("leased job: %+v", j)
	}
	if again, _ := s.Lease(ctx, "standard/app", 5, time.Minute); len(again) != 0 {
		t.Fatalf("a leased job must not be leased twice, got %d", len(again))
	}
	// The worker dies: the lease expires and the job is due again, same event.
	advance(61 * time.Second)
	jobs, _ = s.Lease(ctx, "standard/app", 5, time.Minute)
	if len(jobs) != 1 || jobs[0].Attempt != 2 {
		t.Fatalf("after lease expiry: %+v, want attempt 2", jobs)
	}
	// The first attempt finishes late, after its lease was taken over: its
	// verdict must not overwrite the second lease's.
	if err := s.Finish(ctx, hookwarden.Attempt{JobID: j.ID, Number: 1, StartedAt: now, StatusCode: 200,
		ExitCode: -1, Verdict: hookwarden.Delivered}); err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, `SELECT count(*) FROM jobs WHERE state = 'pending'`); got != 1 {
		t.Fatal("a stale finish changed the job's state")
	}
	retryAt := now.Add(30 * time.Second)
	if err := s.Finish(ctx, hookwarden.Attempt{JobID: j.ID, Number: 2, StartedAt: now, StatusCode: 503,
		ExitCode: -1, Error: "HTTP 503", Verdict: hookwarden.Retry, RetryAt: retryAt}); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := s.Lease(ctx, "standard/app", 5, time.Minute); len(jobs) != 0 {
		t.Fatalf("not due yet, leased %d", len(jobs))
	}
	if due, _, _ := s.NextDue(ctx, "standard/app"); !due.Equal(retryAt) {
		t.Fatalf("NextDue = %v, want %v", due, retryAt)
	}
	advance(30 * time.Second)
	jobs, _ = s.Lease(ctx, "standard/app", 5, time.Minute)
	if len(jobs) != 1 {
		t.Fatal("retry not due")
	}
	if err := s.Finish(ctx, hookwarden.Attempt{JobID: j.ID, Number: 3, StartedAt: now, StatusCode: 200,
		ExitCode: -1, Verdict: hookwarden.Delivered}); err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, `SELECT count(*) FROM jobs WHERE state='delivered' AND leased_until IS NULL`); got != 1 {
		t.Errorf("delivered jobs: %d", got)
	}
	if got := count(t, s, `SELECT count(*) FROM attempts WHERE job_id=?`, j.ID); got != 3 {
		t.Errorf("attempts logged: %d, want 3 (the stale one too)", got)
	}
	if _, ok, _ := s.NextDue(ctx, "standard/app"); ok {
		t.Error("nothing should be due after delivery")
	}
}

func TestReleaseLeasesAfterCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Record(ctx, receipt("standard", "msg_1", `{}`, "standard/app"))
	if jobs, _ := s.Lease(ctx, "standard/app", 1, time.Hour); len(jobs) != 1 {
		t.Fatal("lease failed")
	}
	s.Close() // the process "dies" with the job in flight

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.ReleaseLeases(ctx); err != nil || n != 1 {
		t.Fatalf("ReleaseLeases = %d, %v; want 1", n, err)
	}
	jobs, _ := s.Lease(ctx, "standard/app", 1, time.Hour)
	if len(jobs) != 1 || jobs[0].Attempt != 2 || jobs[0].IdempotencyKey() != "standard:msg_1" {
		t.Fatalf("after restart: %+v, want the same job again", jobs)
	}
}

// setMaxPages runs PRAGMA max_page_count on the writer's connection.
func setMaxPages(t *testing.T, s *Store, n int) {
	t.Helper()
	err := s.write(context.Background(), true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", n))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCommitFailureIsUnavailableAndRecovers(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	if _, err := s.Record(ctx, receipt("standard", "before", `{}`, "standard/app")); err != nil {
		t.Fatal(err)
	}
	var pages int
	s.DB().QueryRow("PRAGMA page_count").Scan(&pages)
	setMaxPages(t, s, pages) // the file cannot grow any more

	big := make([]byte, 256<<10)
	var failed int
	for i := 0; i < 20; i++ {
		r := receipt("standard", fmt.Sprintf("full-%d", i), string(big), "standard/app")
		_, err := s.Record(ctx, r)
		if err != nil {
			if !errors.Is(err, hookwarden.ErrUnavailable) {
				t.Fatalf("got %v, want ErrUnavailable", err)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no write failed on a full database")
	}
	if s.Healthy() == nil {
		t.Error("Healthy() should report the failed write")
	}
	// Nothing half-written: every claim has its receipt and its job.
	if got := count(t, s, `SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM receipts r WHERE r.event_ref = e.id)
		OR NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = e.id)`); got != 0 {
		t.Fatalf("%d claims without receipt or job", got)
	}
	var ok string
	s.DB().QueryRow("PRAGMA integrity_check").Scan(&ok)
	if ok != "ok" {
		t.Fatalf("integrity_check: %s", ok)
	}

	setMaxPages(t, s, 1<<30) // space is back
	if _, err := s.Record(ctx, receipt("standard", "after", string(big), "standard/app")); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if err := s.Healthy(); err != nil {
		t.Errorf("Healthy after recovery: %v", err)
	}
}

func TestBatchFailureIsolatesTheBadRequest(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	// A receipt that violates a constraint (unknown receipt kind) inside a
	// batch must fail alone, not take its neighbours with it.
	bad := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO jobs (event_ref, destination, state, next_at, created_at) VALUES (999999, 'x', 'pending', '', '')`)
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 7 {
				errs[i] = s.write(ctx, true, bad)
				return
			}
			_, errs[i] = s.Record(ctx, receipt("standard", fmt.Sprintf("m%d", i), `{}`, "standard/app"))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i == 7) != (err != nil) {
			t.Errorf("request %d: err=%v", i, err)
		}
	}
	if got := count(t, s, `SELECT count(*) FROM events`); got != 31 {
		t.Errorf("events: %d, want 31", got)
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(context.Background(), receipt("standard", "a", `{}`, "standard/app")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Record(context.Background(), receipt("standard", "b", `{}`)); !errors.Is(err, hookwarden.ErrUnavailable) {
		t.Fatalf("after close: %v, want ErrUnavailable", err)
	}
	ro, err := Open(context.Background(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := count(t, ro, `SELECT count(*) FROM events`); got != 1 {
		t.Fatalf("read-only reopen sees %d events, want 1", got)
	}
	if _, err := ro.Record(context.Background(), receipt("standard", "c", `{}`)); err == nil {
		t.Fatal("read-only store accepted a write")
	}
}

// TestSchemaVersionCountsTheMigrations: the version this build writes,
// which SchemaVersion counts from the names alone, is the last migration's.
func TestSchemaVersionCountsTheMigrations(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if v := SchemaVersion(); v != ms[len(ms)-1].Version || v < 18 {
		t.Fatalf("SchemaVersion() = %d, the last migration is %d", v, ms[len(ms)-1].Version)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.write(context.Background(), true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "PRAGMA user_version = 99")
		return err
	})
	s.Close()
	if _, err := Open(context.Background(), path, Options{}); err == nil {
		t.Fatal("opened a database from a newer schema")
	}
}

func TestHeadersRoundTrip(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "X-Multi": {"a", "b: c"}}
	got := decodeHeaders(encodeHeaders(h))
	if fmt.Sprint(got) != fmt.Sprint(h) {
		t.Fatalf("got %v, want %v", got, h)
	}
}

// A replayed dead letter waits since its replay: the oldest-pending gauge
// must not jump to the event's original age.
func TestOutboxAgeCountsFromReplay(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := MustOpen(t, Options{Now: clock})
	ctx := context.Background()
	r := receipt("standard", "msg_old", `{}`, "standard/app")
	r.ReceivedAt = clock()
	s.Record(ctx, r)
	jobs, _ := s.Lease(ctx, "standard/app", 1, time.Minute)
	s.Finish(ctx, hookwarden.Attempt{JobID: jobs[0].ID, Number: 1, StartedAt: now, StatusCode: 422, ExitCode: -1, Verdict: hookwarden.Dead})
	mu.Lock()
	now = now.Add(48 * time.Hour)
	mu.Unlock()
	if _, err := s.Replay(ctx, hookwarden.ReplaySelector{Source: "standard", EventIDs: []string{"msg_old"}}, hookwarden.ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(10 * time.Second)
	mu.Unlock()
	st, err := s.OutboxStats(ctx, []string{"standard/app"})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Pending != 1 || st[0].OldestPendingAge != 10*time.Second || st[0].OldestPendingSeconds != 10 {
		t.Fatalf("outbox %+v, want 1 pending, 10s old (since the replay, not 48h)", st[0])
	}
}
