package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// MustScript writes an executable shell script into dir and returns its path.
func MustScript(tb testing.TB, dir, name, body string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	// A child forked by a parallel test while the file is open for writing
	// holds that descriptor until its own exec, and running the script
	// then fails with ETXTBSY ("text file busy", golang/go#22315). Forks
	// take ForkLock for writing: holding it for reading keeps them out.
	syscall.ForkLock.RLock()
	err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755)
	syscall.ForkLock.RUnlock()
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

func MustCommand(tb testing.TB, cfg CommandConfig) *Command {
	tb.Helper()
	c, err := NewCommand(cfg)
	if err != nil {
		tb.Fatalf("NewCommand: %v", err)
	}
	return c
}

// Not parallel: t.Setenv.
func TestCommandStdinAndEnv(t *testing.T) {
	t.Setenv("HOOKWARDEN_ADMIN_TOKEN", "must-not-leak")
	t.Setenv("LANG", "C.UTF-8")
	dir := t.TempDir()
	work := t.TempDir()
	script := MustScript(t, dir, "dump.sh", `cat > "$1/stdin"; env -0 > "$1/env"; echo done`)
	c := MustCommand(t, CommandConfig{
		Argv:    []string{script, dir},
		Env:     map[string]string{"APP_MODE": "test", "HOOKWARDEN_SOURCE": "overridden?"},
		Workdir: work,
		Timeout: 10 * time.Second,
	})
	job := testJob()
	job.Attempt = 3
	res := c.Deliver(context.Background(), job)
	if res.Class != Success || res.ExitCode != 0 || res.Err != nil || res.TimedOut || res.StatusCode != 0 {
		t.Fatalf("result = %+v (%s), want success", res, res.Response)
	}
	if string(res.Response) != "done\n" {
		t.Errorf("output = %q, want %q", res.Response, "done\n")
	}
	stdin, err := os.ReadFile(filepath.Join(dir, "stdin"))
	if err != nil || !bytes.Equal(stdin, job.Body) {
		t.Errorf("stdin = %q (%v), want %q", stdin, err, job.Body)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{
		"LANG":                       "C.UTF-8",
		"APP_MODE":                   "test",
		"HOOKWARDEN_SOURCE":          "stripe",
		"HOOKWARDEN_EVENT_ID":        "evt_1NXq",
		"HOOKWARDEN_EVENT_TYPE":      "invoice.paid",
		"HOOKWARDEN_ATTEMPT":         "3",
		"HOOKWARDEN_IDEMPOTENCY_KEY": "stripe:evt_1NXq",
		"PWD":                        work, // set by the shell: proves Workdir
	}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			want[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected env %s=%q in the child", k, got[k])
		}
	}
}

func TestCommandExit65IsDeadAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := MustScript(t, dir, "poison.sh", `echo "bad payload" >&2; exit 65`)
	q := newMemQueue(nil)
	MustOpen(t, New(q, []Destination{{Name: "s/cmd", Deliverer: MustCommand(t, CommandConfig{Argv: []string{script}}),
		Concurrency: DefaultCommandConcurrency}}, Options{PollInterval: 10 * time.Millisecond}))
	id := q.add("s/cmd", "evt_1", nil)
	got := q.MustFinal(t, id)
	if len(got) != 1 || got[0].Verdict != hookwarden.Dead || got[0].ExitCode != 65 ||
		string(got[0].Response) != "bad payload\n" || !strings.Contains(got[0].Error, "EX_DATAERR") {
		t.Fatalf("attempts = %+v, want one dead exit 65 with its output", got)
	}
}

