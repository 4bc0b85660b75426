package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/hookwarden/hookwarden/internal/loopback"
	"github.com/hookwarden/hookwarden/internal/metrics"
)

// server is a server process under test: the ack-only baseline or
// hookwarden serve.
type server struct {
	name      string
	cmd       *exec.Cmd
	addr      string // receiver host:port
	adminAddr string // hookwarden only
	dir       string // hookwarden: its work directory (config, database, log)
	dbPath    string
	logPath   string
	done      chan struct{} // closed when the process has exited
	waitErr   error         // its exit status, once done is closed
	onExit    func()
	cpu0      float64
}

// freePort returns a loopback address that was free a moment ago, below the
// range the load generator's outgoing connections draw their ports from.
// Another process may still take it before the child binds it, so
// startHookwarden retries on a bind refused. A variable so that tests can
// hand out a taken port.
var freePort = loopback.Addr

// children are killed when the harness stops, however it stops.
var children = map[*server]bool{}

func killChildren() {
	for s := range children {
		if s.cmd.Process != nil {
			_ = s.cmd.Process.Kill()
		}
	}
}

func (s *server) start(ctx context.Context, cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	s.cmd = cmd
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	children[s] = true
	s.done = make(chan struct{})
	go func() {
		s.waitErr = cmd.Wait()
		if s.onExit != nil {
			s.onExit()
		}
		close(s.done)
	}()
	return nil
}

// startBaseline runs this harness's own ack-only server in a child process.
func startBaseline(ctx context.Context, secret string) (*server, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s := &server{name: "baseline", addr: addr}
	cmd := exec.Command(self, "ack-server", "-addr", addr)
	cmd.Env = append(os.Environ(), "HOOKBENCH_SECRET="+secret)
	cmd.Stderr = os.Stderr
	if err := s.start(ctx, cmd); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+addr+"/healthz", s.done); err != nil {
		s.stop()
		return nil, fmt.Errorf("baseline: %w", err)
	}
	s.cpu0 = s.cpuSeconds()
	return s, nil
}

// hwOptions configure one hookwarden serve process.
type hwOptions struct {
	bin         string
	dir         string // work directory; the database is dir/hookwarden.db
	secret      string
	sinkURL     string
	concurrency int
	maxBody     int
	// dbURL, if set, is a PostgreSQL database (database.url) instead of
	// dir/hookwarden.db.
	dbURL string
	// profile: run `serve-profiled` writing cpu.pprof and heap.pprof in dir.
	profile bool
	trace   bool // with profile: also an execution trace (trace.out)
	// destinations, if set, replace the one destination "sink"; all of them
	// deliver to sinkURL.
	destinations []hwDestination
	// scheme is the bench source's signature scheme; empty: standard.
	scheme string
}

// hwDestination is one destination of the bench source.
type hwDestination struct {
	name   string
	filter string // a CEL filter; empty: none
}

const hwConfig = `# written by hookbench
listen: "%s"
admin:
  listen: "%s"
database: %s
limits:
  max_body_bytes: %d
log:
  level: info   # the default: every delivery is logged
  format: json
sources:
  - name: bench
    scheme: %s
    secrets: ["env:HOOKBENCH_SECRET"]
    expect_within: 1h   # gaps then reads the silences (the history phase)
    destinations:
%s`

const hwDestinationConfig = `      - name: %s
        url: "%s"
        signing_secret: "env:HOOKBENCH_SECRET"
        timeout: 10s
        concurrency: %d
        backoff: { initial: 100ms, max: 1s }
`

// destinationsConfig is the YAML list of o's destinations.
func (o hwOptions) destinationsConfig() string {
	ds := o.destinations
	if len(ds) == 0 {
		ds = []hwDestination{{name: "sink"}}
	}
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, hwDestinationConfig, d.name, o.sinkURL, o.concurrency)
		if d.filter != "" {
			fmt.Fprintf(&b, "        filter: %q\n", d.filter)
		}
	}
	return b.String()
}

// writeHWConfig writes o.dir/config.yaml for a server on addr and admin
// (o.dbURL, or the SQLite file db) and returns its path.
func writeHWConfig(o hwOptions, addr, admin, db string) (string, error) {
	cfg := filepath.Join(o.dir, "config.yaml")
	database := fmt.Sprintf("{ path: %q }", db)
	if o.dbURL != "" {
		database = fmt.Sprintf("{ url: %q }", o.dbURL)
	}
	scheme := o.scheme
	if scheme == "" {
		scheme = "standard"
	}
	body := fmt.Sprintf(hwConfig, addr, admin, database, max(o.maxBody, 1<<20), scheme, o.destinationsConfig())
	return cfg, os.WriteFile(cfg, []byte(body), 0o600)
}

// startAttempts bounds startHookwarden's tries when a port it picked was
// taken before serve bound it.
const startAttempts = 3

// startHookwarden runs the real binary on a fresh (or the given) database.
// A serve that exits because one of its two ports was taken in the moment
// between freePort and its bind is started again on new ports: a bench of
// half an hour must not end there.
func startHookwarden(ctx context.Context, o hwOptions) (*server, error) {
	for attempt := 1; ; attempt++ {
		s, err := startHookwardenOnce(ctx, o)
		var taken *portTakenError
		if errors.As(err, &taken) && attempt < startAttempts {
			fmt.Fprintf(os.Stderr, "hookbench: %v; starting it again on other ports\n", taken)
			continue
		}
		return s, err
	}
}

