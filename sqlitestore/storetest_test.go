package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
	"github.com/hookwarden/hookwarden/storetest"
)

// TestConformance runs the store contract's suite over SQLite files.
func TestConformance(t *testing.T) {
	conformance(t, sqlitestore.Options{})
}

// TestConformanceFolding runs it again with the writer folding the log's
// claims into the large level after nearly every commit, so that the
// suite's duplicates, look-ups, replays and retention meet claims in both
// levels of the dedup memory and in a generation between its fold and its
// drop.
func TestConformanceFolding(t *testing.T) {
	conformance(t, sqlitestore.Options{Fold: true, FoldMin: 1, FoldChunk: 2})
}

func conformance(t *testing.T, opts sqlitestore.Options) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, now func() time.Time) storetest.Store {
			o := opts
			o.Now = now
			s := open(t, filepath.Join(t.TempDir(), "hw.db"), o)
			if o.Fold {
				sqlitestore.WaitFilter(t, s) // the writer claims through the filter
			}
			return s
		},
		// As the --db commands open a file.
		OpenCopy: func(t *testing.T, path string, now func() time.Time) storetest.Store {
			return open(t, path, sqlitestore.Options{Now: now, ReadOnly: true})
		},
		RefuseJobs: refuseJobs,
		FullCount: func(t *testing.T, st storetest.Store, now time.Time) (storetest.Stats, map[string][]storetest.HourCount) {
			if opts.Fold {
				// After every operation: the filter holds both levels.
				sqlitestore.WaitFilter(t, st.(*sqlitestore.Store))
			}
			return fullCount(t, st, now)
		},
		FillHistory: func(t *testing.T, s storetest.Store, h hookwarden.History) error {
			return s.(*sqlitestore.Store).FillHistory(context.Background(), h, nil)
		},
	})
}

// fullCount counts what Stats and Hourly must say by reading every row, as
// Stats did before the counters (schema 8): live rows grouped, plus what
// retention folded into pruned_totals.
func fullCount(t *testing.T, st storetest.Store, now time.Time) (storetest.Stats, map[string][]storetest.HourCount) {
	t.Helper()
	db := st.(*sqlitestore.Store).DB()
	checkMinutely(t, db, now)
	checkRequestHours(t, db)
	sqlitestore.CheckDedupMemory(t, db)
	out := storetest.Stats{At: now}
	src := map[string]*hookwarden.SourceStats{}
	source := func(n string) *hookwarden.SourceStats {
		if src[n] == nil {
			src[n] = &hookwarden.SourceStats{Source: n}
		}
		return src[n]
	}
	rows, err := db.Query(`
SELECT source, 'events', count(*), NULL FROM events GROUP BY source
UNION ALL SELECT source, kind, count(*), max(received_at) FROM receipts GROUP BY source, kind
UNION ALL SELECT r.source, 'batch-' || re.kind, count(*), NULL
	FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.kind != 'accepted' GROUP BY r.source, re.kind
UNION ALL SELECT source, 'quarantine', sum(count), max(last_at) FROM quarantine GROUP BY source
UNION ALL SELECT name, 'pruned-' || kind, n, CASE WHEN kind = 'last_received' THEN at END FROM pruned_totals WHERE kind != 'delivered'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, kind string
		var n int
		var last sql.NullString
		if err := rows.Scan(&name, &kind, &n, &last); err != nil {
			t.Fatal(err)
		}
		ss := source(name)
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
		if last.Valid {
			at, err := time.Parse("2006-01-02T15:04:05.000000Z", last.String)
			if err != nil {
				t.Fatal(err)
			}
			if at.After(ss.LastReceivedAt) {
				ss.LastReceivedAt = at
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for _, ss := range src {
		out.Sources = append(out.Sources, *ss)
	}
	rows, err = db.Query(`
SELECT destination, sum(p), sum(d), sum(x), min(o) FROM (
	SELECT destination, state = 'pending' AS p, state = 'delivered' AS d, state = 'dead' AS x,
		CASE WHEN state = 'pending' THEN COALESCE(replayed_at, created_at) END AS o FROM jobs
	UNION ALL SELECT name, 0, n, 0, NULL FROM pruned_totals WHERE kind = 'delivered')
GROUP BY destination`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d hookwarden.OutboxStat
		var oldest sql.NullString
		if err := rows.Scan(&d.Destination, &d.Pending, &d.Delivered, &d.Dead, &oldest); err != nil {
			t.Fatal(err)
		}
		if oldest.Valid {
			at, err := time.Parse("2006-01-02T15:04:05.000000Z", oldest.String)
			if err != nil {
				t.Fatal(err)
			}
			d.OldestPendingAge = max(now.Sub(at), 0)
			d.OldestPendingSeconds = d.OldestPendingAge.Seconds()
		}
		out.Destinations = append(out.Destinations, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	hours := map[string][]storetest.HourCount{}
	hrows, err := db.Query(`
SELECT source, hour, sum(a), sum(d) FROM (
	SELECT source, substr(claimed_at, 1, 13) AS hour, 1 AS a, 0 AS d FROM events
	UNION ALL SELECT source, substr(received_at, 1, 13), 0, 1 FROM receipts WHERE kind IN ('duplicate', 'divergent')
	UNION ALL SELECT r.source, substr(r.received_at, 1, 13), 0, 1 FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
		WHERE re.kind IN ('duplicate', 'divergent'))
GROUP BY source, hour ORDER BY source, hour`)
	if err != nil {
		t.Fatal(err)
	}
	defer hrows.Close()
	for hrows.Next() {
		var name, hour string
		var c storetest.HourCount
		if err := hrows.Scan(&name, &hour, &c.Accepted, &c.Duplicates); err != nil {
			t.Fatal(err)
		}
		if c.Hour, err = time.Parse("2006-01-02T15", hour); err != nil {
			t.Fatal(err)
		}
		hours[name] = append(hours[name], c)
	}
	if err := hrows.Err(); err != nil {
		t.Fatal(err)
	}
	return out, hours
}

func open(t *testing.T, path string, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return s
}

// refuseJobs makes every job insert fail with a trigger, written through a
// connection of its own: the store's writer sees the schema change at its
// next transaction.
func refuseJobs(t *testing.T, st storetest.Store) func() {
	t.Helper()
	path := st.(*sqlitestore.Store).Path()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TRIGGER storetest_refuse_jobs BEFORE INSERT ON jobs BEGIN SELECT RAISE(ABORT, 'jobs refused'); END`); err != nil {
		t.Fatalf("create trigger: %v", err)
	}
	return func() {
		if _, err := db.Exec(`DROP TRIGGER storetest_refuse_jobs`); err != nil {
			t.Fatalf("drop trigger: %v", err)
		}
	}
}

