package torture

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"

	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// The store dimension: every scenario body takes a storeKind and runs once
// per store, as the subtests sqlite and postgres of its Test function
// (`-run 'TestPowerLoss/postgres'` for one). A scenario reads the database
// only through testDB, so the same body checks the same promises on both.

type storeKind string

const (
	onSQLite   storeKind = "sqlite"
	onPostgres storeKind = "postgres"
)

// forEachStore runs body as one subtest per store.
func forEachStore(t *testing.T, body func(t *testing.T, k storeKind)) {
	for _, k := range []storeKind{onSQLite, onPostgres} {
		t.Run(string(k), func(t *testing.T) { body(t, k) })
	}
}

// scenario is a row's name on store k: SQLite's rows keep their names.
func scenario(name string, k storeKind) string {
	if k == onPostgres {
		return name + " (PostgreSQL)"
	}
	return name
}

// testDB is a scenario's database: an SQLite file, or a database in a
// throwaway PostgreSQL cluster of the scenario's own.
type testDB struct {
	t       testing.TB
	kind    storeKind
	path    string // SQLite: the file
	url     string // PostgreSQL: the database
	cluster *pgtest.Cluster
	dir     string // where the data lives: the file's directory, or the cluster's data directory
}

// newDB makes the database of a scenario under dir (a test's temporary
// directory, or a tmpfs or loop mount made by sharedDir for the postgres
// user to reach); a cluster takes extra settings. For PostgreSQL, dir ""
// lets pgtest choose.
func newDB(t testing.TB, k storeKind, dir string, extra ...pgtest.Settings) *testDB {
	t.Helper()
	d := &testDB{t: t, kind: k}
	switch k {
	case onSQLite:
		if dir == "" {
			dir = t.TempDir()
		}
		d.dir, d.path = dir, filepath.Join(dir, "hw.db")
	case onPostgres:
		if dir == "" {
			d.cluster = pgtest.Start(t, extra...)
		} else {
			d.cluster = pgtest.StartAt(t, filepath.Join(dir, "pg"), extra...)
		}
		d.dir, d.url = d.cluster.DataDir(), d.cluster.NewDatabase(t)
	default:
		t.Fatalf("unknown store %q", k)
	}
	return d
}

// config is c with the database set.
func (d *testDB) config(c serverConfig) serverConfig {
	c.DBPath, c.DBURL = d.path, d.url
	return c
}

// sharedDir is a new directory directly under the temporary directory,
// mode 0755, removed when t ends: the postgres user must reach a data
// directory made under it (t.TempDir()'s parents are root's, 0700).
func sharedDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// missing returns how many of ids have no claim in the database, and the
// first few.
func (d *testDB) missing(ids []string) (int, []string) {
	d.t.Helper()
	if d.kind == onPostgres {
		return pgMissingIDs(d.t, d.url, ids)
	}
	return missingIDs(d.t, d.path, ids)
}

// checkClaims adds the acknowledged events without a claim to o: under a
// power cut an event can be delivered and then lost from the store, which
// the destination app alone cannot see.
func (o *outcome) checkClaims(t testing.TB, p *provider, d *testDB) {
	t.Helper()
	o.Unclaimed, o.unclaimedIDs = d.missing(p.ackedIDs())
}

// pgConn is a connection of the test's own to the scenario's database.
func (d *testDB) pgConn(ctx context.Context) *pgx.Conn {
	d.t.Helper()
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		d.t.Fatalf("connect to %s: %v", d.url, err)
	}
	return conn
}

