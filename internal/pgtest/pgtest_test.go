package pgtest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestStartConnectStop: two clusters start at once, each answers on its own
// socket with the durable settings, and Stop removes it.
func TestStartConnectStop(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := Start(t)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, c.URL(""))
			if err != nil {
				t.Fatalf("connect: %v\n%s", err, c.Log())
			}
			var fsync, sc, listen, sock string
			err = conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
				current_setting('listen_addresses'), current_setting('unix_socket_directories')`).Scan(&fsync, &sc, &listen, &sock)
			conn.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if fsync != "on" || sc != "on" || listen != "" || sock != c.Dir {
				t.Fatalf("fsync=%s synchronous_commit=%s listen_addresses=%q socket=%s; want on, on, '', %s", fsync, sc, listen, sock, c.Dir)
			}
			if err := c.Stop(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("after Stop: %v, want the directory gone", err)
			}
			if _, err := pgx.Connect(ctx, c.URL("")); err == nil {
				t.Fatal("connected to a stopped cluster")
			}
		})
	}
}

// TestSettingsAndDatabases: extra settings reach the server; Database gives
// each caller its own empty database in the shared cluster.
func TestSettingsAndDatabases(t *testing.T) {
	c := Start(t, Settings{"synchronous_commit": "off"})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	var sc string
	if err := conn.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sc); err != nil || sc != "off" {
		t.Fatalf("synchronous_commit %q %v, want off", sc, err)
	}
	conn.Close(ctx)

	a, b := Database(t), Database(t)
	if a == b {
		t.Fatalf("two databases with one URL %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, `CREATE TABLE x (i int)`); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'x'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("table of one database seen in the other: %d %v", n, err)
	}
}

// TestMissingBinaries: a bin directory without initdb is reported as
// missing, which skips on a developer machine and fails under CI.
func TestMissingBinaries(t *testing.T) {
	t.Setenv("HOOKWARDEN_PG_BIN", filepath.Join(t.TempDir(), "none"))
	if _, err := start(); !errors.Is(err, errMissing) {
		t.Fatalf("start without binaries: %v, want errMissing", err)
	}
	t.Setenv("CI", "true")
	if !inCI() {
		t.Fatal("CI=true not seen")
	}
	t.Setenv("CI", "")
	if inCI() {
		t.Fatal("empty CI taken as CI")
	}
}

// TestReapOrphans: a cluster whose test process died is stopped and
// removed by the next Start.
func TestReapOrphans(t *testing.T) {
	c := Start(t)
	// A process that has exited: its pid is free.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, ownerFile), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	Start(t)
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan %s: %v, want it removed", c.Dir, err)
	}
	if _, err := pgx.Connect(context.Background(), c.URL("")); err == nil {
		t.Fatal("the orphan still answers")
	}
	c.stopped = true // reaped
}

// TestStartAt: the data directory where the caller put it (the server's own
// data_directory says so), PID the running postmaster's; after Stop the
// data directory is the caller's and PID fails.
func TestStartAt(t *testing.T) {
	// Not under t.TempDir() when root: the postgres user must reach it.
	base, err := os.MkdirTemp("", "pgtest-at-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(base, "data")
	c := StartAt(t, data)
	if c.DataDir() != data {
		t.Fatalf("DataDir %s, want %s", c.DataDir(), data)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL(""))
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, c.Log())
	}
	var dir string
	var backend int
	err = conn.QueryRow(ctx, `SELECT current_setting('data_directory'), pg_backend_pid()`).Scan(&dir, &backend)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if dir != data {
		t.Fatalf("data_directory %s, want %s", dir, data)
	}
	pid, err := c.PID()
	if err != nil {
		t.Fatal(err)
	}
	// A backend is the postmaster's child.
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(backend), "stat"))
	if err == nil && parentOf(string(st)) != strconv.Itoa(pid) {
		t.Errorf("backend %d's parent is not postmaster %d: %s", backend, pid, st)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PID(); err == nil {
		t.Error("PID of a stopped cluster")
	}
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err != nil {
		t.Errorf("the data directory went with Stop: %v", err)
	}
}

// parentOf is the parent's pid in a /proc/PID/stat line: the second field
// after the command name in parentheses (the state comes first).
func parentOf(stat string) string {
	if j := strings.LastIndexByte(stat, ')'); j >= 0 {
		stat = stat[j+1:]
	}
	if f := strings.Fields(stat); len(f) > 1 {
		return f[1]
	}
	return ""
}