// checkMinutely fails unless the counts per minute of each hour whose
// minutes are all kept (hookwarden.MinuteCountsKeep before now) add up to
// the hour's count: both count what was recorded, and the counters case
// checks hourly against the rows (minute by minute, the recent windows'
// cases check them).
func checkMinutely(t *testing.T, db *sql.DB, now time.Time) {
	t.Helper()
	from := now.Add(-hookwarden.MinuteCountsKeep).UTC()
	hour := from.Truncate(time.Hour)
	if hour.Before(from) {
		hour = hour.Add(time.Hour)
	}
	rows, err := db.Query(`
WITH m AS (SELECT source, substr(minute, 1, 13) AS hour, sum(accepted) AS a, sum(duplicates) AS d FROM minutely
	WHERE minute >= ?1 GROUP BY 1, 2 HAVING a != 0 OR d != 0),
h AS (SELECT source, hour, accepted AS a, duplicates AS d FROM hourly WHERE hour >= ?1 AND (accepted != 0 OR duplicates != 0))
SELECT 'minutely', * FROM (SELECT * FROM m EXCEPT SELECT * FROM h)
UNION ALL SELECT 'hourly', * FROM (SELECT * FROM h EXCEPT SELECT * FROM m)`, hour.Format("2006-01-02T15"))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var side, source, h string
		var a, d int
		if err := rows.Scan(&side, &source, &h, &a, &d); err != nil {
			t.Fatal(err)
		}
		t.Errorf("minutely and hourly differ: %s alone has %s %s accepted %d duplicates %d", side, source, h, a, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// checkRequestHours: request_hours (schema 18) tells the first and last
// request of every source and hour that gaps reads, those after the hour
// of the last request retention deleted (pruned_totals' last_received):
// from there on every receipt is still in the file, and the rows match
// them exactly, with no hour the receipts do not have.
func checkRequestHours(t *testing.T, db *sql.DB) {
	t.Helper()
	rows, err := db.Query(`
WITH seed AS (SELECT name AS source, substr(at, 1, 13) AS hour FROM pruned_totals WHERE kind = 'last_received'),
r AS (SELECT source, substr(received_at, 1, 13) AS hour, min(received_at) AS a, max(received_at) AS b FROM receipts GROUP BY 1, 2),
q AS (SELECT source, hour, first_at AS a, last_at AS b FROM request_hours)
SELECT 'receipts', * FROM (SELECT * FROM r EXCEPT SELECT * FROM q) x
	WHERE x.hour > COALESCE((SELECT s.hour FROM seed s WHERE s.source = x.source), '')
UNION ALL SELECT 'request_hours', * FROM (SELECT * FROM q EXCEPT SELECT * FROM r) y
	WHERE y.hour > COALESCE((SELECT s.hour FROM seed s WHERE s.source = y.source), '')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var side, source, h, a, b string
		if err := rows.Scan(&side, &source, &h, &a, &b); err != nil {
			t.Fatal(err)
		}
		t.Errorf("request_hours and receipts differ: %s alone has %s %s first %s last %s", side, source, h, a, b)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}
