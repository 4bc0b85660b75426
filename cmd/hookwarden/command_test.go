package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// A command destination interrupted by kill -9 of hookwarden: the running
// command dies with it, and after restart runs again with the same
// HOOKWARDEN_IDEMPOTENCY_KEY until it succeeds.
func TestCommandRerunsAfterCrashWithSameKey(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	marker := filepath.Join(dir, "first-run-started")
	script := filepath.Join(dir, "deploy.sh")
	os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
echo "$HOOKWARDEN_IDEMPOTENCY_KEY $HOOKWARDEN_ATTEMPT $$" >> %q
if [ ! -e %q ]; then
  : > %q
  exec sleep 60   # the first run hangs until hookwarden is killed
fi
exit 0
`, log, marker, marker)), 0o755)

	c := &child{t: t, cfg: filepath.Join(dir, "config.yaml"), hook: freeAddr(t), adm: freeAddr(t)}
	os.WriteFile(c.cfg, []byte(fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: %q }
log: { level: warn }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: deploy
        command: [%q]
        timeout: 2m
`, c.hook, c.adm, filepath.Join(dir, "hw.db"), testSecret, script)), 0o600)
	c.start()
	if got := do(t, signed(t, "http://"+c.hook+"/hooks/std", "msg_cmd", []byte(`{"type":"push"}`), time.Now(), testSecret)); got.Status != "accepted" {
		t.Fatalf("post: %+v", got)
	}
	eventually(t, "first run to start", func() bool { _, err := os.Stat(marker); return err == nil })
	first := readRuns(t, log)
	if len(first) != 1 {
		t.Fatalf("runs: %v", first)
	}
	pid, _ := strconv.Atoi(first[0][2])
	c.kill9()
	// The kernel kills the orphaned command (Pdeathsig): nothing runs on
	// from a dead hookwarden.
	eventually(t, "the interrupted command to die", func() bool {
		return syscall.Kill(pid, 0) != nil || isZombie(pid)
	})

	c.start()
	defer c.stop()
	eventually(t, "the command to run again", func() bool { return len(readRuns(t, log)) >= 2 })
	runs := readRuns(t, log)
	for _, r := range runs {
		if r[0] != "std:msg_cmd" {
			t.Fatalf("HOOKWARDEN_IDEMPOTENCY_KEY %q, want std:msg_cmd", r[0])
		}
	}
	if runs[1][1] != "2" {
		t.Errorf("second run HOOKWARDEN_ATTEMPT=%s, want 2", runs[1][1])
	}
}

func readRuns(t *testing.T, path string) [][]string {
	b, _ := os.ReadFile(path)
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			out = append(out, f)
		}
	}
	return out
}

func isZombie(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return true
	}
	st, err := p.Stat()
	if err != nil {
		return true
	}
	return st.State == "Z"
}