// portTakenError: serve exited before ready because a port was taken.
type portTakenError struct{ log string }

func (e *portTakenError) Error() string {
	return "hookwarden: a port picked for it was taken before it bound it (log: " + e.log + ")"
}

func startHookwardenOnce(ctx context.Context, o hwOptions) (*server, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.dir, 0o750); err != nil {
		return nil, err
	}
	s := &server{name: "hookwarden", addr: addr, adminAddr: admin, dir: o.dir,
		dbPath: filepath.Join(o.dir, "hookwarden.db"), logPath: filepath.Join(o.dir, "serve.log")}
	cfg, err := writeHWConfig(o, addr, admin, s.dbPath)
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--config", cfg}
	if o.profile {
		args = []string{"serve-profiled", "--config", cfg,
			"--cpuprofile", filepath.Join(o.dir, "cpu.pprof"), "--memprofile", filepath.Join(o.dir, "heap.pprof")}
		if o.trace {
			args = append(args, "--trace", filepath.Join(o.dir, "trace.out"))
		}
	}
	from := sizeOf(s.logPath)
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.bin, args...)
	cmd.Env = append(os.Environ(), "HOOKBENCH_SECRET="+o.secret)
	cmd.Stdout, cmd.Stderr = logf, logf
	s.onExit = func() { logf.Close() }
	if err := s.start(ctx, cmd); err != nil {
		logf.Close()
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+admin+"/readyz", s.done); err != nil {
		s.stop()
		if errors.Is(err, errExited) && strings.Contains(since(s.logPath, from), "address already in use") {
			return nil, &portTakenError{log: tail(s.logPath)}
		}
		return nil, fmt.Errorf("hookwarden: %w (log: %s)", err, tail(s.logPath))
	}
	s.cpu0 = s.cpuSeconds()
	return s, nil
}

// errExited: the process exited before it answered.
var errExited = errors.New("exited before ready")

// waitHTTP polls url until it answers 200, the process exits or 20 s pass.
func waitHTTP(ctx context.Context, url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(20 * time.Second)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := c.Get(url); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("not ready after 20s")
}

// stop asks for a graceful stop (SIGTERM) and kills after 60 s.
func (s *server) stop() error {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	defer delete(children, s)
	select {
	case <-s.done:
		return s.exitError()
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return s.exitError()
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%s: killed after 60s without stopping", s.name)
	}
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (s *server) kill() {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	defer delete(children, s)
	_ = s.cmd.Process.Kill()
	<-s.done
}

func (s *server) exitError() error {
	if s.waitErr != nil {
		return fmt.Errorf("%s: %w", s.name, s.waitErr)
	}
	return nil
}

// status is the process's /proc/PID/status; ok false if it cannot be read.
func (s *server) status() (procfs.ProcStatus, bool) {
	p, err := procfs.NewProc(s.cmd.Process.Pid)
	if err != nil {
		return procfs.ProcStatus{}, false
	}
	st, err := p.NewStatus()
	return st, err == nil
}

// rssMiB is the process's resident set now (VmRSS) in MiB; negative if it
// cannot be read.
func (s *server) rssMiB() float64 {
	st, ok := s.status()
	if !ok {
		return -1
	}
	return float64(st.VmRSS) / (1 << 20)
}

// peakRSSMiB is the process's peak resident set (VmHWM) in MiB; negative if
// it cannot be read.
func (s *server) peakRSSMiB() float64 {
	st, ok := s.status()
	if !ok {
		return -1
	}
	return float64(st.VmHWM) / (1 << 20)
}

// cpuSeconds is the process's user+system CPU time so far.
func (s *server) cpuSeconds() float64 {
	p, err := procfs.NewProc(s.cmd.Process.Pid)
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return st.CPUTime()
}

// cpuPerAck is the server's CPU in µs per acknowledgement since its CPU
// time was since (cpuSeconds), for acks acknowledgements; 0 without any.
func (s *server) cpuPerAck(since float64, acks int64) float64 {
	if acks <= 0 {
		return 0
	}
	return (s.cpuSeconds() - since) / float64(acks) * 1e6
}

// selfCPU is the harness's own user+system CPU time so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// metrics scrapes hookwarden's /metrics into "name{labels}" → value.
func (s *server) metrics() (map[string]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + s.adminAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return metrics.ParseText(resp.Body)
}

// batchStats returns the average commit batch size and the commit count.
func batchStats(m map[string]float64) (avg, commits float64) {
	sum, n := m["hookwarden_store_batch_size_sum"], m["hookwarden_store_batch_size_count"]
	if n == 0 {
		return 0, 0
	}
	return sum / n, n
}

// windowStats compares two scrapes: the average commit batch between them,
// the number of commits, and the share of the window the writer spent in
// transactions (commit included).
func windowStats(m0, m1 map[string]float64, seconds float64) (avg, commits, busy float64) {
	d := func(k string) float64 { return m1[k] - m0[k] }
	commits = d("hookwarden_store_batch_size_count")
	if commits > 0 {
		avg = d("hookwarden_store_batch_size_sum") / commits
	}
	if seconds > 0 {
		busy = d("hookwarden_store_commit_duration_seconds_sum") / seconds
	}
	return avg, commits, busy
}

// since is the file at path from offset on ("" if it cannot be read).
// sizeOf is the size of the file at path: where what a process appends
// to it from now on begins (0 when there is none yet).
func sizeOf(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func since(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
