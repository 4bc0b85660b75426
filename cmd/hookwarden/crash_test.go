package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/loopback"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// binPath is the hookwarden binary built once for the child-process tests.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hookwarden-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "hookwarden")
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build hookwarden: %v\n%s", err, out)
		os.Exit(1)
	}
	// The PostgreSQL tests share one throwaway cluster, started by the
	// first of them (pgtest.Database): the others run without PostgreSQL.
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr returns a loopback address that was free a moment ago, outside
// the range outgoing connections draw from; the child binds it again after
// each restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// child is a `hookwarden serve` process.
type child struct {
	t         *testing.T
	cfg       string
	hook, adm string
	cmd       *exec.Cmd
	log       *lockedBuffer // startLogged's: shown when it never becomes ready
}

func newChild(t *testing.T, destURL string) *child {
	t.Helper()
	dir := t.TempDir()
	c := &child{t: t, cfg: filepath.Join(dir, "config.yaml"), hook: freeAddr(t), adm: freeAddr(t)}
	doc := fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: %q }
log: { level: warn }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: app
        url: %q
        timeout: 30s
        concurrency: 8
        backoff: { initial: 20ms, max: 200ms }
`, c.hook, c.adm, filepath.Join(dir, "hw.db"), testSecret, destURL)
	if err := os.WriteFile(c.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *child) start() {
	c.t.Helper()
	c.cmd = exec.Command(binPath, "serve", "--config", c.cfg)
	c.cmd.Stdout, c.cmd.Stderr = io.Discard, os.Stderr
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + c.adm + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatal("child never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *child) kill9() {
	c.t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
}

// TestKill9UnderLoadLosesNothing is the promise "no acknowledged event is
// lost", with a real process and a real SIGKILL in the middle of traffic.
func TestKill9UnderLoadLosesNothing(t *testing.T) {
	var mu sync.Mutex
	delivered := map[string][]string{} // event id -> idempotency keys seen
	release := make(chan struct{})
	var inflightSeen atomic.Int32
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookwarden-Event-Id")
		mu.Lock()
		delivered[id] = append(delivered[id], r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if id == "msg_inflight" && inflightSeen.Add(1) == 1 {
			// Hold the first attempt until the process is killed.
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer app.Close()
	defer close(release)

	c := newChild(t, app.URL)
	c.start()
	url := "http://" + c.hook + "/hooks/std"

	// A job in flight at the kill.
	if got := do(t, signed(t, url, "msg_inflight", []byte(`{"type":"x"}`), time.Now(), testSecret)); got.Status != "accepted" {
		t.Fatalf("inflight event: %+v", got)
	}
	eventually(t, "in-flight delivery to start", func() bool { return inflightSeen.Load() == 1 })

	// Load: 16 senders; every 200 is a promise.
	var acked sync.Map
	var sent atomic.Int64
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				id := fmt.Sprintf("msg_%d_%d", w, i)
				req := signed(t, url, id, []byte(`{"type":"load"}`), time.Now(), testSecret)
				sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					acked.Store(id, true)
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	c.kill9()
	time.Sleep(200 * time.Millisecond)
	stopLoad()
	wg.Wait()

	c.start()
	defer c.stop()

	var ackedIDs []string
	acked.Range(func(k, _ any) bool { ackedIDs = append(ackedIDs, k.(string)); return true })
	if len(ackedIDs) < 50 {
		t.Fatalf("only %d events acknowledged before the kill; the test did not load the server", len(ackedIDs))
	}
	eventually(t, "every acknowledged event delivered after restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ackedIDs {
			if len(delivered[id]) == 0 {
				return false
			}
		}
		return len(delivered["msg_inflight"]) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	for _, k := range delivered["msg_inflight"] {
		if k != "std:msg_inflight" {
			t.Fatalf("redelivery of the in-flight job used key %q, want std:msg_inflight", k)
		}
	}
	dups := 0
	for _, keys := range delivered {
		dups += len(keys) - 1
	}
	t.Logf("sent %d requests, %d acknowledged, all delivered; %d duplicate deliveries (at-least-once)", sent.Load(), len(ackedIDs), dups)
}

// TestClaimsFilterKeptAcrossStops: serve keeps its claims filter in the
// file when SIGTERM stops it, reads it when it starts and leaves it there,
// so a SIGKILL leaves it too; across both, every event acknowledged before
// is a duplicate and a new one is accepted.
func TestClaimsFilterKeptAcrossStops(t *testing.T) {
	app := newSink(t)
	c := newChild(t, app.URL)
	url := "http://" + c.hook + "/hooks/std"
	kept := func() int {
		t.Helper()
		db, err := sql.Open("sqlite", "file:"+c.db()+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM claims_filter WHERE parts >= 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	post := func(lo, hi int, want string) {
		t.Helper()
		for i := lo; i < hi; i++ {
			body := []byte(fmt.Sprintf(`{"type":"t","i":%d}`, i))
			if got := do(t, signed(t, url, fmt.Sprint("msg_kept_", i), body, time.Now(), testSecret)); got.Status != want {
				t.Fatalf("event %d: %q, want %q", i, got.Status, want)
			}
		}
	}
	c.start()
	post(0, 20, "accepted")
	c.stop()
	if n := kept(); n != 1 {
		t.Fatalf("%d filters kept after SIGTERM, want 1", n)
	}
	c.start()
	if n := kept(); n != 1 {
		t.Fatalf("%d filters in the file while serve runs, want the one it read", n)
	}
	post(0, 20, "duplicate")
	post(20, 40, "accepted")
	c.kill9()
	if n := kept(); n != 1 {
		t.Fatalf("%d filters kept after SIGKILL, want 1", n)
	}
	c.start()
	defer c.stop()
	post(0, 40, "duplicate")
	post(40, 50, "accepted")
}
