package torture

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/hookwarden/hookwarden/internal/loopback"
	"github.com/hookwarden/hookwarden/internal/metrics"
)

// Constants of the configuration every scenario serves.
const (
	sourceName = "t"
	destName   = "t/app"
	// secret is the provider's signing secret (Standard Webhooks).
	secret = "whsec_dG9ydHVyZS10ZXN0LXNpZ25pbmcta2V5LTAwMDAwMDA="
)

// serverConfig is what varies between scenarios.
type serverConfig struct {
	DBPath       string
	DBURL        string // PostgreSQL (database.url) instead of DBPath
	DestURL      string
	MaxBodyBytes int64
	Timeout      string // per delivery attempt
	Concurrency  int
	MaxAttempts  int
	BackoffInit  string
	BackoffMax   string
}

func (c *serverConfig) defaults() {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 64 << 10
	}
	if c.Timeout == "" {
		c.Timeout = "2s"
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 1000 // nothing dead-letters during a test outage
	}
	if c.BackoffInit == "" {
		c.BackoffInit = "20ms"
	}
	if c.BackoffMax == "" {
		c.BackoffMax = "500ms"
	}
}

// server is one `hookwarden serve` child process, restartable on the same
// addresses and database. Every process it starts is in its own process
// group, killed in t.Cleanup whatever happens.
type server struct {
	t         testing.TB
	cfg       serverConfig
	hook, adm string // loopback addresses, stable across restarts
	cfgPath   string
	logPath   string
	obs       *http.Client // no keep-alive: the observer must not hold the child's fds

	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
	exit   error
	starts int
}

func newServer(t testing.TB, dir string, cfg serverConfig) *server {
	t.Helper()
	cfg.defaults()
	s := &server{
		t: t, cfg: cfg,
		hook:    freeAddr(t),
		adm:     freeAddr(t),
		cfgPath: filepath.Join(dir, "config.yaml"),
		logPath: filepath.Join(dir, "hookwarden.log"),
		obs: &http.Client{Timeout: 10 * time.Second,
			Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}},
	}
	database := fmt.Sprintf("{ path: %q }", cfg.DBPath)
	if cfg.DBURL != "" {
		database = fmt.Sprintf("{ url: %q }", cfg.DBURL)
	}
	doc := fmt.Sprintf(`# written by the torture harness
listen: %q
admin: { listen: %q }
database: %s
# Above the default 1,024: the long form opens 1,200 hostile connections,
# and at the limit legitimate senders would queue behind them.
limits: { max_body_bytes: %d, max_connections: 4096 }
log: { level: warn, format: json }
sources:
  - name: %s
    scheme: standard
    secrets: [%q]
    # The event id is in the body; webhook-id is a per-attempt delivery id,
    # as with providers that give every retry a new delivery id.
    event_id: "json:id"
    destinations:
      - name: app
        url: %q
        timeout: %s
        concurrency: %d
        max_attempts: %d
        backoff: { initial: %s, max: %s }
`, s.hook, s.adm, database, cfg.MaxBodyBytes, sourceName, secret, cfg.DestURL,
		cfg.Timeout, cfg.Concurrency, cfg.MaxAttempts, cfg.BackoffInit, cfg.BackoffMax)
	if err := os.WriteFile(s.cfgPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.cleanup)
	return s
}

// freeAddr returns a loopback address that was free a moment ago, outside
// the range outgoing connections draw from.
func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := loopback.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func (s *server) url() string { return "http://" + s.hook + "/hooks/" + sourceName }

