// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb and
// pg_ctl from Debian's postgresql package (the newest under
// /usr/lib/postgresql/*/bin, 15 or later), in a temporary directory, on a
// unix socket in that directory only (no TCP), as the postgres OS user when
// the tests run as root (initdb refuses root). fsync and synchronous_commit
// are on, as in production.
//
// Without the binaries a test is skipped with how to install them, except
// when CI is set in the environment: there it fails, so that the PostgreSQL
// tests cannot silently stop running.
//
// Start gives a test its own cluster. Main and Database share one cluster
// per test binary and give each test a fresh database in it:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//	func TestX(t *testing.T) { url := pgtest.Database(t); ... }
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// MinVersion is the oldest PostgreSQL major version the store supports.
const MinVersion = 15

// Cluster is one running throwaway PostgreSQL server.
type Cluster struct {
	// Dir holds the data directory (Dir/data unless StartAt gave another),
	// the log and the socket.
	Dir     string
	dataDir string
	bin     string
	cred    *syscall.Credential // the postgres user's, when running as root
	stopped bool
	mu      sync.Mutex
}

// Settings are postgresql.conf lines added to a cluster's defaults
// (fsync and synchronous_commit on, listen_addresses empty: no TCP),
// overriding them.
type Settings map[string]string

// Start runs a new cluster for tb and stops it when tb ends.
func Start(tb testing.TB, extra ...Settings) *Cluster {
	tb.Helper()
	c, err := start(extra...)
	if err != nil {
		unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return c
}

// StartAt is Start with the data directory at data (empty or absent; made
// the postgres user's when running as root), for a test that puts it on a
// file system of its own, such as a small tmpfs that fills up. The socket
// and the log stay in the cluster's temporary Dir. Removing data is the
// caller's business (it may be a mount point).
func StartAt(tb testing.TB, data string, extra ...Settings) *Cluster {
	tb.Helper()
	c, err := startAt(data, extra...)
	if err != nil {
		unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("pgtest: %v", err)
		}
	})
	return c
}

// Launch starts a cluster outside a test (a benchmark harness); the caller
// stops it. Without the binaries its error satisfies IsMissing.
func Launch(extra ...Settings) (*Cluster, error) { return start(extra...) }

// IsMissing reports whether err says PostgreSQL's binaries were not found.
func IsMissing(err error) bool { return errors.Is(err, errMissing) }

// errMissing says the PostgreSQL binaries cannot be found.
var errMissing = errors.New("PostgreSQL binaries not found")

// unavailable skips (on a developer's machine) or fails (in CI) a test that
// needs PostgreSQL.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if !errors.Is(err, errMissing) || inCI() {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Skipf("pgtest: %v; skipping the PostgreSQL tests (to run them: apt-get install postgresql)", err)
}

func inCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "0" && v != "false"
}

// binDir finds the newest PostgreSQL's bin directory (HOOKWARDEN_PG_BIN
// overrides it).
func binDir() (string, error) {
	if d := os.Getenv("HOOKWARDEN_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%w in HOOKWARDEN_PG_BIN=%s", errMissing, d)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	type cand struct {
		v   int
		dir string
	}
	var cs []cand
	for _, d := range dirs {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		if err != nil || v < MinVersion {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			cs = append(cs, cand{v, d})
		}
	}
	if len(cs) == 0 {
		return "", fmt.Errorf("%w: no initdb of version %d or later under /usr/lib/postgresql/*/bin", errMissing, MinVersion)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].v > cs[j].v })
	return cs[0].dir, nil
}

func start(extra ...Settings) (*Cluster, error) { return startAt("", extra...) }

