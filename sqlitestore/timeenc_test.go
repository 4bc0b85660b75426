package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// openAtVersion creates a database file at schema version v, as that
// release's migrations left it, with no store code in between, and returns
// it open on one raw connection.
func openAtVersion(tb testing.TB, path string, v int) *sql.DB {
	tb.Helper()
	ms, err := loadMigrations()
	if err != nil {
		tb.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, m := range ms[:v] {
		if _, err := db.Exec(m.SQL); err != nil {
			tb.Fatalf("apply %s: %v", m.Name, err)
		}
		if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
			tb.Fatal(err)
		}
	}
	return db
}

// TestSchema8TimesAreText: a file of schema 7 holding the summary of a
// pruned event and the pruned totals as Unix seconds reads back the same
// instants after the upgrade, through the store and through the documented
// queries; the values are text like every other time, the retired integer
// columns NULL, and a later prune keeps the latest of old and new.
func TestSchema8TimesAreText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v7.db")
	db := openAtVersion(t, path, 7)
	const (
		claimed  = "2024-12-01T00:00:00.000000Z"
		pruned   = 1735689600 // 2025-01-01T00:00:00Z
		lastRecv = 1733011260 // 2024-12-01T00:01:00Z
		deliv    = 1733011205 // 2024-12-01T00:00:05Z
	)
	if _, err := db.Exec(`
INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256, body,
	pruned_at, receipts, jobs, attempts, last_received_at, delivered_at) VALUES
	(1, 'stripe', 'evt_folded', 'invoice.paid', ?1, x'', NULL, ?2, 2, 1, 1, ?3, ?4),
	(2, 'stripe', 'evt_nojobs', 'ping', ?1, x'', NULL, ?2, 1, 0, 0, ?3, NULL),
	(3, 'stripe', 'evt_live', 'invoice.paid', '2025-01-05T00:00:00.000000Z', x'00', NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO pruned_totals (name, kind, n) VALUES
	('stripe', 'duplicate', 1), ('stripe', 'last_received', ?3), ('stripe', 'last_accepted', 1733011200),
	('stripe/app', 'delivered', 1);`, claimed, pruned, lastRecv, deliv); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	c := newTestClock() // 2026-03-01T12:00:00Z
	s, err := Open(context.Background(), path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// The upgrade leaves no WAL behind (a large one would stay that size).
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() != 0 {
		t.Errorf("WAL after the upgrade: %v %v, want empty", fi, err)
	}

	// The columns hold text; the retired ones nothing.
	var p, l, d sql.NullString
	var retired int
	if err := s.DB().QueryRow(`SELECT pruned_at, last_received_at, delivered_at,
		(retired_pruned_at IS NOT NULL) + (retired_last_received_at IS NOT NULL) + (retired_delivered_at IS NOT NULL)
		FROM events WHERE id = 1`).Scan(&p, &l, &d, &retired); err != nil {
		t.Fatal(err)
	}
	if p.String != "2025-01-01T00:00:00.000000Z" || l.String != "2024-12-01T00:01:00.000000Z" ||
		d.String != "2024-12-01T00:00:05.000000Z" || retired != 0 {
		t.Errorf("converted summary: %v %v %v, %d retired values left", p, l, d, retired)
	}
	if n := count(t, s, `SELECT count(*) FROM events WHERE typeof(pruned_at) = 'integer' OR typeof(last_received_at) = 'integer'
		OR typeof(delivered_at) = 'integer'`); n != 0 {
		t.Errorf("%d events still hold integer times", n)
	}
	if n := count(t, s, `SELECT count(*) FROM events WHERE pruned_at IS NULL AND id = 3 AND last_received_at IS NULL`); n != 1 {
		t.Error("an event never pruned gained a summary")
	}
	if n := count(t, s, `SELECT count(*) FROM pruned_totals WHERE kind LIKE 'last_%' AND n = 0 AND at GLOB '????-??-??T??:??:??.??????Z'`); n != 2 {
		t.Errorf("pruned_totals times converted: %d of 2", n)
	}
	if n := count(t, s, `SELECT count(*) FROM pruned_totals WHERE kind NOT LIKE 'last_%' AND at IS NULL AND n = 1`); n != 2 {
		t.Errorf("pruned_totals counts kept: %d of 2", n)
	}

	// The store reads the same instants.
	ev, err := s.ShowEvent(ctx, "stripe", "evt_folded")
	if err != nil {
		t.Fatal(err)
	}
	if !ev.SummaryOnly || !ev.PrunedAt.Equal(time.Unix(pruned, 0)) || !ev.LastReceivedAt.Equal(time.Unix(lastRecv, 0)) ||
		!ev.DeliveredAt.Equal(time.Unix(deliv, 0)) || ev.Receipts != 2 || ev.Jobs != 1 || ev.Attempts != 1 {
		t.Errorf("evt_folded after the upgrade: %+v", ev.EventSummary)
	}
	if ev, err := s.ShowEvent(ctx, "stripe", "evt_nojobs"); err != nil || !ev.DeliveredAt.IsZero() || !ev.SummaryOnly {
		t.Errorf("evt_nojobs after the upgrade: %+v %v", ev, err)
	}
	st, err := s.Stats(ctx, []string{"stripe"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sources) != 1 || !st.Sources[0].LastReceivedAt.Equal(time.Unix(lastRecv, 0)) || st.Sources[0].Duplicates != 1 {
		t.Errorf("stats after the upgrade: %+v", st.Sources)
	}
	la, err := s.LastAccepted(ctx, []string{"stripe"})
	if err != nil || !la["stripe"].Equal(time.Unix(1733011200, 0)) {
		t.Errorf("last accepted after the upgrade: %v %v", la, err)
	}
	g, err := s.Gaps(ctx, hookwarden.GapOptions{Sources: []hookwarden.SourcePolicy{{Name: "stripe", ExpectWithin: time.Hour, RetryHorizon: time.Hour}}})
	if err != nil || len(g.Silences) != 1 || !g.Silences[0].Start.Equal(time.Unix(lastRecv, 0)) {
		t.Errorf("silence after the upgrade starts at the last pruned request: %+v %v", g.Silences, err)
	}
	r, err := s.Replay(ctx, hookwarden.ReplaySelector{Source: "stripe", EventIDs: []string{"evt_folded"}}, hookwarden.ReplayOptions{})
	if err != nil || len(r.Skipped) != 1 || r.Skipped[0].Reason != hookwarden.SkipPruned || !r.Skipped[0].PrunedAt.Equal(time.Unix(pruned, 0)) {
		t.Errorf("replay of a pruned event after the upgrade: %+v %v", r, err)
	}

	// The documented queries 15 and 16 show the converted rows.
	qs := forensicQueries(t)
	for _, q := range []struct {
		n    int
		want string
	}{
		{15, "evt_folded | invoice.paid | 2024-12-01T00:00:00.000000Z | 2025-01-01T00:00:00.000000Z | 2 | 1 | 1 | " +
			"2024-12-01T00:01:00.000000Z | 2024-12-01T00:00:05.000000Z"},
		{16, "stripe | last_accepted | 2024-12-01T00:00:00.000000Z\nstripe | last_received | 2024-12-01T00:01:00.000000Z"},
	} {
		if got := queryText(t, s.DB(), qs[q.n-1]); !strings.Contains(got, q.want) {
			t.Errorf("query %d on the upgraded file: no %q in\n%s", q.n, q.want, got)
		}
	}

	// A prune after the upgrade folds into the converted rows: the latest
	// of old and new wins, as text.
	c.Add(-400 * 24 * time.Hour) // record in early 2025
	o := &ops{t: t, s: s, clock: c, ctx: ctx}
	o.record("stripe", "evt_new", `{"id":"evt_new"}`, "stripe/app")
	o.finish("stripe/app", "evt_new", hookwarden.Delivered)
	c.Add(400 * 24 * time.Hour)
	if res, err := s.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: time.Hour}}); err != nil || res.PayloadsPruned != 2 {
		t.Fatalf("prune after the upgrade: %+v %v", res, err) // evt_live has no jobs: pruned too
	}
	var at string
	if err := s.DB().QueryRow(`SELECT at FROM pruned_totals WHERE name = 'stripe' AND kind = 'last_received'`).Scan(&at); err != nil {
		t.Fatal(err)
	}
	if want := fmtTime(c.Now().Add(-400 * 24 * time.Hour)); at != want {
		t.Errorf("last_received after a new prune = %s, want %s", at, want)
	}
	if ev, err := s.ShowEvent(ctx, "stripe", "evt_new"); err != nil || !ev.PrunedAt.Equal(c.Now()) || ev.DeliveredAt.IsZero() {
		t.Errorf("evt_new pruned after the upgrade: %+v %v", ev, err)
	}
}

