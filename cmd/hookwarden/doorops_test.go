package main

// The door, round three (issue 46): the operator-side attacks and the new
// user's frictions that the binary shows.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
