package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// migrationsDir is the source of sqlitestore's embedded migrations.
const migrationsDir = "../../sqlitestore/migrations"

type migrationFile struct {
	version int
	name    string
	sql     string
}

// shippedMigrations reads every migration the store embeds, in order.
func shippedMigrations(t *testing.T) []migrationFile {
	t.Helper()
	names, err := fs.Glob(os.DirFS(migrationsDir), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var ms []migrationFile
	for _, n := range names {
		num, _, _ := strings.Cut(n, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			t.Fatalf("migration %s: no version prefix", n)
		}
		b, err := os.ReadFile(filepath.Join(migrationsDir, n))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, migrationFile{v, n, string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	if len(ms) != sqlitestore.SchemaVersion() {
		t.Fatalf("%d migration files in %s, but the store embeds schema version %d", len(ms), migrationsDir, sqlitestore.SchemaVersion())
	}
	return ms
}

// MustOpenRaw opens a database file with no hookwarden code in between, as
// an older release would have left it; params are extra DSN parameters.
func MustOpenRaw(tb testing.TB, path string, params ...string) *sql.DB {
	tb.Helper()
	dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)"
	for _, p := range params {
		dsn += "&" + p
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

// TestUpgradeFromEverySchemaVersion builds a database at every schema version
// the project has shipped (migrations 1..N, as that release ran them), fills
// it with representative rows (upgradeRows), then opens it with the current
// code: the migrations run forward, every row and every value of the old
// schema is still there (converted where a migration changed its encoding:
// the same instant), and the store works on it: the dedup memory holds, due
// and expired-lease jobs are delivered with their bodies, dead letters stay
// dead, a folded event keeps its summary.
func TestUpgradeFromEverySchemaVersion(t *testing.T) {
	ms := shippedMigrations(t)
	for n := 1; n <= len(ms); n++ {
		t.Run(fmt.Sprintf("from_v%d", n), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			db := MustOpenRaw(t, path)
			for _, m := range ms[:n] {
				// As sqlitestore's migrate runs a rebuild of a table others refer to.
				fkOff := strings.Contains(m.sql, "-- hookwarden: foreign_keys off")
				if fkOff {
					if _, err := db.Exec("PRAGMA foreign_keys = OFF"); err != nil {
						t.Fatal(err)
					}
				}
				tx, err := db.Begin()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(m.sql); err != nil {
					t.Fatalf("apply %s: %v", m.name, err)
				}
				if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if fkOff {
					if _, err := db.Exec("PRAGMA foreign_keys = ON"); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, f := range upgradeRows(t, n) {
				b, err := os.ReadFile(filepath.Join("testdata", "upgrade", f))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(string(b)); err != nil {
					t.Fatalf("representative rows %s on schema v%d: %v "+
						"(a migration changed what an insert needs: end the old file's range, vK-M.sql, and add testdata/upgrade/v%d.sql)",
						f, n, err, n)
				}
			}
			before := snapshot(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			ctx := context.Background()
			st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatalf("open a v%d database with the current code: %v", n, err)
			}
			defer st.Close()

			var version int
			if err := st.DB().QueryRow("PRAGMA user_version").Scan(&version); err != nil {
				t.Fatal(err)
			}
			if version != sqlitestore.SchemaVersion() {
				t.Fatalf("schema version after open = %d, want %d", version, sqlitestore.SchemaVersion())
			}
			after := snapshot(t, st.DB())
			compareSnapshots(t, before, after, n)
			var check string
			if err := st.DB().QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
				t.Fatalf("integrity_check = %q, %v", check, err)
			}
			if rows, err := st.DB().Query("PRAGMA foreign_key_check"); err != nil {
				t.Fatal(err)
			} else {
				bad := rows.Next()
				rows.Close()
				if bad {
					t.Fatal("foreign_key_check found dangling references after the upgrade")
				}
			}
			checkStoreWorks(t, st)
			if n >= 5 {
				checkFoldedSummary(t, st)
			}
			checkPruneWorks(t, st)
		})
	}
}

// upgradeRows lists the files of representative rows for schema version n,
// in version order: vK.sql applies to every version from K on, vK-M.sql to
// versions K to M (rows whose encoding a later migration changed; the file
// for M+1 on holds them in the new encoding). v1.sql must exist.
func upgradeRows(t *testing.T, n int) []string {
	t.Helper()
	names, err := fs.Glob(os.DirFS(filepath.Join("testdata", "upgrade")), "v*.sql")
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		name     string
		from, to int
	}
	var files []file
	for _, name := range names {
		r := strings.TrimSuffix(strings.TrimPrefix(name, "v"), ".sql")
		lo, hi, ranged := strings.Cut(r, "-")
		from, err := strconv.Atoi(lo)
		if err != nil {
			t.Fatalf("testdata/upgrade/%s: want vK.sql or vK-M.sql", name)
		}
		to := 1 << 30
		if ranged {
			if to, err = strconv.Atoi(hi); err != nil || to < from {
				t.Fatalf("testdata/upgrade/%s: want vK.sql or vK-M.sql, K <= M", name)
			}
		}
		files = append(files, file{name, from, to})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].from < files[j].from })
	if len(files) == 0 || files[0].name != "v1.sql" {
		t.Fatal("testdata/upgrade/v1.sql is missing")
	}
	var out []string
	for _, f := range files {
		if f.from <= n && n <= f.to {
			out = append(out, f.name)
		}
	}
	return out
}

// checkFoldedSummary reads evt_folded (v5-7.sql, v8.sql) through the store:
// the instants written as Unix seconds before schema 8 and as text since
// are the same after the upgrade.
func checkFoldedSummary(t *testing.T, st *sqlitestore.Store) {
	t.Helper()
	d, err := st.ShowEvent(context.Background(), "stripe", "evt_folded")
	if err != nil {
		t.Fatal(err)
	}
	if !d.SummaryOnly || !d.PrunedAt.Equal(time.Unix(1735689600, 0)) || !d.LastReceivedAt.Equal(time.Unix(1733011260, 0)) ||
		!d.DeliveredAt.Equal(time.Unix(1733011205, 0)) || d.Receipts != 2 || d.Jobs != 1 || d.Attempts != 1 {
		t.Errorf("evt_folded after the upgrade: %+v", d.EventSummary)
	}
}

// checkStoreWorks drives the upgraded file through the store's own API.
func checkStoreWorks(t *testing.T, st *sqlitestore.Store) {
	t.Helper()
	ctx := context.Background()
	body := []byte(`{"id":"evt_pending","type":"invoice.paid"}`)
	for _, id := range []string{"evt_pending", "evt_delivered", "evt_dead"} {
		res, err := st.Record(ctx, &hookwarden.Receipt{Source: "stripe", Header: map[string][]string{"Content-Type": {"application/json"}},
			Body: body, RemoteAddr: "127.0.0.1:1", ReceivedAt: time.Now(),
			Events: []hookwarden.Event{{ID: id, Type: "invoice.paid", Destinations: []string{"stripe/app"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != hookwarden.Duplicate {
			t.Errorf("event %s claimed before the upgrade: outcome %s, want duplicate (dedup memory lost)", id, res.Outcome)
		}
	}
	jobs, err := st.Lease(ctx, "stripe/app", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].EventID != "evt_pending" || !bytes.Equal(jobs[0].Body, body) ||
		jobs[0].ContentType != "application/json" || jobs[0].IdempotencyKey() != "stripe:evt_pending" {
		t.Fatalf("due stripe/app jobs after upgrade = %+v, want evt_pending with its body", jobs)
	}
	sg, err := st.Lease(ctx, "sendgrid/app", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"sg_event_id":"sg_1","event":"delivered"}`; len(sg) != 1 || sg[0].EventID != "sg_1" || string(sg[0].Body) != want {
		t.Fatalf("expired-lease batch job after upgrade = %+v, want sg_1 with its element body", sg)
	}
	if err := st.Finish(ctx, hookwarden.Attempt{JobID: jobs[0].ID, Number: jobs[0].Attempt, StartedAt: time.Now(),
		ExitCode: -1, StatusCode: 200, Verdict: hookwarden.Delivered}); err != nil {
		t.Fatal(err)
	}
	stats, err := st.OutboxStats(ctx, []string{"stripe/app"})
	if err != nil {
		t.Fatal(err)
	}
	var app *hookwarden.OutboxStat
	for i := range stats {
		if stats[i].Destination == "stripe/app" {
			app = &stats[i]
		}
	}
	if app == nil || app.Dead != 1 || app.Pending != 0 {
		t.Fatalf("outbox after upgrade = %+v, want stripe/app with 1 dead, 0 pending", stats)
	}
	run, err := st.StartRun(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Heartbeat(ctx, run); err != nil {
		t.Fatal(err)
	}
}

// checkPruneWorks applies the payload tier to the upgraded file, where
// everything is older than the retention: finished events are folded into
// their claims, the others held, and the counts of stats do not move.
func checkPruneWorks(t *testing.T, st *sqlitestore.Store) {
	t.Helper()
	ctx := context.Background()
	before, err := st.Stats(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	// evt_delivered, evt_pending (delivered by checkStoreWorks) and sg_2;
	// evt_dead is dead, sg_1 in flight.
	if res.PayloadsPruned != 3 || res.HeldDead != 1 || res.HeldPending != 1 {
		t.Errorf("prune after the upgrade: %+v, want 3 events folded, 1 dead and 1 pending held", res)
	}
	after, err := st.Stats(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	after.At = before.At
	for _, st := range []*hookwarden.Stats{&before, &after} {
		for i := range st.Destinations { // ages move with the real clock
			st.Destinations[i].OldestPendingAge, st.Destinations[i].OldestPendingSeconds = 0, 0
		}
	}
	if fmt.Sprintf("%+v", after) != fmt.Sprintf("%+v", before) {
		t.Errorf("stats moved across the prune:\nbefore %+v\n after %+v", before, after)
	}
	d, err := st.ShowEvent(ctx, "stripe", "evt_delivered")
	if err != nil {
		t.Fatal(err)
	}
	// The accepted receipt, a duplicate and a divergent copy before the
	// upgrade, the duplicate of checkStoreWorks after it.
	if !d.SummaryOnly || d.Receipts != 4 || d.Jobs != 1 || d.Attempts != 1 || d.Status != hookwarden.StatusDelivered || d.Body != nil {
		t.Errorf("evt_delivered after pruning: %+v", d.EventSummary)
	}
	sg, err := st.ShowEvent(ctx, "sendgrid", "sg_1")
	if err != nil || sg.SummaryOnly || len(sg.ReceiptLog) != 1 {
		t.Errorf("sg_1 (in flight) lost its batch: %+v %v", sg, err)
	}
}

// table is one table's rows in rowid (or primary key) order, each a map of
// column to value.
type table struct {
	cols []string
	rows []map[string]any
}

func snapshot(t *testing.T, db *sql.DB) map[string]table {
	t.Helper()
	names := []string{}
	rows, err := db.Query(`SELECT name, sql LIKE '%WITHOUT ROWID%' FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	withoutRowid := map[string]bool{}
	for rows.Next() {
		var n string
		var wr bool
		if err := rows.Scan(&n, &wr); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
		withoutRowid[n] = wr
	}
	rows.Close()
	out := map[string]table{}
	for _, n := range names {
		order := "rowid"
		if withoutRowid[n] {
			order = "1, 2" // the primary keys here lead with their first two columns
		}
		rows, err := db.Query(fmt.Sprintf(`SELECT * FROM %q ORDER BY %s`, n, order))
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		tb := table{cols: cols}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			row := map[string]any{}
			for i, c := range cols {
				if b, ok := vals[i].([]byte); ok {
					vals[i] = string(b) // compare blobs and text alike
				}
				row[c] = vals[i]
			}
			tb.rows = append(tb.rows, row)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		out[n] = tb
	}
	return out
}

// textTime is a time as the schema stores it since version 1 (every column
// since version 8).
func textTime(unix int64) string {
	return time.Unix(unix, 0).UTC().Format("2006-01-02T15:04:05.000000Z")
}

// converted gives, for a row of table as schema version from held it, the
// values the upgrade must have changed, as they must read now: schema 8 turned
// the Unix seconds of schema 5 into text (the same instant) and retired the
// integer columns.
func converted(from int, table string, row map[string]any) map[string]any {
	if from < 5 || from >= 8 {
		return nil
	}
	out := map[string]any{}
	switch table {
	case "events":
		for _, c := range []string{"pruned_at", "last_received_at", "delivered_at"} {
			if v, ok := row[c].(int64); ok {
				out[c] = textTime(v)
			}
			out["retired_"+c] = nil
		}
	case "pruned_totals":
		if k := row["kind"]; k == "last_received" || k == "last_accepted" {
			out["n"], out["at"] = int64(0), textTime(row["n"].(int64))
		} else {
			out["at"] = nil
		}
	}
	return out
}

// compareMoved checks that every row of a table a migration replaced is in
// its successor, by the columns both have (schema 16 moved claims_recent's
// claims into claims_log).
func compareMoved(t *testing.T, old, cur table, cols ...string) {
	t.Helper()
	key := func(row map[string]any) string {
		var b strings.Builder
		for _, c := range cols {
			fmt.Fprintf(&b, "%v\x00", row[c])
		}
		return b.String()
	}
	have := map[string]bool{}
	for _, row := range cur.rows {
		have[key(row)] = true
	}
	if len(old.rows) == 0 {
		t.Errorf("a moved table has no representative row: add one to testdata/upgrade/")
	}
	for _, row := range old.rows {
		if !have[key(row)] {
			t.Errorf("row %v was not moved by the upgrade", row)
		}
	}
}

// compareSnapshots checks that every row of every old table survived with
// every old column's value (converted, where schema version from stored it
// in an encoding a later migration changed); other new columns and new
// tables may hold anything.
func compareSnapshots(t *testing.T, before, after map[string]table, from int) {
	t.Helper()
	for name, old := range before {
		if name == "claims_recent" && from <= 15 {
			compareMoved(t, old, after["claims_log"], "source", "event_id", "event_ref")
			continue
		}
		if name == "claims_filter" && from >= 17 && from <= 18 {
			// Schema 19 replaced the one row (id 1) by slots: the row is
			// slot 0's, bits inline.
			compareMoved(t, old, after[name], "hash", "size", "keys", "bits")
			continue
		}
		cur, ok := after[name]
		if !ok {
			t.Errorf("table %s was dropped by the upgrade (update this test if that was meant)", name)
			continue
		}
		if len(old.rows) == 0 && name != "sqlite_sequence" {
			t.Errorf("table %s has no representative row: add one to testdata/upgrade/", name)
		}
		if len(cur.rows) != len(old.rows) {
			t.Errorf("table %s: %d rows before the upgrade, %d after", name, len(old.rows), len(cur.rows))
			continue
		}
		for i, row := range old.rows {
			conv := converted(from, name, row)
			for _, c := range old.cols {
				got, ok := cur.rows[i][c]
				if !ok {
					t.Errorf("table %s: column %s was dropped by the upgrade", name, c)
					continue
				}
				want, changed := conv[c]
				if !changed {
					want = row[c]
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("table %s row %d column %s: %v before the upgrade, %v after, want %v", name, i+1, c, row[c], got, want)
				}
			}
			for c, want := range conv {
				if _, old := row[c]; old {
					continue
				}
				if got, ok := cur.rows[i][c]; !ok || !reflect.DeepEqual(got, want) {
					t.Errorf("table %s row %d new column %s: %v after the upgrade, want %v", name, i+1, c, got, want)
				}
			}
		}
	}
}
