package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckReportsEveryProblemWithItsPath(t *testing.T) {
	t.Setenv("HW_TEST_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	p := writeConfig(t, `
listen: "127.0.0.1:8080"
databse: { path: x.db }
sources:
  - name: stripe
    scheme: stripee
    secrets: ["env:HW_TEST_SECRET"]
    destinations:
      - name: app
        url: "http://127.0.0.1:3000/hook"
        max_attemps: 3
  - name: gh
    scheme: standard
    secrets: ["env:HW_TEST_SECRET"]
    destinations:
      - name: nowhere
      - name: both
        url: "http://127.0.0.1:3000/"
        command: ["/bin/true"]
      - name: late
        url: "http://127.0.0.1:3000/"
        timeout: 10
`)
	code, out, _ := runMain(t, "check", "--config", p)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, out)
	}
	for _, want := range []string{
		`databse: unknown key "databse" (did you mean "database"?)`,
		`sources[0].destinations[0].max_attemps: unknown key "max_attemps" (did you mean "max_attempts"?)`,
		`sources[0].scheme: unknown scheme "stripee"`,
		`sources[1].destinations[0]: needs url or command`,
		`sources[1].destinations[1]: has both url and command`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	// The secret's value never appears.
	if strings.Contains(out, "MfKQ9r8") {
		t.Errorf("check printed a secret value:\n%s", out)
	}
}

func TestCheckDurationWithoutUnit(t *testing.T) {
	p := writeConfig(t, `
sources:
  - name: s
    scheme: standard
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
    destinations:
      - name: app
        url: "http://127.0.0.1:3000/"
        timeout: 10
`)
	code, out, _ := runMain(t, "check", "--config", p)
	if code != 2 || !strings.Contains(out, "sources[0].destinations[0].timeout") || !strings.Contains(out, "no unit") {
		t.Fatalf("exit %d, output:\n%s\nwant exit 2 naming the timeout's path and the missing unit", code, out)
	}
}

func TestCheckRetentionShorterThanRedrive(t *testing.T) {
	p := writeConfig(t, `
retention: { claims: 7d }
sources:
  - name: stripe
    scheme: stripe
    secrets: ["whsec_x"]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
`)
	code, out, _ := runMain(t, "check", "--config", p)
	if code != 2 || !strings.Contains(out, "retention.claims: 7d is shorter than source \"stripe\"'s retry_horizon + redrive_window (33d)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestCheckGoodConfigAndEnvOverride(t *testing.T) {
	// Port 0: check binds the listen addresses, and 8080 may be taken here.
	p := writeConfig(t, `
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
sources:
  - name: stripe
    scheme: stripe
    secrets: ["whsec_x"]
    destinations:
      - name: app
        url: "http://127.0.0.1:3000/"
        env: { NOT_USED: "1" }
`)
	code, out, errOut := runMain(t, "check", "--config", p)
	if code != 0 || !strings.Contains(out, ": ok") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	t.Setenv("HOOKWARDEN_LISTEN", "not-an-address")
	code, out, _ = runMain(t, "check", "--config", p)
	if code != 2 || !strings.Contains(out, `listen: "not-an-address" is not host:port`) {
		t.Fatalf("environment override not applied: exit %d\n%s", code, out)
	}
}

func TestConfigEnvOverrideAndSecretRefs(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	os.WriteFile(secretFile, []byte("from-file\n"), 0o600)
	t.Setenv("CREDS", dir)
	t.Setenv("HOOKWARDEN_DATABASE_PATH", "/tmp/override.db")
	t.Setenv("HOOKWARDEN_RETENTION_PAYLOADS", "7d")
	cfg, problems, err := loadConfig([]byte(`
sources:
  - name: mail
    scheme: hmac
    secrets: ["file:${CREDS}/secret"]
    hmac: { header: X-Sig }
    destinations:
      - name: run
        command: ["/bin/cat"]
        env: { MixedCase_Name: "v" }
`), "t")
	if err != nil || len(problems) != 0 {
		t.Fatalf("%v %v", err, problems)
	}
	if cfg.Database.Path != "/tmp/override.db" || cfg.Retention.Payloads.String() != "7d" {
		t.Errorf("env overrides: path %q payloads %s", cfg.Database.Path, cfg.Retention.Payloads)
	}
	if v, _ := cfg.Sources[0].Secrets[0].Resolve(); v != "from-file" {
		t.Errorf("file secret resolved to %q", v)
	}
	if _, ok := cfg.Sources[0].Destinations[0].Env["MixedCase_Name"]; !ok {
		t.Errorf("env names must keep their case: %v", cfg.Sources[0].Destinations[0].Env)
	}
	d := cfg.Sources[0].Destinations[0]
	if d.Concurrency != 1 || d.Timeout.String() != "1m0s" {
		t.Errorf("command defaults: concurrency %d timeout %s, want 1 and 1m0s", d.Concurrency, d.Timeout)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	if code, _, _ := runMain(t, "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
	if code, _, _ := runMain(t, "check", "--config", "/does/not/exist.yaml"); code != 2 {
		t.Errorf("missing config: exit %d, want 2", code)
	}
	if code, out, _ := runMain(t, "version"); code != 0 || !strings.HasPrefix(out, "hookwarden ") {
		t.Errorf("version: exit %d %q", code, out)
	}
}

// The shipped example must stay valid: every key known, every value sane.
// Only its secret references cannot resolve here.
func TestExampleConfigIsValid(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "mailhook.secret"), []byte("s"), 0o600)
	doc, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc = bytes.ReplaceAll(doc, []byte("/etc/hookwarden/mailhook.secret"), []byte(filepath.Join(dir, "mailhook.secret")))
	t.Setenv("HOOKWARDEN_ADMIN_TOKEN", "t")
	t.Setenv("STRIPE_WEBHOOK_SECRET", "whsec_x")
	t.Setenv("APP_WEBHOOK_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	t.Setenv("META_APP_SECRET", "app-secret")
	t.Setenv("META_VERIFY_TOKEN", "verify-token")
	_, problems, err := loadConfig(doc, "config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("config.example.yaml: %v", p)
	}
}
