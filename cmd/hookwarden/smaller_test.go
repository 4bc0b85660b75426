package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/config"
)

func TestVersionFlagPrintsTheVersionLine(t *testing.T) {
	_, want, _ := runMain(t, "version")
	for _, flag := range []string{"--version", "-v"} {
		code, out, errOut := runMain(t, flag)
		if code != 0 || out != want || !strings.HasPrefix(out, "hookwarden ") {
			t.Errorf("%s: exit %d %q %q, want %q as from `version`", flag, code, out, errOut, want)
		}
	}
}

// cobra takes backquoted text in a flag's usage as its value name: the
// --demo flag must not read "--demo make run".
func TestServeHelpHasNoStrayValueName(t *testing.T) {
	code, out, _ := runMain(t, "serve", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "--demo" && f[1] == "make" {
			t.Errorf("stray value name: %q", l)
		}
	}
}

// TestJSONLogsWriteDurationsInSeconds: a real serve logging JSON writes its
// drain timeout (a time.Duration) as seconds, not nanoseconds.
func TestJSONLogsWriteDurationsInSeconds(t *testing.T) {
	dir := t.TempDir()
	adm := freeAddr(t)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: %q }
database: { path: hw.db }
log: { format: json }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
`, adm, testSecret)), 0o600)
	cmd := exec.Command(binPath, "serve", "--config", cfg)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "serve to be ready", func() bool {
		resp, err := http.Get("http://" + adm + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	found := false
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil || line["msg"] != "workers draining" {
			continue
		}
		found = true
		// Any drain timeout in seconds is well under 1e6; in nanoseconds, over.
		if v, ok := line["timeout"].(float64); !ok || v <= 0 || v >= 1e6 {
			t.Errorf("timeout logged as %v, want seconds: %s", line["timeout"], sc.Bytes())
		}
	}
	if !found {
		t.Fatalf("no \"workers draining\" line in the JSON logs:\n%s", logs.String())
	}
	var text bytes.Buffer
	newLogger(config.Log{Level: "info", Format: "text"}, &text).Info("x", "took", 1500*time.Millisecond)
	if !strings.Contains(text.String(), "took=1.5") {
		t.Errorf("text log: %q, want took=1.5", text.String())
	}
}

// TestSignDemoNeverMakesASecret: outside the demo's directory `sign --demo`
// fails naming the file it looked for, and creates nothing; where the demo
// ran it signs with the demo's secret.
func TestSignDemoNeverMakesASecret(t *testing.T) {
	dir := t.TempDir()
	code, out := runBinIn(t, dir, nil, "sign", "--demo")
	want := filepath.Join(dir, "data", "demo.secret")
	if code != 2 || !strings.Contains(out, "no demo secret at "+want) {
		t.Fatalf("exit %d, want 2 naming %s:\n%s", code, want, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Fatal("sign --demo created a data directory")
	}
	// serve --demo makes the secret; sign --demo then uses it.
	secret, err := demoSecret(filepath.Join(dir, "data", "hookwarden.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	code, out = runBinIn(t, dir, nil, "sign", "--demo")
	if code != 0 || !strings.Contains(out, "Webhook-Signature: v1,") {
		t.Fatalf("sign --demo beside the demo's data: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(want); string(b) != secret {
		t.Fatal("sign --demo changed the demo secret")
	}
}

func TestDemoBannerNamesTheDatabaseForReadCommands(t *testing.T) {
	var b bytes.Buffer
	demoBanner(&b, "127.0.0.1:8080", "127.0.0.1:8081", "/srv/hw/data/hookwarden.db", "127.0.0.1:8082")
	if !strings.Contains(b.String(), "./bin/hookwarden events list --db /srv/hw/data/hookwarden.db") {
		t.Fatalf("banner:\n%s", b.String())
	}
}