// queryText runs q and prints its rows as "a | b | c" lines.
func queryText(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var cells []string
		for _, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			cells = append(cells, fmt.Sprint(v))
		}
		out = append(out, strings.Join(cells, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

// TestMigration8Cost times the upgrade to schema 8 on a large file:
// HOOKWARDEN_MIGRATE_PRUNED pruned events (with integer summaries) and
// HOOKWARDEN_MIGRATE_LIVE events not pruned. It only reports (no time is
// asserted); without the variables it is skipped.
func TestMigration8Cost(t *testing.T) {
	pruned, _ := strconv.Atoi(os.Getenv("HOOKWARDEN_MIGRATE_PRUNED"))
	live, _ := strconv.Atoi(os.Getenv("HOOKWARDEN_MIGRATE_LIVE"))
	if pruned+live == 0 {
		t.Skip("set HOOKWARDEN_MIGRATE_PRUNED and/or HOOKWARDEN_MIGRATE_LIVE (event counts) to measure")
	}
	dir := t.TempDir()
	if d := os.Getenv("HOOKWARDEN_MIGRATE_DIR"); d != "" {
		dir = d
	}
	path := filepath.Join(dir, "v7.db")
	db := openAtVersion(t, path, 7)
	if _, err := db.Exec(`
INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256, body,
	pruned_at, receipts, jobs, attempts, last_received_at, delivered_at)
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?1)
SELECT i, 'stripe', 'evt_' || hex(randomblob(12)), 'invoice.paid', strftime('%Y-%m-%dT%H:%M:%S.000000Z', 1700000000 + i, 'unixepoch'),
	x'', NULL, 1700000000 + i + 2592000, 1, 1, 1, 1700000000 + i, 1700000000 + i + 1 FROM c;
INSERT INTO events (id, source, event_id, event_type, claimed_at, body_sha256, body)
WITH RECURSIVE c(i) AS (SELECT ?1 + 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?1 + ?2)
SELECT i, 'stripe', 'evt_' || hex(randomblob(12)), 'invoice.paid', strftime('%Y-%m-%dT%H:%M:%S.000000Z', 1700000000 + i, 'unixepoch'),
	randomblob(32), NULL FROM c WHERE ?2 > 0;
PRAGMA wal_checkpoint(TRUNCATE);`, pruned, live); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	start := time.Now()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	var wal int64
	if fi, err := os.Stat(path + "-wal"); err == nil {
		wal = fi.Size()
	}
	compact := filepath.Join(dir, "compact.db")
	if err := s.Backup(context.Background(), compact, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	fi, err := os.Stat(compact)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upgrade to schema 8: %d pruned + %d live events: %.1fs; file %.1f MiB before, WAL %.1f MiB after, compact copy %.1f MiB",
		pruned, live, took.Seconds(), float64(before)/(1<<20), float64(wal)/(1<<20), float64(fi.Size())/(1<<20))
}
