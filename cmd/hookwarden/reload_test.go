package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/internal/signature"
)

const testSecret2 = "whsec_bmV3LXNlY3JldC1hZnRlci1yb3RhdGlvbi0xMjM0NQ=="

// signedBoth is a Standard Webhooks request carrying a signature under each
// secret, as a provider sends during a key rotation: it is valid whichever
// of the two the receiver holds.
func signedBoth(t testing.TB, url, msgID string, body []byte) *http.Request {
	t.Helper()
	now := time.Now()
	req := signed(t, url, msgID, body, now, testSecret)
	second, err := signature.SignStandard(testSecret2, msgID, now, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-signature", req.Header.Get("webhook-signature")+" "+second)
	return req
}

// TestReloadSecretUnderLoad is the SIGHUP promise with the real binary:
// while senders post without pause, a reload swaps the source's secret; no
// sender sees anything but 200, a delivery in flight across the reload is
// not disturbed, afterwards the new secret passes and the old one fails. A
// bad configuration is then refused with its key path in the log, and
// nothing changes.
func TestReloadSecretUnderLoad(t *testing.T) {
	release := make(chan struct{})
	var heldStarted atomic.Bool
	var heldDone atomic.Int32 // 1: finished normally, 2: its request was cancelled
	var mu sync.Mutex
	delivered := map[string]int{}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Hookwarden-Event-Id")
		if id == "msg_held" {
			heldStarted.Store(true)
			select {
			case <-release:
				heldDone.Store(1)
			case <-r.Context().Done():
				heldDone.Store(2)
				return
			}
		}
		mu.Lock()
		delivered[id]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(app.Close)

	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "hw.db")
	hook, adm := freeAddr(t), freeAddr(t)
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, "")
	p := startServe(t, cfg, hook, adm)
	url := "http://" + hook + "/hooks/std"

	if got := do(t, signed(t, url, "msg_held", []byte(`{"type":"held"}`), time.Now(), testSecret)); got.Status != "accepted" {
		t.Fatalf("held event: %+v", got)
	}
	eventually(t, "the held delivery to start", heldStarted.Load)

	// Senders that never pause, across the reload.
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ok200 atomic.Int64
	var failMu sync.Mutex
	var failures []string
	client := &http.Client{Timeout: 10 * time.Second}
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				req := signedBoth(t, url, fmt.Sprintf("msg_load_%d_%d", w, i), []byte(`{"type":"load"}`))
				resp, err := client.Do(req)
				if err != nil {
					failMu.Lock()
					failures = append(failures, err.Error())
					failMu.Unlock()
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failMu.Lock()
					failures = append(failures, resp.Status)
					failMu.Unlock()
					continue
				}
				ok200.Add(1)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	// The new file also moves the database: that needs a restart, and says so.
	serveConfig(t, cfg, hook, adm, filepath.Join(dir, "moved.db"), app.URL, []string{testSecret2}, "")
	p.signal(syscall.SIGHUP)
	p.waitLog("the restart-only key", "takes effect only after a restart", `"key":"database.path"`)
	p.waitLog("the reload", `"msg":"configuration reloaded"`, `"destinations_kept":1`)
	time.Sleep(300 * time.Millisecond)
	stopLoad()
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests during the reload were not answered 200 (first: %s)", len(failures), failures[0])
	}
	if ok200.Load() < 50 {
		t.Fatalf("only %d requests answered during the test: not under load", ok200.Load())
	}
	t.Logf("%d requests answered 200 across the reload, none failed", ok200.Load())

	checkSecrets := func(when string) {
		t.Helper()
		now := time.Now()
		id := fmt.Sprintf("msg_new_%d", now.UnixNano())
		if got := do(t, signed(t, url, id, []byte(`{"type":"x"}`), now, testSecret2)); got.Code != 200 || got.Status != "accepted" {
			t.Fatalf("%s: signed with the new secret: %+v, want 200 accepted", when, got)
		}
		if got := do(t, signed(t, url, id+"_old", []byte(`{"type":"x"}`), now, testSecret)); got.Code != 401 {
			t.Fatalf("%s: signed with the old secret: %+v, want 401", when, got)
		}
	}
	checkSecrets("after the reload")
	if _, err := os.Stat(filepath.Join(dir, "moved.db")); !os.IsNotExist(err) {
		t.Fatalf("database.path changed by a reload: moved.db exists (%v); it needs a restart", err)
	}

	// The delivery in flight across the reload finishes on the same request.
	close(release)
	eventually(t, "the held delivery to finish", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return delivered["msg_held"] == 1
	})
	if heldDone.Load() != 1 {
		t.Fatalf("the in-flight delivery was cancelled by the reload")
	}

	// A bad file: nothing changes, the log names the key path.
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{"env:HOOKWARDEN_TEST_NEVER_SET"}, "")
	p.signal(syscall.SIGHUP)
	line := p.waitLog("the rejection", "configuration reload rejected", `"key":"sources[0].secrets[0]"`)
	if strings.Contains(line, testSecret2) || strings.Contains(line, testSecret) {
		t.Fatalf("the rejection log line holds a secret: %s", line)
	}
	checkSecrets("after a rejected reload")
	mu.Lock()
	if n := delivered["msg_held"]; n != 1 {
		t.Errorf("msg_held delivered %d times, want 1", n)
	}
	mu.Unlock()

	p.signal(syscall.SIGTERM)
	if err := p.waitExit(60 * time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestReloadReplacesDestinationWithoutOverlap: a changed destination hands
// over from its old pool to a new one without cutting the attempt in flight
// and without ever running more than its concurrency (1) at once.
func TestReloadReplacesDestinationWithoutOverlap(t *testing.T) {
	var inflight, maxInflight atomic.Int32
	release := make(chan struct{})
	var cancelled atomic.Bool
	got := make(chan string, 10)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			m := maxInflight.Load()
			if n <= m || maxInflight.CompareAndSwap(m, n) {
				break
			}
		}
		id := r.Header.Get("Hookwarden-Event-Id")
		if id == "msg_1" {
			select {
			case <-release:
			case <-r.Context().Done():
				cancelled.Store(true)
				return
			}
		}
		got <- id
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(app.Close)
	doc := func(timeout string) string {
		return fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %%q }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: app
        url: %q
        timeout: %s
        concurrency: 1
        backoff: { initial: 10ms, max: 40ms }
`, testSecret, app.URL, timeout)
	}
	db := filepath.Join(t.TempDir(), "hw.db")
	a := startAppYAML(t, fmt.Sprintf(doc("20s"), db), db)
	before := a.Workers.LeaseFor("std/app")

	if r := a.post("msg_1", `{"type":"a"}`); r.Status != "accepted" {
		t.Fatalf("msg_1: %+v", r)
	}
	eventually(t, "msg_1 in flight", func() bool { return inflight.Load() == 1 })

	next := mustLoad(t, fmt.Sprintf(doc("25s"), db))
	res, err := a.Reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if res.replaced != 1 || res.kept != 0 {
		t.Fatalf("reload result %+v, want the destination replaced", res)
	}
	// The lease follows the timeout: the new dispatcher is the one serving.
	if after := a.Workers.LeaseFor("std/app"); after != before+5*time.Second {
		t.Fatalf("lease %s after the reload, want %s: the destination kept its old dispatcher although its timeout changed",
			after, before+5*time.Second)
	}
	if r := a.post("msg_2", `{"type":"a"}`); r.Status != "accepted" {
		t.Fatalf("msg_2: %+v", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.ready(ctx); err != nil {
		t.Fatalf("not ready during the handoff: %v", err)
	}
	select {
	case id := <-got:
		t.Fatalf("%s delivered while the old pool still had msg_1 in flight (concurrency 1)", id)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	for _, want := range []string{"msg_1", "msg_2"} {
		select {
		case id := <-got:
			if id != want {
				t.Fatalf("delivered %s, want %s", id, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never delivered", want)
		}
	}
	if cancelled.Load() {
		t.Fatal("the attempt in flight was cancelled by the reload")
	}
	if m := maxInflight.Load(); m != 1 {
		t.Fatalf("%d attempts in flight at once, want at most 1", m)
	}
	eventually(t, "both jobs delivered", func() bool {
		return a.count(`SELECT count(*) FROM jobs WHERE state = 'delivered'`) == 2
	})
	if err := a.ready(ctx); err != nil {
		t.Fatalf("not ready after the handoff: %v", err)
	}

	// Same settings again: the dispatcher is kept (worker's TestApply*
	// tests check what keeping means).
	if res, err := a.Reload(mustLoad(t, fmt.Sprintf(doc("25s"), db))); err != nil || res.kept != 1 || res.replaced != 0 {
		t.Fatalf("identical reload: %+v, %v; want the destination kept", res, err)
	}
}

// TestReloadAddsAndRemovesDestinations: an added destination starts
// delivering, a removed one stops getting jobs.
func TestReloadAddsAndRemovesDestinations(t *testing.T) {
	one, two := newSink(t), newSink(t)
	a := startApp(t, one.URL, "")
	next := mustLoad(t, fmt.Sprintf(`
database: { path: %q }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: other
        url: %q
        backoff: { initial: 10ms, max: 40ms }
`, a.dbPath, testSecret, two.URL))
	res, err := a.Reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if res.added != 1 || !reflect.DeepEqual(res.removed, []string{"std/app"}) {
		t.Fatalf("reload result %+v, want std/other added and std/app removed", res)
	}
	if r := a.post("msg_after", `{"type":"a"}`); r.Status != "accepted" {
		t.Fatalf("post: %+v", r)
	}
	if req := two.wait(t); req.Header.Get("Hookwarden-Event-Id") != "msg_after" {
		t.Fatalf("new destination got %q", req.Header.Get("Hookwarden-Event-Id"))
	}
	if n := one.count(); n != 0 {
		t.Fatalf("removed destination got %d deliveries", n)
	}
}

func TestRestartKeys(t *testing.T) {
	base := func() *config.Config {
		c := &config.Config{Listen: "127.0.0.1:8080", Admin: config.Admin{Listen: "127.0.0.1:8081"},
			Database: config.Database{Path: "a.db"}, TrustedProxies: []string{"127.0.0.1"}}
		c.ApplyDefaults()
		return c
	}
	for _, tc := range []struct {
		change func(*config.Config)
		want   []string
	}{
		{func(*config.Config) {}, nil},
		{func(c *config.Config) { c.Sources = []config.Source{{Name: "x"}} }, nil},
		{func(c *config.Config) { c.Retention.Claims = config.Duration(time.Hour) }, nil},
		{func(c *config.Config) { c.Listen = "0.0.0.0:80" }, []string{"listen"}},
		{func(c *config.Config) { c.Database.Path = "b.db"; c.Admin.Token = "env:T" }, []string{"admin.token", "database.path"}},
		{func(c *config.Config) { c.TLS.Cert = "c.pem"; c.TLS.Key = "k.pem" }, []string{"tls.cert", "tls.key"}},
		{func(c *config.Config) { c.TrustedProxies = nil }, []string{"trusted_proxies"}},
		{func(c *config.Config) { c.Limits.MaxBodyBytes = 1; c.Log.Level = "debug" }, []string{"limits.max_body_bytes", "log.level"}},
	} {
		next := base()
		tc.change(next)
		got := restartKeys(base(), next)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func mustLoad(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, problems, err := loadConfig([]byte(doc), "test")
	if err != nil {
		t.Fatal(err)
	}
	if errs := config.Errors(problems); len(errs) > 0 {
		t.Fatalf("config: %v", errs)
	}
	return cfg
}