func (s *server) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// start launches the process and waits until /readyz answers 200.
func (s *server) start() {
	s.t.Helper()
	if s.running() {
		s.t.Fatal("server already running")
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	fmt.Fprintf(logf, "--- torture: start %d at %s\n", s.starts+1, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(binPath, "serve", "--config", s.cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatal(err)
	}
	logf.Close() // the child has its own copy
	s.cmd, s.done, s.exit = cmd, make(chan struct{}), nil
	s.starts++
	done := s.done
	go func() {
		err := cmd.Wait()
		s.exit = err
		close(done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ok, _ := s.ready(); ok {
			return
		}
		select {
		case <-done:
			s.t.Fatalf("hookwarden exited during start (%v); log:\n%s", s.exit, logTail(s.logPath, 30))
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("hookwarden not ready after 30s; log:\n%s", logTail(s.logPath, 30))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childEnv is the environment without HOOKWARDEN_* overrides from the caller.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKWARDEN_") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// signalGroup sends sig to the child's whole process group.
func (s *server) signalGroup(sig syscall.Signal) {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, sig)
}

// kill9 is a crash: SIGKILL to the process group, then reap.
func (s *server) kill9() {
	s.t.Helper()
	if !s.running() {
		s.t.Fatalf("kill -9: server not running (exit %v); log:\n%s", s.exit, logTail(s.logPath, 30))
	}
	s.signalGroup(syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Fatal("process survived SIGKILL for 10s")
	}
}

// freeze stops every thread of the process (SIGSTOP) and waits until the
// kernel reports all of them stopped: from then on it issues no syscall.
func (s *server) freeze() {
	s.t.Helper()
	s.signalGroup(syscall.SIGSTOP)
	deadline := time.Now().Add(10 * time.Second)
	for !allStopped(s.pid()) {
		if time.Now().After(deadline) {
			s.t.Fatal("process not stopped 10s after SIGSTOP")
		}
		time.Sleep(time.Millisecond)
	}
}

// allStopped reports whether every task of pid is in state T or t.
func allStopped(pid int) bool {
	tasks, err := procfs.AllThreads(pid)
	if err != nil {
		return false
	}
	for _, task := range tasks {
		st, err := task.Stat()
		if err != nil {
			return false
		}
		if st.State != "T" && st.State != "t" {
			return false
		}
	}
	return true
}

// stop is a graceful stop (SIGTERM); it fails the test if the process does
// not exit 0 in time.
func (s *server) stop() {
	s.t.Helper()
	if !s.running() {
		s.t.Fatalf("stop: server not running (exit %v); log:\n%s", s.exit, logTail(s.logPath, 30))
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.signalGroup(syscall.SIGKILL)
		<-s.done
		s.t.Fatalf("graceful stop took more than 60s; log:\n%s", logTail(s.logPath, 30))
	}
	if s.exit != nil {
		s.t.Errorf("graceful stop: exit %v; log:\n%s", s.exit, logTail(s.logPath, 30))
	}
}

func (s *server) cleanup() {
	if s.running() {
		s.signalGroup(syscall.SIGKILL)
		<-s.done
	}
	s.obs.CloseIdleConnections()
}

// ready asks /readyz.
func (s *server) ready() (bool, string) {
	resp, err := s.obs.Get("http://" + s.adm + "/readyz")
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK, strings.TrimSpace(string(b))
}

// metrics scrapes /metrics into "name{labels}" → value.
func (s *server) metrics() (metricSet, error) {
	resp, err := s.obs.Get("http://" + s.adm + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: HTTP %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

func (s *server) mustMetrics() metricSet {
	s.t.Helper()
	m, err := s.metrics()
	if err != nil {
		s.t.Fatalf("scrape metrics: %v", err)
	}
	return m
}

type metricSet map[string]float64

func parseMetrics(r io.Reader) (metricSet, error) { return metrics.ParseText(r) }

// Series the scenarios read.
const (
	mPending    = `hookwarden_outbox_pending{destination="t/app"}`
	mOldest     = `hookwarden_outbox_oldest_pending_age_seconds{destination="t/app"}`
	mDead       = `hookwarden_dead_letters{destination="t/app"}`
	mDelivered  = `hookwarden_deliveries_total{destination="t/app",outcome="delivered"}`
	mRetry      = `hookwarden_deliveries_total{destination="t/app",outcome="retry"}`
	mGoroutines = `go_goroutines`
	mCommitErrs = `hookwarden_store_commit_errors_total`
)

func mRequests(outcome string) string {
	return `hookwarden_requests_total{outcome="` + outcome + `",source="t"}`
}

// procStats are what /proc says about the child.
type procStats struct {
	FDs     int
	Threads int
	RSSKiB  int
}

func (p procStats) String() string {
	return fmt.Sprintf("fds=%d threads=%d rss=%.1fMiB", p.FDs, p.Threads, float64(p.RSSKiB)/1024)
}

func (s *server) proc() procStats {
	s.t.Helper()
	p, err := procfs.NewProc(s.pid())
	if err != nil {
		s.t.Fatalf("read /proc: %v", err)
	}
	fds, err := p.FileDescriptorsLen()
	if err != nil {
		s.t.Fatalf("read fds: %v", err)
	}
	stat, err := p.Stat()
	if err != nil {
		s.t.Fatalf("read stat: %v", err)
	}
	status, err := p.NewStatus()
	if err != nil {
		s.t.Fatalf("read status: %v", err)
	}
	return procStats{FDs: fds, Threads: stat.NumThreads, RSSKiB: int(status.VmRSS / 1024)}
}

// waitFor polls cond every 50ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