func startAt(data string, extra ...Settings) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dataDir: data}
	reapOrphans(bin)
	var uid, gid int = -1, -1
	if c.cred, err = postgresUser("initdb"); err != nil {
		return nil, err
	}
	if c.cred != nil {
		uid, gid = int(c.cred.Uid), int(c.cred.Gid)
	}
	// Directly under the temporary directory, not t.TempDir(): its parents
	// are root's, mode 0700, and the postgres user must reach this one.
	// Short, too: a unix socket path has at most 107 bytes.
	if c.Dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		return nil, err
	}
	if c.cred != nil {
		if err := os.Chown(c.Dir, uid, gid); err != nil {
			os.RemoveAll(c.Dir)
			return nil, err
		}
	}
	if data != "" {
		// So that reapOrphans finds a data directory kept elsewhere.
		if err := os.WriteFile(filepath.Join(c.Dir, dataFile), []byte(data), 0o644); err != nil {
			os.RemoveAll(c.Dir)
			return nil, err
		}
		if err := os.MkdirAll(data, 0o700); err != nil {
			os.RemoveAll(c.Dir)
			return nil, err
		}
		if c.cred != nil {
			if err := os.Chown(data, uid, gid); err != nil {
				os.RemoveAll(c.Dir)
				return nil, err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(c.Dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(c.Dir)
		return nil, err
	}
	// --no-sync only skips initdb's own flush of the new files; the server
	// then runs with fsync on.
	if out, err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "--no-sync",
		"--encoding=UTF8", "--locale=C"); err != nil {
		os.RemoveAll(c.Dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	conf := Settings{
		"listen_addresses":        "''",
		"unix_socket_directories": "'" + c.Dir + "'",
		"port":                    "5432",
		"fsync":                   "on",
		"synchronous_commit":      "on",
		"shared_buffers":          "'32MB'",
		"max_connections":         "200",
		"log_min_messages":        "warning",
	}
	for _, e := range extra {
		for k, v := range e {
			conf[k] = v
		}
	}
	var b strings.Builder
	b.WriteString("\n# pgtest\n")
	for k, v := range conf {
		fmt.Fprintf(&b, "%s = %s\n", k, v)
	}
	f, err := os.OpenFile(filepath.Join(c.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(b.String())
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		os.RemoveAll(c.Dir)
		return nil, fmt.Errorf("write postgresql.conf: %w", err)
	}
	if out, err := c.run("pg_ctl", "-D", c.data(), "-l", c.logFile(), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(c.logFile())
		os.RemoveAll(c.Dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	return c, nil
}

func (c *Cluster) data() string {
	if c.dataDir != "" {
		return c.dataDir
	}
	return filepath.Join(c.Dir, "data")
}

// Bin is the path of one of the cluster's PostgreSQL programs.
func (c *Cluster) Bin(prog string) string { return filepath.Join(c.bin, prog) }

// postgresUser is the postgres OS user's credential to run prog as when
// the tests run as root (initdb and pgbouncer refuse root), nil otherwise.
func postgresUser(prog string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root and no postgres user to run %s as (%v)", errMissing, prog, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// DataDir is the cluster's data directory.
func (c *Cluster) DataDir() string { return c.data() }
func (c *Cluster) logFile() string { return filepath.Join(c.Dir, "postgres.log") }

// run runs one of PostgreSQL's programs, as the postgres user if needed.
func (c *Cluster) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// URL is the connection URL of database db (postgres when empty) as the
// superuser postgres, over the cluster's socket.
func (c *Cluster) URL(db string) string {
	if db == "" {
		db = "postgres"
	}
	q := url.Values{"host": {c.Dir}, "port": {"5432"}, "sslmode": {"disable"}}
	return "postgres://postgres@/" + url.PathEscape(db) + "?" + q.Encode()
}

// PID is the postmaster's process id, from postmaster.pid (an error when
// the server is not running).
func (c *Cluster) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return 0, fmt.Errorf("postmaster %d is gone", pid)
	}
	return pid, nil
}

// Log is the server's log so far, for a failing test to print.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(c.logFile())
	return string(b)
}

// Restart stops the server (pg_ctl restart -m fast: connections are cut,
// in-flight transactions rolled back) and starts it again on the same data,
// waiting until it accepts connections.
func (c *Cluster) Restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("restart of a stopped cluster")
	}
	if out, err := c.run("pg_ctl", "-D", c.data(), "-l", c.logFile(), "-m", "fast", "-w", "-t", "60", "restart"); err != nil {
		return fmt.Errorf("pg_ctl restart: %v: %s", err, out)
	}
	return nil
}

// Stop stops the server (pg_ctl stop -m fast) and removes its directory.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	out, err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "-t", "60", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s (left %s)", err, out, c.Dir)
	}
	return os.RemoveAll(c.Dir)
}

var dbSeq atomic.Int64

// NewDatabase creates an empty database in the cluster and returns its
// URL; it is dropped when tb ends.
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := c.Exec(context.Background(), "", "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() {
		_ = c.Exec(context.Background(), "", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return c.URL(name)
}

// Exec runs one statement in database db as the superuser, on a connection
// of its own.
func (c *Cluster) Exec(ctx context.Context, db, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL(db))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

var shared struct {
	sync.Mutex
	main bool
	c    *Cluster
	err  error
}

// Main runs the package's tests with one cluster shared by every Database
// call, started at the first, and stops it when they are done.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with work of its own around the tests: it
// returns the exit code instead of exiting. The cluster starts only when a
// test first calls Database, so a package whose other tests need no
// PostgreSQL runs them anywhere.
func Run(m *testing.M) int {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	shared.Unlock()
	if code == 0 {
		// Every goroutine a test starts ends with it (the cluster's
		// connections included). Idle keep-alive connections of the
		// default HTTP client are a pool, not a leak: closed first.
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			t.CloseIdleConnections()
		}
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// Database returns the URL of a fresh, empty database for tb, in the
// package's shared cluster (see Main), or in a cluster of its own when the
// package has no TestMain calling Main.
func Database(tb testing.TB) string {
	tb.Helper()
	shared.Lock()
	if !shared.main {
		shared.Unlock()
		return Start(tb).NewDatabase(tb)
	}
	if shared.c == nil && shared.err == nil {
		shared.c, shared.err = start()
	}
	c, err := shared.c, shared.err
	shared.Unlock()
	if err != nil {
		unavailable(tb, err)
	}
	return c.NewDatabase(tb)
}

// ownerFile holds the pid of the test process that started a cluster;
// dataFile, of a cluster started by StartAt, its data directory.
const (
	ownerFile = "owner.pid"
	dataFile  = "data.path"
)

// reapOrphans stops and removes the clusters of test processes that died
// without stopping them (a -timeout, a kill): pg_ctl's server outlives
// the process that started it.
func reapOrphans(bin string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgtest-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // starting, or not ours
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // its owner is alive (or the pid is reused: leave it)
		}
		c := &Cluster{Dir: d, bin: bin}
		if b, err := os.ReadFile(filepath.Join(d, dataFile)); err == nil {
			c.dataDir = string(b)
		}
		if fi, err := os.Stat(d); err == nil && os.Geteuid() == 0 {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				c.cred = &syscall.Credential{Uid: st.Uid, Gid: st.Gid}
			}
		}
		if _, err := os.Stat(filepath.Join(c.data(), "postmaster.pid")); err == nil {
			_, _ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "-t", "30", "stop")
		}
		os.RemoveAll(d)
	}
}
