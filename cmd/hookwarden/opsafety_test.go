package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// runsIn counts the runs recorded in a database file, read-only.
func runsIn(t *testing.T, db string) int {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), db, sqlitestore.Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM runs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// runServe runs `serve --config cfg` to its end (it must fail on its own).
func runServe(t *testing.T, cfg string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "serve", "--config", cfg)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("serve did not refuse: it was still running after 30s\n%s", errb.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, errb.String()
}

// TestSecondServeRefused: two real processes on one file. The second exits
// 1 naming the first (its pid), records no run and runs no worker; after a
// kill -9 of the first the stale lock file does not block a restart.
func TestSecondServeRefused(t *testing.T) {
	app := newSink(t)
	first := newChild(t, app.URL)
	first.start()
	defer first.stop()

	// Same file, other ports: only the lock can stop it.
	second := filepath.Join(t.TempDir(), "config.yaml")
	doc, err := os.ReadFile(first.cfg)
	if err != nil {
		t.Fatal(err)
	}
	doc = bytes.ReplaceAll(doc, []byte(first.hook), []byte(freeAddr(t)))
	doc = bytes.ReplaceAll(doc, []byte(first.adm), []byte(freeAddr(t)))
	if err := os.WriteFile(second, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runServe(t, second)
	want := fmt.Sprintf("is in use by hookwarden serve (pid %d)", first.cmd.Process.Pid)
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, first.db()) {
		t.Fatalf("second serve: exit %d, output:\n%s\nwant exit 1 and %q", code, out, want)
	}
	if n := runsIn(t, first.db()); n != 1 {
		t.Fatalf("%d runs recorded, want only the first serve's", n)
	}

	first.kill9()
	if _, err := os.Stat(first.db() + ".lock"); err != nil {
		t.Fatalf("lock file of the killed serve: %v (the test needs it stale, not gone)", err)
	}
	first.start() // the stale lock of a dead process does not block
	if n := runsIn(t, first.db()); n != 2 {
		t.Fatalf("%d runs after the restart, want 2", n)
	}
}

