package main

// The door, round three (issue 46): the operator-side attacks and the new
// user's frictions that the binary shows.

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// A database directory that other users may write (0777, no sticky bit) is
// refused by check and by serve, naming the directory: in it, a planted
// symlink could make serve rewrite another file. serve writes nothing there.
func TestCheckAndServeRefuseSharedDatabaseDir(t *testing.T) {
	_, cfg, _, hook, adm := serveFiles(t, "")
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil { // whatever the umask
		t.Fatal(err)
	}
	db := filepath.Join(shared, "hw.db")
	serveConfig(t, cfg, hook, adm, db, "http://127.0.0.1:9/", []string{testSecret}, "")
	for _, sub := range []string{"check", "serve"} {
		code, out := runBinIn(t, t.TempDir(), nil, sub, "--config", cfg)
		if code != 2 || !strings.Contains(out, "database.path") || !strings.Contains(out, "directory "+shared+" is writable by other users") {
			t.Errorf("%s: exit %d, want 2 naming database.path and %s:\n%s", sub, code, shared, out)
		}
	}
	if ents, _ := os.ReadDir(shared); len(ents) != 0 {
		t.Errorf("serve wrote into the refused directory: %v", ents)
	}
	// The sticky bit (as on /tmp) makes it safe: check passes.
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if code, out := runBinIn(t, t.TempDir(), nil, "check", "--config", cfg); code != 0 {
		t.Errorf("check on a sticky directory: exit %d\n%s", code, out)
	}
}

// An unescaped @ (or /, #) in database.url's password: check names the key
// and the fix and prints no part of the user or password, the tail after
// the @ included (pgx takes it for the host).
func TestDatabaseURLPasswordNeverEchoed(t *testing.T) {
	for _, u := range []string{
		"postgres://hw:Xq7w@SignLeak10@127.0.0.1:1/hw",
		"postgres://hw:Xq/7w@SignLeak10@127.0.0.1:1/hw",
		"postgres://hw:Xq#7w@SignLeak10@127.0.0.1:1/hw",
		"postgres://hw:Xq 7w@SignLeak10@127.0.0.1:1/hw",
	} {
		cfg := writeConfig(t, dbDoc(`{ url: "env:HW_TEST_DB_URL" }`))
		for _, sub := range []string{"check", "serve"} {
			code, out := runBinIn(t, t.TempDir(), []string{"HW_TEST_DB_URL=" + u}, sub, "--config", cfg)
			if code == 0 || !strings.Contains(out, "database.url") {
				t.Errorf("%s %s: exit %d, want a refusal at database.url:\n%s", sub, u, code, out)
			}
			for _, secret := range []string{"SignLeak10", "Xq"} {
				if strings.Contains(out, secret) {
					t.Errorf("%s %s: output holds %q:\n%s", sub, u, secret, out)
				}
			}
		}
	}
}

