package torture

import (
	"bytes"
	"database/sql"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // read-only checks of the database from outside the child
)

// requireRoot skips a mount-based scenario when not root, or when a tool it
// needs is missing; with HOOKWARDEN_TORTURE_STRICT=1 (CI, which runs as
// root) it fails instead, so the scenario cannot silently stop running.
func requireRoot(t *testing.T, tools ...string) {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("HOOKWARDEN_TORTURE_STRICT") == "1" {
		skip = t.Fatalf
	}
	if os.Geteuid() != 0 {
		skip("torture: needs root to mount a tmpfs or a loop device; run as root (CI does)")
	}
	for _, tool := range append([]string{"mount", "umount"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			skip("torture: %s not found: %v", tool, err)
		}
	}
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// unmount unmounts dir, retrying while it is busy, lazily as a last resort,
// so that no mount outlives the test.
func unmount(t testing.TB, dir string) {
	for i := 0; i < 50; i++ {
		if !isMounted(dir) {
			return
		}
		if exec.Command("umount", dir).Run() == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
		t.Errorf("umount -l %s: %v %s", dir, err, out)
	}
}

func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == dir {
			return true
		}
	}
	return false
}

// mountTmpfs mounts a tmpfs of the given size (mount's syntax: 24m) on dir,
// unmounted in t.Cleanup.
func mountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir)
	t.Cleanup(func() { unmount(t, dir) })
}

// loopMount is an ext4 image mounted through a loop device.
type loopMount struct {
	t   testing.TB
	img string
	dev string
	dir string
}

// mountLoop attaches img to a free loop device and mounts it on dir,
// unmounted in t.Cleanup; unmount and mount again (a power cut) keep that
// one cleanup, so whatever a test starts on the mount after it is stopped
// first.
func mountLoop(t testing.TB, img, dir string) *loopMount {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m := &loopMount{t: t, img: img, dir: dir}
	m.mount()
	t.Cleanup(m.unmount)
	return m
}

// mount attaches the image and mounts it. commit=60 stretches ext4's
// periodic journal commit past a test cycle, so that only fsync makes data
// durable on the device.
func (m *loopMount) mount() {
	m.t.Helper()
	m.dev = run(m.t, "losetup", "-f", "--show", m.img)
	if out, err := exec.Command("mount", "-t", "ext4", "-o", "commit=60", m.dev, m.dir).CombinedOutput(); err != nil {
		_ = exec.Command("losetup", "-d", m.dev).Run()
		m.dev = ""
		m.t.Fatalf("mount %s: %v %s", m.img, err, out)
	}
}

func (m *loopMount) unmount() {
	if m.dev == "" {
		return
	}
	unmount(m.t, m.dir)
	if out, err := exec.Command("losetup", "-d", m.dev).CombinedOutput(); err != nil {
		m.t.Errorf("losetup -d %s: %v %s", m.dev, err, out)
	}
	m.dev = ""
}

// copySparse copies src to dst, leaving runs of zeros as holes.
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	var off int64
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			if !bytes.Equal(buf[:n], zero[:n]) {
				if _, werr := out.WriteAt(buf[:n], off); werr != nil {
					out.Close()
					return werr
				}
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			out.Close()
			return err
		}
	}
	if err := out.Truncate(off); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeCanary writes content to path, with fsync of the file and its
// directory or without.
func writeCanary(path string, content []byte, sync bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if sync {
		d, err := os.Open(dirOf(path))
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	}
	return nil
}

func dirOf(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/"
	}
	return path[:i]
}

// openSQLite opens the database read-only from the test process (a
// different process from the server, so its POSIX locks are not disturbed);
// the caller closes it.
func openSQLite(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

func queryInt(t testing.TB, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// integrityCheck runs PRAGMA integrity_check on a fresh read-only connection
// and returns its answer ("ok" when sound).
func integrityCheck(t testing.TB, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("PRAGMA integrity_check")
	if err != nil {
		return "error: " + err.Error()
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "error: " + err.Error()
		}
		lines = append(lines, s)
	}
	if err := rows.Err(); err != nil {
		return "error: " + err.Error()
	}
	return strings.Join(lines, "; ")
}

// missingIDs returns how many of ids have no claim in the database.
func missingIDs(t testing.TB, path string, ids []string) (int, []string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	have := map[string]bool{}
	rows, err := db.Query(`SELECT event_id FROM events WHERE source = ?`, sourceName)
	if err != nil {
		t.Fatalf("read claims: %v", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	var missing []string
	for _, id := range ids {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	n := len(missing)
	if len(missing) > 10 {
		missing = missing[:10]
	}
	return n, missing
}