// count is the number of rows of a table.
func (d *testDB) count(table string) int {
	d.t.Helper()
	q := "SELECT count(*) FROM " + table
	if d.kind == onSQLite {
		db := openSQLite(d.t, d.path)
		defer db.Close()
		return queryInt(d.t, db, q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := d.pgConn(ctx)
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		d.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// attemptRow is one row of the attempt log.
type attemptRow struct {
	Job      int64
	Number   int
	Started  time.Time
	Duration time.Duration
}

// attempts reads the attempt log, ordered by job and number.
func (d *testDB) attempts() []attemptRow {
	d.t.Helper()
	const q = `SELECT job_id, number, started_at, duration_us FROM attempts ORDER BY job_id, number`
	var out []attemptRow
	if d.kind == onSQLite {
		db := openSQLite(d.t, d.path)
		defer db.Close()
		rows, err := db.Query(q)
		if err != nil {
			d.t.Fatalf("read attempts: %v", err)
		}
		defer rows.Close()
		for rows.Next() {
			var a attemptRow
			var started string
			var us int64
			if err := rows.Scan(&a.Job, &a.Number, &started, &us); err != nil {
				d.t.Fatal(err)
			}
			if a.Started, err = time.Parse("2006-01-02T15:04:05.000000Z", started); err != nil {
				d.t.Fatal(err)
			}
			a.Duration = time.Duration(us) * time.Microsecond
			out = append(out, a)
		}
		if err := rows.Err(); err != nil {
			d.t.Fatal(err)
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := d.pgConn(ctx)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		d.t.Fatalf("read attempts: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a attemptRow
		var us int64
		if err := rows.Scan(&a.Job, &a.Number, &a.Started, &us); err != nil {
			d.t.Fatal(err)
		}
		a.Duration = time.Duration(us) * time.Microsecond
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		d.t.Fatal(err)
	}
	return out
}

// integrity checks the store's structures: SQLite's PRAGMA
// integrity_check; on PostgreSQL, pg_amcheck over every table and index of
// the database (amcheck is installed in it if missing, so not while its
// disk is full). "ok" when sound.
func (d *testDB) integrity() string {
	d.t.Helper()
	if d.kind == onSQLite {
		return integrityCheck(d.t, d.path)
	}
	db := d.url[strings.LastIndex(d.url, "/")+1:]
	db, _, _ = strings.Cut(db, "?")
	out, err := exec.Command(d.cluster.Bin("pg_amcheck"), "--install-missing", "--heapallindexed",
		"-h", d.cluster.Dir, "-p", "5432", "-U", "postgres", "-d", db).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("pg_amcheck: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return "ok"
}

// integrityName names integrity's check in a figure.
func (d *testDB) integrityName() string {
	if d.kind == onPostgres {
		return "pg_amcheck"
	}
	return "integrity_check"
}

// walBytes is the size of the write-ahead log: SQLite's -wal file, or the
// segments in PostgreSQL's pg_wal (os.Stat only: opening SQLite's files
// from another process is harmless, but not needed).
func (d *testDB) walBytes() int64 {
	if d.kind == onSQLite {
		if st, err := os.Stat(d.path + "-wal"); err == nil {
			return st.Size()
		}
		return 0
	}
	return dirBytes(filepath.Join(d.dir, "pg_wal"))
}

// sizes describes the data and the write-ahead log.
func (d *testDB) sizes() string {
	if d.kind == onSQLite {
		return walSize(d.path)
	}
	return fmt.Sprintf("data directory %.1f MiB, pg_wal %.1f MiB", mib(dirBytes(d.dir)), mib(d.walBytes()))
}

// dirBytes is the total size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil // files come and go under a running server
	})
	return n
}

// pgProcs are the pids of the cluster's processes: the postmaster's process
// group (pg_ctl starts it with setsid, and every backend inherits it).
func (d *testDB) pgProcs() []int {
	d.t.Helper()
	pm, err := d.cluster.PID()
	if err != nil {
		d.t.Fatalf("PostgreSQL is not running: %v; its log:\n%s", err, d.cluster.Log())
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		d.t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PGRP == pm && st.State != "Z" {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// freezePG stops every process of the cluster (SIGSTOP to its group) and
// waits until every thread of each is stopped; it returns the group.
func (d *testDB) freezePG() int {
	d.t.Helper()
	pm, err := d.cluster.PID()
	if err != nil {
		d.t.Fatalf("PostgreSQL is not running: %v", err)
	}
	_ = syscall.Kill(-pm, syscall.SIGSTOP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stopped := true
		for _, pid := range d.pgProcs() {
			if !allStopped(pid) {
				stopped = false
			}
		}
		if stopped {
			return pm
		}
		if time.Now().After(deadline) {
			d.t.Fatal("PostgreSQL's processes not stopped 10s after SIGSTOP")
		}
		time.Sleep(time.Millisecond)
	}
}

// killPG is PostgreSQL's power cut: SIGKILL to the (frozen) group, then
// wait until none of its processes is left, not even as a zombie: pg_ctl
// and the postmaster itself refuse to start while the pid in postmaster.pid
// answers kill(pid, 0), and the postmaster, pg_ctl's orphan, is reaped by
// init, within about a second here.
func (d *testDB) killPG(group int) {
	d.t.Helper()
	_ = syscall.Kill(-group, syscall.SIGKILL)
	if !waitFor(30*time.Second, func() bool { return syscall.Kill(-group, 0) == syscall.ESRCH }) {
		d.t.Fatal("PostgreSQL's processes were not gone 30s after SIGKILL")
	}
}

// pgLog is the end of PostgreSQL's log, for a failure message.
func (d *testDB) pgLog() string { return logTail(filepath.Join(d.cluster.Dir, "postgres.log"), 30) }