// A secret file (or variable) holding only whitespace is no secret: check
// refuses it at the key path that references it.
func TestCheckRefusesWhitespaceSecret(t *testing.T) {
	dir := t.TempDir()
	blank := filepath.Join(dir, "blank")
	if err := os.WriteFile(blank, []byte("  \t\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HW_TEST_BLANK", "   ")
	p := writeConfig(t, `
sources:
  - name: s
    scheme: standard
    secrets: ["file:`+blank+`"]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
  - name: t
    scheme: standard
    secrets: ["env:HW_TEST_BLANK"]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
`)
	code, out, _ := runMain(t, "check", "--config", p)
	if code != 2 || !strings.Contains(out, "sources[0].secrets[0]: secret file:"+blank+": file "+blank+" holds only whitespace") ||
		!strings.Contains(out, "sources[1].secrets[0]: secret env:HW_TEST_BLANK: environment variable HW_TEST_BLANK holds only whitespace") {
		t.Fatalf("exit %d, want 2 naming both key paths:\n%s", code, out)
	}
}

// gaps' text: a PostgreSQL instance's restart while others served is listed
// as a restart, apart from the outage windows; the backfill hint goes once
// every window is recovered; with TZ=UTC no time is printed twice.
func TestGapsTextRestartsAndRecoveredFooter(t *testing.T) {
	outputZone = time.UTC
	t.Cleanup(func() { outputZone = nil })
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	rep := hookwarden.GapReport{Runs: 3, Outages: []hookwarden.Outage{
		{Kind: "restart", Start: t0, End: t0.Add(3 * time.Second), Length: 3 * time.Second, Crash: true},
	}}
	var b bytes.Buffer
	printGaps(&b, rep, true)
	out := b.String()
	if strings.Contains(out, "outage windows (") || strings.Contains(out, "crash") ||
		!strings.Contains(out, "no outage windows") || !strings.Contains(out, "instance restarts") || !strings.Contains(out, "restart") {
		t.Errorf("a restart while others served, text:\n%s", out)
	}

	recovered := hookwarden.Outage{Kind: "outage", Start: t0, End: t0.Add(time.Hour), Length: time.Hour, Crash: true,
		Sources: []hookwarden.SourceRecovery{{Source: "stripe", Recovery: hookwarden.RecoveryRecovered}}}
	b.Reset()
	printGaps(&b, hookwarden.GapReport{Runs: 2, Outages: []hookwarden.Outage{recovered}}, true)
	out = b.String()
	if strings.Contains(out, "run `hookwarden backfill") {
		t.Errorf("every window recovered, yet the footer says to run backfill:\n%s", out)
	}
	if strings.Contains(out, "LOCAL TIME") || strings.Count(out, "10:00:00") > 2 {
		t.Errorf("TZ=UTC: times printed twice:\n%s", out)
	}
	recovered.Sources[0].Recovery = hookwarden.RecoveryRecoverable
	b.Reset()
	printGaps(&b, hookwarden.GapReport{Runs: 2, Outages: []hookwarden.Outage{recovered}}, true)
	if !strings.Contains(b.String(), "run `hookwarden backfill SOURCE`") {
		t.Errorf("a recoverable window without the hint:\n%s", b.String())
	}
}

// backfill --dry-run says what it would do, not that it did.
func TestBackfillDryRunSaysWould(t *testing.T) {
	var out, errb bytes.Buffer
	g := &globals{stdout: &out, stderr: &errb}
	n := 3
	printBackfill(g, hookwarden.BackfillRun{Source: "stripe", Method: "list", DryRun: true,
		BackfillCounts: hookwarden.BackfillCounts{Listed: &n, AlreadyClaimed: new(int), Recovered: 3}})
	if !strings.Contains(out.String(), "would recover 3") || strings.Contains(out.String(), "recovered 3") {
		t.Errorf("dry run: %q", out.String())
	}
}

// pause with a wrong name lists the destinations there are.
func TestPauseUnknownListsDestinations(t *testing.T) {
	p := writeConfig(t, dbDoc(`{ path: "hw.db" }`))
	for _, arg := range []string{"big", "std/nope"} {
		code, _, errOut := runMain(t, "pause", arg, "--config", p)
		if code != 2 || !strings.Contains(errOut, "the destinations are ") {
			t.Errorf("pause %s: exit %d %q, want 2 listing the destinations", arg, code, errOut)
		}
	}
}

// What serve stops on at start, check reports first: a file migrate-store
// marked as moved, a port another process holds, a command destination's
// missing program. serve stopped by a port in use leaves no new database
// or directory behind.
func TestCheckSeesWhatServeStartStopsOn(t *testing.T) {
	ctx := context.Background()
	_, cfg, db, hook, adm := serveFiles(t, "")
	st, err := sqlitestore.Open(ctx, db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetMark(ctx, sqlitestore.Mark{Kind: sqlitestore.MarkMoved, At: time.Now(), Origin: db, Target: "postgres://db.example:5432/hw"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, out := runBinIn(t, t.TempDir(), nil, "check", "--config", cfg)
	if code != 2 || !strings.Contains(out, "database.path: "+db+" was moved to postgres://db.example:5432/hw") {
		t.Errorf("check on a moved file: exit %d, want 2 naming the mark:\n%s", code, out)
	}

	// A port in use, and a program that is not there.
	held, err := net.Listen("tcp", hook)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	fresh := filepath.Join(t.TempDir(), "new", "dir", "hw.db")
	serveConfig(t, cfg, hook, adm, fresh, "http://127.0.0.1:9/", []string{testSecret}, `
      - name: script
        command: ["/nonexistent/bin/deliver", "x"]
      - name: bare
        command: ["hookwarden-no-such-program"]
`)
	code, out = runBinIn(t, t.TempDir(), nil, "check", "--config", cfg)
	for _, want := range []string{
		"listen: " + hook + " is in use by another process",
		"sources[0].destinations[1].command: program /nonexistent/bin/deliver: ",
		`sources[0].destinations[2].command: program "hookwarden-no-such-program" is not in PATH`,
	} {
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("check: exit %d, want 2 and %q:\n%s", code, want, out)
		}
	}
	serveConfig(t, cfg, hook, adm, fresh, "http://127.0.0.1:9/", []string{testSecret}, "")
	if code, out := runBinIn(t, t.TempDir(), nil, "serve", "--config", cfg); code == 0 || !strings.Contains(out, "address already in use") {
		t.Errorf("serve on a port in use: exit %d:\n%s", code, out)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(fresh), "..")); !os.IsNotExist(err) {
		t.Errorf("serve stopped by a port in use left the database's directory behind (%v)", err)
	}
}

// HOOKWARDEN_ADMIN_TOKEN overrides admin.token: a short one on a
// non-loopback admin.listen is refused whatever its origin (the file's
// reference, the override of a literal, no key at all), and an override of
// a file's other value is said, without the value.
func TestAdminTokenFromTheEnvironment(t *testing.T) {
	doc := func(token string) string {
		return `
admin:
  listen: "0.0.0.0:18099"
` + token + `
sources:
  - name: s
    scheme: standard
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
`
	}
	long := strings.Repeat("k", 40)
	t.Setenv("HW_TEST_LONG", long)
	t.Setenv("HOOKWARDEN_ADMIN_TOKEN", "short")
	for _, tok := range []string{`  token: "env:HOOKWARDEN_ADMIN_TOKEN"`, `  token: "` + long + `"`, `  token: "env:HW_TEST_LONG"`, ""} {
		_, problems, err := loadConfigIn([]byte(doc(tok)), "test", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var errs []string
		for _, p := range config.Errors(problems) {
			errs = append(errs, p.String())
		}
		if all := strings.Join(errs, "\n"); !strings.Contains(all, "admin.token: too short (5 characters)") {
			t.Errorf("token %q with HOOKWARDEN_ADMIN_TOKEN=short: %s", tok, all)
		}
		warned := false
		for _, p := range problems {
			if p.Warning && p.Path == "admin.token" && strings.Contains(p.Message, "HOOKWARDEN_ADMIN_TOKEN replaces the file's value") {
				warned = true
				if strings.Contains(p.Message, "short") || strings.Contains(p.Message, long) {
					t.Errorf("the warning quotes a token: %s", p.Message)
				}
			}
		}
		if want := tok != "" && !strings.Contains(tok, "env:HOOKWARDEN_ADMIN_TOKEN"); warned != want {
			t.Errorf("token %q: override warning %v, want %v", tok, warned, want)
		}
	}
}

// Two receivers on one host get two instance names by default (the host
// and the listen port); instance_name sets it, and a bad one is refused.
func TestInstanceName(t *testing.T) {
	host, _ := os.Hostname()
	cfg, problems, err := loadConfigIn([]byte("listen: \"127.0.0.1:8090\"\n"+dbDoc(`{ path: "hw.db" }`)), "test", t.TempDir())
	if err != nil || len(config.Errors(problems)) > 0 {
		t.Fatal(err, problems)
	}
	if got := cfg.Instance(); got != host+":8090" {
		t.Errorf("default instance %q, want %q", got, host+":8090")
	}
	cfg, _, _ = loadConfigIn([]byte("instance_name: web1-a\n"+dbDoc(`{ path: "hw.db" }`)), "test", t.TempDir())
	if got := cfg.Instance(); got != "web1-a" {
		t.Errorf("instance %q, want web1-a", got)
	}
	_, problems, _ = loadConfigIn([]byte("instance_name: \"web 1\"\n"+dbDoc(`{ path: "hw.db" }`)), "test", t.TempDir())
	if errs := config.Errors(problems); len(errs) != 1 || errs[0].Path != "instance_name" {
		t.Errorf("instance_name with a space: %v", errs)
	}
}

// Group write by the user's own primary group (a user private group under
// umask 002) is no other user: the directory is accepted; write for
// others is refused even on a directory serve has yet to create a child in.
func TestSharedDirGroupOwnAndOthers(t *testing.T) {
	_, cfg, _, hook, adm := serveFiles(t, "")
	dir := filepath.Join(t.TempDir(), "grp")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o775); err != nil {
		t.Fatal(err)
	}
	serveConfig(t, cfg, hook, adm, filepath.Join(dir, "hw.db"), "http://127.0.0.1:9/", []string{testSecret}, "")
	if code, out := runBinIn(t, t.TempDir(), nil, "check", "--config", cfg); code != 0 {
		t.Errorf("0775 directory of the user's own group: exit %d\n%s", code, out)
	}
	if err := os.Chmod(dir, 0o707); err != nil {
		t.Fatal(err)
	}
	serveConfig(t, cfg, hook, adm, filepath.Join(dir, "sub", "hw.db"), "http://127.0.0.1:9/", []string{testSecret}, "")
	if code, out := runBinIn(t, t.TempDir(), nil, "check", "--config", cfg); code != 2 || !strings.Contains(out, "directory "+dir+" is writable by other users") {
		t.Errorf("o+w parent of a directory serve would create: exit %d\n%s", code, out)
	}
}
