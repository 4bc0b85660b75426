package metrics_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookwarden/hookwarden/internal/metrics"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

var quiet = slog.New(slog.DiscardHandler)

// fillDB writes n events into a fresh database at path, each with an ~800 byte
// receipt and one job per destination. Of s/app's jobs, pending are pending
// and dead dead-lettered; every s/notify job is delivered. It writes with
// plain SQL in one transaction: this is a fixture, not the receiving path.
func fillDB(tb testing.TB, path string, n, pending, dead int) {
	tb.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.Close(); err != nil { // migrated: now write the fixture directly
		tb.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	// Event i was claimed n-i seconds ago; its time text is fixed-width UTC.
	ts := func(col string) string {
		return fmt.Sprintf(`strftime('%%Y-%%m-%%dT%%H:%%M:%%f000Z', 'now', '-' || (%d - %s) || ' seconds')`, n, col)
	}
	stmts := []string{
		fmt.Sprintf(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %d)
INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256)
SELECT i, 's', 'evt_' || i, 'invoice.' || (i %% 40), %s, randomblob(32) FROM c`, n, ts("i")),
		`INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
SELECT id, 's', id, 'accepted', claimed_at, '127.0.0.1:4242', 'Content-Type: application/json', randomblob(800), body_sha256 FROM events`,
		fmt.Sprintf(`INSERT INTO jobs (event_ref, destination, state, attempts, dead_count, next_at, created_at, finished_at, last_error)
SELECT id, 's/app',
	CASE WHEN id > %[1]d - %[2]d THEN 'pending' WHEN id <= %[3]d THEN 'dead' ELSE 'delivered' END,
	1, CASE WHEN id <= %[3]d THEN 1 ELSE 0 END, claimed_at, claimed_at,
	CASE WHEN id > %[1]d - %[2]d THEN NULL ELSE claimed_at END,
	CASE WHEN id <= %[3]d THEN 'HTTP 422' END
FROM events`, n, pending, dead),
		`INSERT INTO jobs (event_ref, destination, state, attempts, next_at, created_at, finished_at)
SELECT id, 's/notify', 'delivered', 1, claimed_at, claimed_at, claimed_at FROM events`,
		`INSERT INTO attempts (job_id, number, started_at, duration_us, status_code, verdict)
SELECT id, 1, created_at, 1500, 200, 'delivered' FROM jobs WHERE state = 'delivered'`,
		`ANALYZE`,
	}
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := tx.Exec(q); err != nil {
			tb.Fatalf("fixture: %v\n%s", err, q)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkScrape measures the server time of one GET /metrics (every
// collector, the outbox query included) with 100,000 events in the file.
// The budget is 10 ms. "steady" is a healthy outbox; "backlog" is the worst
// case for the outbox query: the destination has been down and every one of
// the 100,000 jobs is pending.
// scrapeCases are the outboxes the scrape benchmarks run against, each in a
// database of 100,000 events.
var scrapeCases = []struct {
	name          string
	pending, dead int
}{
	{"steady", 200, 50},
	{"backlog", 100_000, 0},
}

// openFilled opens a store on a database filled for one case.
func openFilled(b *testing.B, pending, dead int) *sqlitestore.Store {
	path := filepath.Join(b.TempDir(), "hw.db")
	fillDB(b, path, 100_000, pending, dead)
	st, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func BenchmarkScrape(b *testing.B) {
	for _, c := range scrapeCases {
		b.Run(c.name, func(b *testing.B) {
			st := openFilled(b, c.pending, c.dead)
			m := metrics.New(nil)
			dests := []string{"s/app", "s/notify"}
			m.RegisterOutbox(st, dests)
			m.RegisterReady(func(context.Context) error { return st.Healthy() })
			m.InitSource("s")
			for _, d := range dests {
				m.InitDestination(d)
			}
			h := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			scrape := func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("scrape: %d %s", rec.Code, rec.Body)
				}
			}
			scrape()
			if got := mustValue(b, m.Registry, "hookwarden_outbox_pending", "destination", "s/app"); got != float64(c.pending) {
				b.Fatalf("outbox_pending = %v, want %d", got, c.pending)
			}
			start := time.Now()
			n := 0
			for b.Loop() {
				scrape()
				n++
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(n), "ms/scrape")
		})
	}
}

// BenchmarkOutboxRefresh is the background cost behind the outbox gauges:
// one OutboxStats read, paid every refresh period instead of per scrape.
func BenchmarkOutboxRefresh(b *testing.B) {
	for _, c := range scrapeCases {
		b.Run(c.name, func(b *testing.B) {
			st := openFilled(b, c.pending, c.dead)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := st.OutboxStats(context.Background(), []string{"s/app", "s/notify"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