// TestServeBindFailureRecordsNoRun: a serve whose port is taken never ran,
// so it records no run and gaps shows no crash; on a new database it leaves
// no file behind (it binds before it creates one).
func TestServeBindFailureRecordsNoRun(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	c := newChild(t, "http://127.0.0.1:9/")
	good, _ := os.ReadFile(c.cfg)
	bad := bytes.ReplaceAll(good, []byte(c.hook), []byte(taken.Addr().String()))
	serveTaken := func() {
		t.Helper()
		if err := os.WriteFile(c.cfg, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out := runServe(t, c.cfg)
		if code == 0 || !strings.Contains(out, "address already in use") {
			t.Fatalf("serve on a taken port: exit %d\n%s", code, out)
		}
	}
	serveTaken()
	if _, err := os.Stat(c.db()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a new database after a serve that never listened: %v, want none", err)
	}

	// An existing database: the failed start adds no run.
	if err := os.WriteFile(c.cfg, good, 0o600); err != nil {
		t.Fatal(err)
	}
	c.start()
	c.stop()
	serveTaken()
	if n := runsIn(t, c.db()); n != 1 {
		t.Fatalf("%d runs recorded, want the good start's 1 alone", n)
	}
	code, gout, gerr := runMain(t, "gaps", "--db", c.db(), "--json")
	if code != 0 || strings.Contains(gout, "outage") {
		t.Fatalf("gaps after a failed start: exit %d\n%s%s", code, gout, gerr)
	}
	// The lock went with the failed process: a good start works.
	if err := os.WriteFile(c.cfg, good, 0o600); err != nil {
		t.Fatal(err)
	}
	c.start()
	c.stop()
	if n := runsIn(t, c.db()); n != 2 {
		t.Fatalf("%d runs after two good starts, want 2", n)
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path) // a copy no SQLite in this process has open
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// TestWritingCommandsRefuseForensicCopy: replay and prune refuse --db on a
// file no serve owns (exit 2, naming --write) and leave it byte for byte as
// it was; with --write they change it and say no serve delivers; on the
// live file they name the serve that does. Every change is in the audit
// log, shown by events show.
func TestWritingCommandsRefuseForensicCopy(t *testing.T) {
	app := newSink(t, 422)
	a := startApp(t, app.URL, "")
	a.post("msg_a", `{"type":"invoice.paid"}`)
	app.wait(t)
	eventually(t, "dead letter", func() bool { return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`) == 1 })
	cfgPath := writeConfig(t, stdConfig(a.dbPath, "", app.URL, ""))

	cp := filepath.Join(t.TempDir(), "copy.db")
	if code, _, errOut := runMain(t, "backup", cp, "--db", a.dbPath); code != 0 {
		t.Fatalf("backup: %s", errOut)
	}
	before := fileSum(t, cp)
	for _, args := range [][]string{
		{"replay", "std", "msg_a", "--db", cp},
		{"replay", "--dead", "--db", cp},
		{"prune", "--config", cfgPath, "--db", cp},
	} {
		code, out, errOut := runMain(t, args...)
		if code != 2 || !strings.Contains(errOut, "no serve owns") || !strings.Contains(errOut, "--write") {
			t.Errorf("%v on a copy: exit %d\n%s%s\nwant exit 2 naming --write", args, code, out, errOut)
		}
	}
	if fileSum(t, cp) != before {
		t.Fatal("a refused command changed the copy")
	}
	for _, ext := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(cp + ext); err == nil {
			t.Errorf("a refused command opened the copy for writing (%s exists)", ext)
		}
	}
	// Read-only and dry-run commands need no --write.
	if code, _, errOut := runMain(t, "prune", "--dry-run", "--config", cfgPath, "--db", cp); code != 0 {
		t.Errorf("prune --dry-run on a copy: %s", errOut)
	}

	code, out, errOut := runMain(t, "replay", "std", "msg_a", "--db", cp, "--write")
	if code != 0 || !strings.Contains(out, "replayed 1 of 1 job") || !strings.Contains(out, "no serve runs on this file") ||
		strings.Contains(out, "a running serve") {
		t.Fatalf("replay --write on a copy: exit %d\n%s%s", code, out, errOut)
	}

	// The live file: its serve is named as the one that delivers.
	code, out, errOut = runMain(t, "replay", "std", "msg_a", "--db", a.dbPath)
	want := fmt.Sprintf("hookwarden serve (pid %d) delivers them", os.Getpid())
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("replay on the served file: exit %d\n%s%s\nwant %q", code, out, errOut, want)
	}
	// ... and through the API.
	req, _ := http.NewRequest("POST", "http://"+a.AdminAddr()+"/api/replay", strings.NewReader(`{"source":"std","event_ids":["msg_a"]}`))
	req.Header.Set("Content-Type", "application/json")
	eventually(t, "delivered after the replay", func() bool {
		return a.count(`SELECT count(*) FROM jobs WHERE state = 'delivered'`) == 1
	})
	if r := do(t, req); r.Code != 200 {
		t.Fatalf("POST /api/replay: %d", r.Code)
	}

	// events show: the CLI's and the API's replays of the live file.
	code, out, _ = runMain(t, "events", "show", "std", "msg_a", "--db", a.dbPath)
	if code != 0 || !strings.Contains(out, "audit (2)") || !strings.Contains(out, "replay  by cli "+osUser()) ||
		!strings.Contains(out, "replay  by api 127.0.0.1:") || !strings.Contains(out, `{"source":"std","event_ids":["msg_a"]}`) {
		t.Errorf("events show lacks the audit log:\n%s", out)
	}
	code, out, _ = runMain(t, "events", "show", "std", "msg_a", "--db", a.dbPath, "--json")
	var d hookwarden.EventDetail
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || len(d.Audit) != 2 || d.Audit[0].Origin != hookwarden.AuditCLI ||
		d.Audit[1].Origin != hookwarden.AuditAPI || !strings.Contains(string(d.Audit[0].Result), `"replayed":1`) {
		t.Errorf("events show --json audit: %+v\n%s", d.Audit, out)
	}
	// The copy keeps its own: the --write replay only.
	if _, out, _ = runMain(t, "events", "show", "std", "msg_a", "--db", cp, "--json"); json.Unmarshal([]byte(out), &d) != nil ||
		len(d.Audit) != 1 {
		t.Errorf("copy's audit: %+v", d.Audit)
	}
	// prune --write on the copy is audited too.
	if code, _, errOut := runMain(t, "prune", "--config", cfgPath, "--db", cp, "--write"); code != 0 {
		t.Fatalf("prune --write: %s", errOut)
	}
	ro, err := sqlitestore.Open(context.Background(), cp, sqlitestore.Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var n int
	if err := ro.DB().QueryRow(`SELECT count(*) FROM audit WHERE action = 'prune' AND origin = 'cli' AND result IS NOT NULL`).Scan(&n); err != nil || n != 1 {
		t.Errorf("prune audit entries: %d %v", n, err)
	}
}

// TestReplayNothingIsNotSuccess: a replay of explicit ids that resets
// nothing says which ids and why, prints no success line and exits 1.
func TestReplayNothingIsNotSuccess(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "")
	a.post("msg_ok", `{"type":"x"}`)
	app.wait(t)
	code, out, errOut := runMain(t, "replay", "std", "msg_nope", "msg_other", "--db", a.dbPath)
	if code != 1 || strings.Contains(out, "replayed 0") || strings.Contains(out, "delivers them") ||
		!strings.Contains(out, "replayed nothing") || !strings.Contains(errOut, "std/msg_nope: no such event") ||
		!strings.Contains(errOut, "std/msg_other: no such event") || !strings.Contains(errOut, "nothing replayed") {
		t.Errorf("replay of unknown ids: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	code, out, errOut = runMain(t, "replay", "std", "msg_ok", "--destination", "std/other", "--db", a.dbPath)
	if code != 1 || !strings.Contains(errOut, "no delivery job to replay") {
		t.Errorf("replay of an event with no job there: exit %d\n%s%s", code, out, errOut)
	}
	if n := a.count(`SELECT count(*) FROM audit`); n != 0 {
		t.Errorf("%d audit entries for replays that changed nothing", n)
	}
}

// TestFilesPrivateWhateverTheUmask: serve under umask 000 creates the
// database directory 0700 and the database, -wal and -shm 0600; a backup
// under umask 000 is 0600.
func TestFilesPrivateWhateverTheUmask(t *testing.T) {
	c := newChild(t, "http://127.0.0.1:9/")
	dbDir := filepath.Join(filepath.Dir(c.cfg), "state")
	db := filepath.Join(dbDir, "hw.db")
	doc, _ := os.ReadFile(c.cfg)
	doc = bytes.ReplaceAll(doc, []byte(c.db()), []byte(db))
	if err := os.WriteFile(c.cfg, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command("/bin/sh", "-c", `umask 000 && exec "$0" serve --config "$1"`, binPath, c.cfg)
	c.cmd.Stderr = os.Stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	eventually(t, "serve ready", func() bool {
		resp, err := http.Get("http://" + c.adm + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	backup := filepath.Join(t.TempDir(), "b.db")
	out, err := exec.Command("/bin/sh", "-c", `umask 000 && exec "$0" backup "$1" --db "$2"`, binPath, backup, db).CombinedOutput()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{dbDir, os.ModeDir | 0o700}, {db, 0o600}, {db + "-wal", 0o600}, {db + "-shm", 0o600}, {db + ".lock", 0o600}, {backup, 0o600}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != f.mode {
			t.Errorf("%s: %v, want %v", f.path, fi.Mode(), f.mode)
		}
	}
}

// evil is what an attacker with a valid signature (or a hostile app) can put
// in front of the operator: a clear-screen, an OSC title sequence ended by
// BEL, a C1 CSI (U+009B), a carriage return and a bidi override.
const evil = "\x1b[2J\x1b]0;pwned\x07\u009b31m\r\u202e"

// rawControls lists the control characters still raw in terminal output.
func rawControls(s string) []string {
	var bad []string
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0x202e:
			bad = append(bad, fmt.Sprintf("%U", r))
		}
	}
	return bad
}

// TestTextOutputEscapesControls: events show, events list and dead list
// print a body, a header, an event id and an app's response full of
// terminal escapes as visible escapes; --json and --body keep the exact
// bytes.
func TestTextOutputEscapesControls(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "hw.db")
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	id := "evt_" + evil
	body := []byte(`{"note":"` + evil + `"}`)
	sum := sha256.Sum256(body)
	_, err = s.Record(ctx, &hookwarden.Receipt{Source: "std", Body: body, BodySHA256: sum, RemoteAddr: "127.0.0.1:1",
		ReceivedAt: time.Now(), Header: http.Header{"Content-Type": {"application/json"}, "X-Evil": {"h" + evil}},
		Events: []hookwarden.Event{{ID: id, Type: "t" + evil, BodySHA256: sum, Destinations: []string{"std/app"}}}})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Lease(ctx, "std/app", 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatal(jobs, err)
	}
	resp := "refused: " + evil + strings.Repeat("x", 3000)
	if err := s.Finish(ctx, hookwarden.Attempt{JobID: jobs[0].ID, Number: 1, StartedAt: time.Now(), StatusCode: 422, ExitCode: -1,
		Error: "HTTP 422" + evil, Response: []byte(resp), Verdict: hookwarden.Dead}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	for _, args := range [][]string{
		{"events", "show", "std", id},
		{"events", "list"},
		{"dead", "list"},
		{"events", "show", "std", "nope" + evil}, // the error message
		{"replay", "std", "nope" + evil, "--write"},
	} {
		_, out, errOut := runMain(t, append(args, "--db", db)...)
		if bad := rawControls(out + errOut); len(bad) > 0 {
			t.Errorf("%v: raw control characters %v in\n%s%s", args[:2], bad, out, errOut)
		}
		if !strings.Contains(out+errOut, `\x1b[2J\x1b]0;pwned\`) || !strings.Contains(out+errOut, `\u009b31m`) {
			t.Errorf("%v: the escapes are not shown visibly:\n%s%s", args[:2], out, errOut)
		}
	}
	// events show shows the app's response, capped.
	_, out, _ := runMain(t, "events", "show", "std", id, "--db", db)
	if !strings.Contains(out, "response to attempt 1 (3.0 KiB, the first 2.0 KiB):") || !strings.Contains(out, "refused: ") ||
		strings.Contains(out, strings.Repeat("x", 2100)) {
		t.Errorf("events show: the app's response is not shown capped:\n%s", out)
	}

	// Exact where it must be.
	code, out, _ := runMain(t, "events", "show", "std", id, "--json", "--db", db)
	var d hookwarden.EventDetail
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil {
		t.Fatalf("events show --json: %d %v\n%s", code, err, out)
	}
	if d.EventID != id || d.Type != "t"+evil || !bytes.Equal(d.Body, body) || d.ReceiptLog[0].Header.Get("X-Evil") != "h"+evil ||
		d.JobLog[0].Log[0].Response != resp {
		t.Errorf("--json did not keep the exact bytes: %+v", d)
	}
	if bad := rawControls(out); len(bad) > 0 {
		t.Errorf("--json has raw controls %v (JSON can escape them)", bad)
	}
	_, out, _ = runMain(t, "events", "list", "--json", "--db", db)
	var ev hookwarden.EventSummary
	if json.Unmarshal([]byte(out), &ev) != nil || ev.EventID != id {
		t.Errorf("events list --json: %q", out)
	}
	_, out, _ = runMain(t, "events", "show", "std", id, "--body", "--db", db)
	if out != string(body) {
		t.Errorf("--body is not byte for byte: %q", out)
	}
}

// TestShowQuarantinedReceiptHint: the receipt id of a quarantined request
// given to events show points to quarantine show.
func TestShowQuarantinedReceiptHint(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "hw.db")
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"no":"id"}`)
	res, err := s.Record(ctx, &hookwarden.Receipt{Source: "std", Body: body, BodySHA256: sha256.Sum256(body),
		RemoteAddr: "127.0.0.1:1", ReceivedAt: time.Now(), Header: http.Header{}, QuarantineReason: "no event id at json:id"})
	s.Close()
	if err != nil || res.Outcome != hookwarden.Quarantined {
		t.Fatal(res, err)
	}
	rid := fmt.Sprint(res.ReceiptID)
	code, _, errOut := runMain(t, "events", "show", "std", rid, "--db", db)
	if code != 1 || !strings.Contains(errOut, "receipt "+rid+" is a quarantined request: hookwarden quarantine show "+rid) {
		t.Errorf("events show of a quarantined receipt id: exit %d %s", code, errOut)
	}
	if _, _, errOut := runMain(t, "events", "show", "other", rid, "--db", db); strings.Contains(errOut, "quarantine show") {
		t.Errorf("hint for another source's receipt: %s", errOut)
	}
}

// TestDashboardReplayAudited: the dashboard's Replay button leaves an audit
// entry with origin dashboard and the client's address, shown by events show.
func TestDashboardReplayAudited(t *testing.T) {
	app := newSink(t, 422)
	a := startApp(t, app.URL, "")
	a.post("msg_dash", `{"type":"invoice.paid"}`)
	eventually(t, "dead letter", func() bool { return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`) == 1 })
	c := newBrowserClient(t, a)
	if after := c.replayFirstDead(); !strings.Contains(after, "Replayed 1 job(s)") {
		t.Fatalf("no replay:\n%s", after)
	}
	_, out, _ := runMain(t, "events", "show", "std", "msg_dash", "--db", a.dbPath, "--json")
	var d hookwarden.EventDetail
	if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Audit) != 1 || d.Audit[0].Origin != hookwarden.AuditDashboard ||
		!strings.HasPrefix(d.Audit[0].Actor, "127.0.0.1:") || d.Audit[0].Action != "replay" || !strings.Contains(string(d.Audit[0].Args), `"job_ids":[`) {
		t.Errorf("audit after the dashboard's replay: %+v (%v)", d.Audit, err)
	}
}

// TestWriteGuardOnlyForDB: the guard is about --db (a file named without
// its configuration); the configured database of a stopped service is
// changed without --write, and said to wait for a serve.
func TestWriteGuardOnlyForDB(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "hw.db")
	s, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{}`)
	sum := sha256.Sum256(body)
	if _, err := s.Record(ctx, &hookwarden.Receipt{Source: "std", Body: body, BodySHA256: sum, RemoteAddr: "127.0.0.1:1",
		ReceivedAt: time.Now(), Header: http.Header{},
		Events: []hookwarden.Event{{ID: "e1", BodySHA256: sum, Destinations: []string{"std/app"}}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	cfg := writeConfig(t, stdConfig(db, "", "http://127.0.0.1:9/", ""))
	code, out, errOut := runMain(t, "replay", "std", "e1", "--config", cfg)
	if code != 0 || !strings.Contains(out, "replayed 1 of 1 job") || !strings.Contains(out, "no serve runs on this file") {
		t.Errorf("replay --config on a stopped service's file: exit %d\n%s%s", code, out, errOut)
	}
}
