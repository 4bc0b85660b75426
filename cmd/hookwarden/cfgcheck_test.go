package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBinIn runs the real binary in dir and returns its exit code and output.
func runBinIn(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// TestCheckAndServeReportEveryProblemInOnePass: a file with several
// mistakes, each of which serve would stop on, gets all of them from one
// run of check, and serve refuses it with exit 2 naming each key path.
func TestCheckAndServeReportEveryProblemInOnePass(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(filepath.Join(dir, "plain"), []byte("a file, not a directory"), 0o600)
	os.WriteFile(cfg, []byte(`
listen: "127.0.0.1:90900"
admin: { listen: "127.0.0.1:8081:1" }
database: { path: "plain/hw.db" }
sources:
  - name: std
    scheme: standard
    secrets: ["env:HW_TEST_UNSET_SECRET"]
    destinations:
      - name: app
        url: "http://127.0.0.1:3000/"
        signing_secret: "env:HW_TEST_UNSET_SECRET"
        timeout: 10
        max_attempts: ten
      - name: two
        url: "http://127.0.0.1:3000/"
        concurrency: many
`), 0o600)
	want := []string{
		`listen: "127.0.0.1:90900": port "90900" is not a number from 0 to 65535`,
		`admin.listen: "127.0.0.1:8081:1" is not host:port`,
		`database.path: ` + filepath.Join(dir, "plain", "hw.db") + `: ` + filepath.Join(dir, "plain") + ` is not a directory`,
		`sources[0].destinations[0].timeout: duration 10 has no unit`,
		`sources[0].destinations[0].max_attempts: "ten": want a whole number`,
		`sources[0].destinations[1].concurrency: "many": want a whole number`,
		`sources[0].secrets[0]: secret env:HW_TEST_UNSET_SECRET: environment variable HW_TEST_UNSET_SECRET is not set ` +
			`(also used at sources[0].destinations[0].signing_secret)`,
	}
	for _, cmd := range []string{"check", "serve"} {
		code, out := runBinIn(t, dir, nil, cmd, "--config", cfg)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2 (a configuration error)\n%s", cmd, code, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s output lacks %q:\n%s", cmd, w, out)
			}
		}
		// One missing secret is one problem, reported once.
		if n := strings.Count(out, "HW_TEST_UNSET_SECRET is not set"); n != 1 {
			t.Errorf("%s reports the missing secret %d times, want once:\n%s", cmd, n, out)
		}
	}
}

// TestReadOnlyDatabaseDirectory: a database in a directory the service
// cannot write passes neither check nor serve (exit 2, naming
// database.path), where serve used to fail later with "unable to open
// database file (14)". Run as nobody when the tests run as root, whom
// permissions do not stop.
func TestReadOnlyDatabaseDirectory(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o555)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: ro/hw.db }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
`, testSecret)), 0o644)
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
		// nobody must reach the binary and the file.
		for _, d := range []string{filepath.Dir(binPath), dir, filepath.Dir(dir)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Skip(err)
			}
		}
	}
	for _, sub := range []string{"check", "serve"} {
		cmd := exec.Command(binPath, sub, "--config", cfg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 2 ||
			!strings.Contains(string(out), "database.path: "+filepath.Join(ro, "hw.db")+": directory "+ro+" is not writable") {
			t.Errorf("%s: %v, want exit 2 naming database.path:\n%s", sub, err, out)
		}
	}
}

func TestCredentialsDirectoryUnsetIsNamed(t *testing.T) {
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	p := writeConfig(t, `
sources:
  - name: std
    scheme: standard
    secrets: ["file:${CREDENTIALS_DIRECTORY}/std"]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
