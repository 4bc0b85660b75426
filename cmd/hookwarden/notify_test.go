package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/sdnotify"
)

// syncBuffer collects a child's log; Write may race with reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveProc is a `hookwarden serve` child with its own environment and a
// captured log.
type serveProc struct {
	t         *testing.T
	cmd       *exec.Cmd
	log       *syncBuffer
	hook, adm string
	exited    chan struct{}
	exitErr   error
}

// serveConfig writes a configuration with one Standard Webhooks source
// "std" and one destination "app"; it replaces the file atomically, as an
// operator's editor or config management would.
func serveConfig(t *testing.T, path, hook, adm, db, destURL string, secrets []string, extra string) {
	t.Helper()
	var quoted []string
	for _, s := range secrets {
		quoted = append(quoted, fmt.Sprintf("%q", s))
	}
	doc := fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: %q }
log: { level: info, format: json }
sources:
  - name: std
    scheme: standard
    secrets: [%s]
    destinations:
      - name: app
        url: %q
        timeout: 30s
        concurrency: 4
        backoff: { initial: 20ms, max: 200ms }
%s`, hook, adm, db, strings.Join(quoted, ", "), destURL, extra)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// serveFiles writes serveConfig's configuration, with extra, for a new
// database in a temporary directory delivering to a new sink app, and
// returns the configuration's and the database's paths and the addresses.
func serveFiles(t *testing.T, extra string) (app *sink, cfg, db, hook, adm string) {
	t.Helper()
	app = newSink(t)
	dir := t.TempDir()
	cfg, db = filepath.Join(dir, "config.yaml"), filepath.Join(dir, "hw.db")
	hook, adm = freeAddr(t), freeAddr(t)
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, extra)
	return app, cfg, db, hook, adm
}

// start runs p.cmd with its log captured and kills it, if still running,
// when the test ends.
func (p *serveProc) start() {
	p.t.Helper()
	p.cmd.Stdout = io.Discard
	if testing.Verbose() {
		p.cmd.Stderr = io.MultiWriter(p.log, os.Stderr)
	} else {
		p.cmd.Stderr = p.log
	}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	go func() { p.exitErr = p.cmd.Wait(); close(p.exited) }()
	p.t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}

func startServe(t *testing.T, cfgPath, hook, adm string, env ...string) *serveProc {
	t.Helper()
	p := &serveProc{t: t, log: &syncBuffer{}, hook: hook, adm: adm, exited: make(chan struct{})}
	p.cmd = exec.Command(binPath, "serve", "--config", cfgPath)
	p.cmd.Env = append(os.Environ(), env...)
	p.start()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + adm + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("serve exited before it was ready: %v\n%s", p.exitErr, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became ready\n%s", p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *serveProc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// waitExit waits for the process to end and returns its error (nil: exit 0).
func (p *serveProc) waitExit(timeout time.Duration) error {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(timeout):
		p.t.Fatalf("serve did not exit within %s\n%s", timeout, p.log)
		return nil
	}
}

// waitLog waits until the log holds every one of the substrings on one line.
func (p *serveProc) waitLog(what string, parts ...string) string {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(p.log.String(), "\n") {
			all := true
			for _, s := range parts {
				all = all && strings.Contains(line, s)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no log line for %s (want %q)\n%s", what, parts, p.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeSystemd is the receiving end of NOTIFY_SOCKET.
type fakeSystemd struct {
	path string
	msgs chan string
}

func newFakeSystemd(t *testing.T) *fakeSystemd {
	t.Helper()
	// Socket paths are limited to 108 bytes; t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "hwsd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeSystemd{path: filepath.Join(dir, "notify"), msgs: make(chan string, 4096)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: f.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { conn.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			f.msgs <- string(buf[:n])
		}
	}()
	return f
}

// expect waits for a datagram holding state as one of its lines and returns
// the datagrams seen before it.
func (f *fakeSystemd) expect(t *testing.T, state string, timeout time.Duration) []string {
	t.Helper()
	var before []string
	deadline := time.After(timeout)
	for {
		select {
		case m := <-f.msgs:
			for _, line := range strings.Split(m, "\n") {
				if line == state {
					return before
				}
			}
			before = append(before, m)
		case <-deadline:
			t.Fatalf("no %s within %s; got %q", state, timeout, before)
			return nil
		}
	}
}

// quiet asserts that no datagram holding state arrives for d.
func (f *fakeSystemd) quiet(t *testing.T, state string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m := <-f.msgs:
			if strings.Contains(m, state) {
				t.Fatalf("got %q while it should have been withheld", m)
			}
		case <-deadline:
			return
		}
	}
}

func (f *fakeSystemd) drain() {
	for {
		select {
		case <-f.msgs:
		default:
			return
		}
	}
}

// TestSystemdNotifyReadyWatchdogStopping runs the real binary the way
// systemd does with Type=notify and WatchdogSec=: READY=1 once it serves,
// WATCHDOG=1 every half period while healthy, no ping while the database
// writer is wedged (another process holds the write lock), pings again when
// it recovers, STOPPING=1 on SIGTERM, exit 0.
func TestSystemdNotifyReadyWatchdogStopping(t *testing.T) {
	sd := newFakeSystemd(t)
	app := newSink(t)
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "hw.db")
	hook, adm := freeAddr(t), freeAddr(t)
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, "")
	const watchdogUsec = 600_000 // pings every 300 ms; each check has 300 ms
	p := startServe(t, cfg, hook, adm, "NOTIFY_SOCKET="+sd.path, fmt.Sprintf("WATCHDOG_USEC=%d", watchdogUsec))

	before := sd.expect(t, "READY=1", 10*time.Second)
	for _, m := range before {
		if strings.Contains(m, "STOPPING=1") {
			t.Fatalf("STOPPING before READY: %q", before)
		}
	}
	start := time.Now()
	for range 4 {
		sd.expect(t, "WATCHDOG=1", 5*time.Second)
	}
	if d := time.Since(start); d < 3*300*time.Millisecond {
		t.Fatalf("4 pings in %s: faster than half the watchdog period", d)
	}

	// Wedge the writer: hold SQLite's write lock from this process.
	raw := MustOpenRaw(t, db, "_txlock=immediate")
	defer raw.Close()
	tx, err := raw.Begin() // BEGIN IMMEDIATE
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // let a check already past its Ping finish
	sd.drain()
	sd.quiet(t, "WATCHDOG=1", 1500*time.Millisecond)
	p.waitLog("the withheld ping", `"level":"ERROR"`, "watchdog ping withheld", "database writer")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	sd.expect(t, "WATCHDOG=1", 5*time.Second)
	p.waitLog("the recovery", "watchdog pings resumed")

	p.signal(syscall.SIGTERM)
	sd.expect(t, "STOPPING=1", 10*time.Second)
	if err := p.waitExit(60 * time.Second); err != nil {
		t.Fatalf("serve exit after SIGTERM: %v\n%s", err, p.log)
	}
}

// TestWatchdogCheckNeedsWriterAndWorkers: the check behind WATCHDOG=1 is
// the writer answering plus ready(); stopped workers fail it.
func TestWatchdogCheckNeedsWriterAndWorkers(t *testing.T) {
	a := startApp(t, newSink(t).URL, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.watchdogCheck(ctx); err != nil {
		t.Fatalf("healthy app: watchdogCheck = %v", err)
	}
	a.Workers.Close()
	err := a.watchdogCheck(ctx)
	if err == nil || !strings.Contains(err.Error(), "workers") {
		t.Fatalf("stopped workers: watchdogCheck = %v, want a workers error", err)
	}
}

// TestSupervisorPingsOnlyWhileHealthy drives the watchdog loop with a check
// that fails on demand.
func TestSupervisorPingsOnlyWhileHealthy(t *testing.T) {
	sd := newFakeSystemd(t)
	var failing atomic.Bool
	s := &supervisor{n: sdnotify.New(sd.path), log: slog.New(slog.DiscardHandler), every: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		s.watchdog(ctx, func(context.Context) error {
			if failing.Load() {
				return errors.New("writer wedged")
			}
			return nil
		})
	})
	defer func() { cancel(); wg.Wait() }()
	sd.expect(t, "WATCHDOG=1", 2*time.Second)
	failing.Store(true)
	time.Sleep(50 * time.Millisecond) // a ping already decided may still arrive
	sd.drain()
	sd.quiet(t, "WATCHDOG=1", 200*time.Millisecond)
	failing.Store(false)
	sd.expect(t, "WATCHDOG=1", 2*time.Second)
}
