package pgtest

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Bouncer starts PgBouncer (Debian's pgbouncer package) in front of the
// database of dbURL, a URL Database or Cluster.URL gave, in session
// pooling mode, on a unix socket of its own, and returns the same
// database's URL through it; PgBouncer stops when tb ends. Without the
// binary the test is skipped, or fails in CI, as without PostgreSQL's.
func Bouncer(tb testing.TB, dbURL string) string {
	tb.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			if inCI() {
				tb.Fatal("pgtest: pgbouncer not found")
			}
			tb.Skip("pgtest: pgbouncer not found; skipping (to run it: apt-get install pgbouncer)")
		}
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	// PgBouncer refuses to run as root: as the postgres user then, who
	// owns the cluster's socket directory too.
	cred, err := postgresUser("pgbouncer")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	const port = "6432"
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
unix_socket_dir = %s
listen_port = %s
auth_type = trust
auth_file = %s
pool_mode = session
logfile = %s
pidfile = %s
`, q.Get("host"), q.Get("port"), dir, port, filepath.Join(dir, "users.txt"),
		filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": `"postgres" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("pgtest: start pgbouncer: %v", err)
	}
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT) // pgbouncer's immediate shutdown
		cmd.Wait()
	})
	sock := filepath.Join(dir, ".s.PGSQL."+port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			tb.Fatalf("pgtest: pgbouncer did not listen within 10 s:\n%s", log)
		}
	}
	q.Set("host", dir)
	q.Set("port", port)
	u.RawQuery = q.Encode()
	return u.String()
}