`)
	code, out, _ := runMain(t, "check", "--config", p)
	if code != 2 || !strings.Contains(out, "environment variable CREDENTIALS_DIRECTORY is not set") ||
		strings.Contains(out, "open /std") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestRelativePathsFollowTheConfigFile: a configuration in a subdirectory
// with a relative database.path and a relative file: secret, used from the
// parent directory: serve, events and backup all use the database next to
// the file, and nothing is created in the current directory.
func TestRelativePathsFollowTheConfigFile(t *testing.T) {
	parent := t.TempDir()
	sub := filepath.Join(parent, "stripe")
	os.Mkdir(sub, 0o700)
	os.WriteFile(filepath.Join(sub, "std.secret"), []byte(testSecret+"\n"), 0o600)
	hook, adm := freeAddr(t), freeAddr(t)
	os.WriteFile(filepath.Join(sub, "config.yaml"), []byte(fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: "./data/hw.db" }
log: { level: warn }
sources:
  - name: std
    scheme: standard
    secrets: ["file:std.secret"]
`, hook, adm)), 0o600)
	cfg := filepath.Join("stripe", "config.yaml") // relative to parent, as a user types it

	serve := exec.Command(binPath, "serve", "--config", cfg)
	serve.Dir = parent
	var logs bytes.Buffer
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	eventually(t, "serve to be ready", func() bool {
		resp, err := http.Get("http://" + adm + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if got := do(t, signed(t, "http://"+hook+"/hooks/std", "msg_relpath", []byte(`{"type":"t"}`), time.Now(), testSecret)); got.Status != "accepted" {
		t.Fatalf("post signed with the file secret: %+v\n%s", got, logs.String())
	}
	_ = serve.Process.Signal(syscall.SIGTERM)
	_ = serve.Wait()

	if _, err := os.Stat(filepath.Join(sub, "data", "hw.db")); err != nil {
		t.Fatalf("database not next to the configuration: %v\n%s", err, logs.String())
	}
	if _, err := os.Stat(filepath.Join(parent, "data")); err == nil {
		t.Fatal("a ./data directory was created in the current directory")
	}
	code, out := runBinIn(t, parent, nil, "events", "list", "--config", cfg)
	if code != 0 || !strings.Contains(out, "msg_relpath") {
		t.Fatalf("events list from the parent: exit %d\n%s", code, out)
	}
	code, out = runBinIn(t, parent, nil, "backup", "--config", cfg, "copy.db")
	if code != 0 {
		t.Fatalf("backup from the parent: exit %d\n%s", code, out)
	}
	// The backup FILE argument and --db are typed paths: relative to the cwd.
	code, out = runBinIn(t, parent, nil, "events", "list", "--db", "copy.db")
	if code != 0 || !strings.Contains(out, "msg_relpath") {
		t.Fatalf("events list --db copy.db: exit %d\n%s", code, out)
	}
}

// TestShortAdminTokenRefusedOffLoopback: an admin listener on every
// interface needs a token of at least 32 characters; check says so under
// admin.token and serve refuses to start (exit 2). On loopback a short
// token stays allowed.
func TestShortAdminTokenRefusedOffLoopback(t *testing.T) {
	dir := t.TempDir()
	doc := func(listen, token string) string {
		p := filepath.Join(dir, "config.yaml")
		os.WriteFile(p, []byte(fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: %q, token: %q }
database: { path: %q }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
`, listen, token, filepath.Join(dir, "hw.db"), testSecret)), 0o600)
		return p
	}
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		p := doc(listen, "x")
		for _, cmd := range []string{"check", "serve"} {
			code, out := runBinIn(t, dir, nil, cmd, "--config", p)
			if code != 2 || !strings.Contains(out, "admin.token: too short (1 characters): at least 32") {
				t.Errorf("%s with admin.listen %s and a 1-character token: exit %d, want 2 naming admin.token\n%s", cmd, listen, code, out)
			}
		}
	}
	if code, out := runBinIn(t, dir, nil, "check", "--config", doc("0.0.0.0:0", strings.Repeat("k", 32))); code != 0 {
		t.Errorf("a 32-character token off loopback: exit %d\n%s", code, out)
	}
	if code, out := runBinIn(t, dir, nil, "check", "--config", doc("127.0.0.1:0", "x")); code != 0 {
		t.Errorf("a short token on loopback: exit %d\n%s", code, out)
	}
}