func TestCommandFailsTwiceThenDelivers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := MustScript(t, dir, "flaky.sh", `
n=$(cat "$1/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$1/count"
[ "$HOOKWARDEN_ATTEMPT" = "$n" ] || { echo "attempt $HOOKWARDEN_ATTEMPT on run $n"; exit 65; }
[ "$n" -ge 3 ] && exit 0
echo "failing run $n" >&2
exit 1
`)
	q := newMemQueue(nil)
	MustOpen(t, New(q, []Destination{{Name: "s/cmd", Deliverer: MustCommand(t, CommandConfig{Argv: []string{script, dir}}),
		Backoff: Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}}}, Options{PollInterval: 10 * time.Millisecond}))
	id := q.add("s/cmd", "evt_1", nil)
	got := q.MustFinal(t, id)
	if len(got) != 3 {
		t.Fatalf("got %d attempts, want 3: %+v", len(got), got)
	}
	for i, a := range got[:2] {
		if a.Verdict != hookwarden.Retry || a.ExitCode != 1 || a.Error != "exit status 1" ||
			string(a.Response) != fmt.Sprintf("failing run %d\n", i+1) {
			t.Errorf("attempt %d = %s exit %d %q %q, want retry exit 1", i+1, a.Verdict, a.ExitCode, a.Error, a.Response)
		}
	}
	if a := got[2]; a.Verdict != hookwarden.Delivered || a.ExitCode != 0 || a.Number != 3 {
		t.Errorf("attempt 3 = %+v, want delivered exit 0", a)
	}
}

func TestCommandTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
	}{
		// The grandchild dies of SIGTERM with the rest of the group.
		{"term", `sleep 300 & echo $! > "$1/gc.pid"; echo $$ > "$1/leader.pid"; echo started; sleep 300`},
		// The grandchild ignores SIGTERM: SIGKILL after the grace gets it.
		{"kill", `(trap '' TERM; exec sleep 300) & echo $! > "$1/gc.pid"; echo $$ > "$1/leader.pid"; echo started; wait`},
		// The leader itself ignores SIGTERM.
		{"stubborn leader", `trap '' TERM; sleep 300 & echo $! > "$1/gc.pid"; echo $$ > "$1/leader.pid"; echo started; wait; wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			script := MustScript(t, dir, "hang.sh", tt.script)
			c := MustCommand(t, CommandConfig{Argv: []string{script, dir}, Timeout: time.Second,
				KillGrace: 300 * time.Millisecond})
			start := time.Now()
			res := c.Deliver(context.Background(), testJob())
			took := time.Since(start)
			if res.Class != Transient || !res.TimedOut || res.Err == nil || !strings.Contains(res.Err.Error(), "timed out") {
				t.Fatalf("result = %+v, want a transient timeout", res)
			}
			if !strings.HasPrefix(string(res.Response), "started\n") {
				t.Errorf("output = %q, want it kept up to the kill", res.Response)
			}
			if took > c.MaxDuration()+2*time.Second {
				t.Errorf("Deliver took %s, want at most about %s", took, c.MaxDuration())
			}
			for _, f := range []string{"gc.pid", "leader.pid"} {
				mustProcessGone(t, filepath.Join(dir, f))
			}
		})
	}
}

func TestCommandCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := MustScript(t, dir, "hang.sh", `sleep 300 & echo $! > "$1/gc.pid"; : > "$1/ready"; wait`)
	c := MustCommand(t, CommandConfig{Argv: []string{script, dir}, Timeout: time.Minute, KillGrace: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() { // cancel once the script runs
		defer cancel()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
				return
			}
			select {
			case <-tick.C:
			case <-stopped:
				return
			}
		}
	}()
	res := c.Deliver(ctx, testJob())
	close(stopped)
	if res.Class != Transient || res.TimedOut || res.Err == nil || !strings.Contains(res.Err.Error(), "cancelled") {
		t.Fatalf("result = %+v, want a transient cancellation", res)
	}
	mustProcessGone(t, filepath.Join(dir, "gc.pid"))
}

// mustProcessGone reads a pid from file and waits until that process no
// longer exists (a zombie left for a non-reaping init counts as gone).
func mustProcessGone(tb testing.TB, pidFile string) {
	tb.Helper()
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		tb.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		tb.Fatalf("pid file %s: %q", pidFile, raw)
	}
	waitFor(tb, fmt.Sprintf("process %d from %s to be gone", pid, filepath.Base(pidFile)), func() bool {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		i := bytes.LastIndexByte(stat, ')')
		return i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
	})
}

func TestCommandLargeOutputIsCapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := MustScript(t, dir, "loud.sh", `echo START; head -c 10485760 /dev/zero | tr '\0' x; echo END >&2`)
	c := MustCommand(t, CommandConfig{Argv: []string{script}, Timeout: 30 * time.Second})
	start := time.Now()
	res := c.Deliver(context.Background(), testJob())
	if res.Class != Success || res.TimedOut {
		t.Fatalf("result = %s %v timed out %v, want success", res.Class, res.Err, res.TimedOut)
	}
	t.Logf("10 MiB of output took %s", time.Since(start))
	const total = len("START\n") + 10<<20 + len("END\n")
	marker := fmt.Sprintf("\n...[%d bytes omitted]...\n", total-2*outputKeep)
	out := string(res.Response)
	if len(out) != 2*outputKeep+len(marker) {
		t.Errorf("output is %d bytes, want %d", len(out), 2*outputKeep+len(marker))
	}
	if !strings.HasPrefix(out, "START\nxxx") || !strings.HasSuffix(out, "xxxEND\n") || !strings.Contains(out, marker) {
		t.Errorf("output head %q tail %q, want START..., the marker %q and ...END", out[:16], out[len(out)-16:], marker)
	}
}

func TestCommandConcurrencyOneNeverOverlaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := MustScript(t, dir, "serial.sh", `
if ! mkdir "$1/lock" 2>/dev/null; then echo overlap >> "$1/overlaps"; exit 0; fi
echo "$HOOKWARDEN_EVENT_ID" >> "$1/runs"
sleep 0.05
rmdir "$1/lock"
`)
	q := newMemQueue(nil)
	var ids []int64
	for i := range 5 {
		ids = append(ids, q.add("s/cmd", fmt.Sprint("evt_", i), nil))
	}
	MustOpen(t, New(q, []Destination{{Name: "s/cmd", Deliverer: MustCommand(t, CommandConfig{Argv: []string{script, dir}}),
		Concurrency: DefaultCommandConcurrency}}, Options{PollInterval: 10 * time.Millisecond}))
	for _, id := range ids {
		if got := q.MustFinal(t, id); got[len(got)-1].Verdict != hookwarden.Delivered {
			t.Fatalf("job %d: %+v", id, got)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "overlaps")); err == nil {
		t.Errorf("runs overlapped: %q", b)
	}
	runs, _ := os.ReadFile(filepath.Join(dir, "runs"))
	if n := strings.Count(string(runs), "\n"); n != 5 {
		t.Errorf("%d runs, want 5: %q", n, runs)
	}
}

func TestCommandStartFailureIsTransient(t *testing.T) {
	t.Parallel()
	c := MustCommand(t, CommandConfig{Argv: []string{filepath.Join(t.TempDir(), "missing")}})
	res := c.Deliver(context.Background(), testJob())
	if res.Class != Transient || res.ExitCode != -1 || res.Err == nil || !strings.Contains(res.Err.Error(), "start") {
		t.Fatalf("result = %+v, want a transient start failure", res)
	}
}

func TestCommandOtherExitsAreTransient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		script, err string
		exit        int
	}{
		{"exit 2", "exit status 2", 2},
		{"exit 64", "exit status 64", 64},
		{"kill -9 $$", "killed by signal killed", -1},
	} {
		c := MustCommand(t, CommandConfig{Argv: []string{MustScript(t, dir, "x.sh", tt.script)}})
		res := c.Deliver(context.Background(), testJob())
		if res.Class != Transient || res.ExitCode != tt.exit || res.Err == nil || res.Err.Error() != tt.err {
			t.Errorf("%s: result = %s exit %d %v, want transient exit %d %q", tt.script, res.Class, res.ExitCode, res.Err, tt.exit, tt.err)
		}
	}
}

func TestNewCommandErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []CommandConfig{
		{},
		{Argv: []string{""}},
		{Argv: []string{"true"}, Timeout: -1},
		{Argv: []string{"true"}, Env: map[string]string{"A=B": "c"}},
		{Argv: []string{"true"}, Env: map[string]string{"A": "c\x00d"}},
	} {
		if _, err := NewCommand(cfg); err == nil {
			t.Errorf("NewCommand(%+v) = nil error", cfg)
		}
	}
}
