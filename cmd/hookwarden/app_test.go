package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
)

const (
	testSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testAppSecret = "whsec_c2lnbmluZy1zZWNyZXQtZm9yLXRoZS1hcHA="
)

// sink is a destination app on loopback that records every request and
// answers with a programmable status.
type sink struct {
	*httptest.Server
	mu       sync.Mutex
	reqs     []sinkReq
	statuses []int // answered in order; then 204
	arrived  chan sinkReq
}

type sinkReq struct {
	Header http.Header
	Body   []byte
}

func newSink(t *testing.T, statuses ...int) *sink {
	s := &sink{statuses: statuses, arrived: make(chan sinkReq, 1000)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := sinkReq{Header: r.Header.Clone(), Body: b}
		s.mu.Lock()
		s.reqs = append(s.reqs, req)
		code := http.StatusNoContent
		if len(s.statuses) > 0 {
			code, s.statuses = s.statuses[0], s.statuses[1:]
		}
		s.mu.Unlock()
		w.WriteHeader(code)
		select {
		case s.arrived <- req:
		default: // nobody waits on more than the buffer: count, never block the app
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *sink) wait(t *testing.T) sinkReq {
	t.Helper()
	select {
	case r := <-s.arrived:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery arrived within 10s")
		return sinkReq{}
	}
}

type testApp struct {
	*App
	t      *testing.T
	dbPath string
}

// stdConfig is the test configuration: source "std" (Standard Webhooks)
// delivering to destURL as destination "app", with a database at db. A
// non-empty adminToken protects the admin listener; extra is YAML appended to
// the destination.
func stdConfig(db, adminToken, destURL, extra string) string {
	admin := `{ listen: "127.0.0.1:0" }`
	if adminToken != "" {
		admin = fmt.Sprintf(`{ listen: "127.0.0.1:0", token: %q }`, adminToken)
	}
	return fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: %s
database: { path: %q }
limits: { max_body_bytes: 4096 }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: app
        url: %q
        signing_secret: %q
        backoff: { initial: 10ms, max: 40ms }
%s`, admin, db, testSecret, destURL, testAppSecret, extra)
}

// startApp boots the whole program in-process on :0 with a temp database.
// extra is YAML appended to the destination "app" of source "std".
func startApp(t *testing.T, destURL, extra string) *testApp {
	t.Helper()
	db := filepath.Join(t.TempDir(), "hw.db")
	return startAppYAML(t, stdConfig(db, "", destURL, extra), db)
}

func startAppYAML(t *testing.T, doc, db string) *testApp {
	t.Helper()
	cfg, problems, err := loadConfig([]byte(doc), "test")
	if err != nil || cfg == nil {
		t.Fatalf("config: %v %v", err, problems)
	}
	for _, p := range problems {
		if !p.Warning {
			t.Fatalf("config problem: %v", p)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(&testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	app := NewApp(cfg, log)
	if err := app.Open(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	ta := &testApp{App: app, t: t, dbPath: db}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := app.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return ta
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// signed builds a Standard Webhooks request for source std.
func signed(t testing.TB, url, msgID string, body []byte, at time.Time, secret string) *http.Request {
	t.Helper()
	h, err := signature.Sign(signature.Params{Scheme: "standard", Secrets: []string{secret}}, body, at, msgID)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

type answerT struct {
	Code       int
	Status     string
	RetryAfter string
}

func do(t testing.TB, req *http.Request) answerT {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	var body struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return answerT{resp.StatusCode, body.Status, resp.Header.Get("Retry-After")}
}

func (a *testApp) hookURL() string { return "http://" + a.HookAddr() + "/hooks/std" }

func (a *testApp) post(msgID, body string) answerT {
	return do(a.t, signed(a.t, a.hookURL(), msgID, []byte(body), time.Now(), testSecret))
}

func (a *testApp) count(q string, args ...any) int {
	a.t.Helper()
	var n int
	if err := dbOf(a.Store).QueryRow(q, args...).Scan(&n); err != nil {
		a.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAcceptedEventIsDeliveredOnceWithHeaders(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "")
	body := `{"type":"invoice.paid","data":{"n":1}}`

	if got := a.post("msg_1", body); got.Code != 200 || got.Status != "accepted" {
		t.Fatalf("first post: %+v, want 200 accepted", got)
	}
	r := app.wait(t)
	if string(r.Body) != body {
		t.Errorf("delivered body %q, want the original bytes %q", r.Body, body)
	}
	for k, want := range map[string]string{
		"Idempotency-Key":       "std:msg_1",
		"Hookwarden-Source":     "std",
		"Hookwarden-Event-Id":   "msg_1",
		"Hookwarden-Event-Type": "invoice.paid",
		"Hookwarden-Attempt":    "1",
		"Content-Type":          "application/json",
		"Webhook-Id":            "std:msg_1",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	// The app verifies with any Standard Webhooks implementation: recompute
	// the signature here independently of the signature package.
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(testAppSecret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", r.Header.Get("Webhook-Id"), r.Header.Get("Webhook-Timestamp"), r.Body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if got := r.Header.Get("Webhook-Signature"); got != want {
		t.Errorf("webhook-signature %q, want %q", got, want)
	}

	if got := a.post("msg_1", body); got.Code != 200 || got.Status != "duplicate" {
		t.Fatalf("repeat: %+v, want 200 duplicate", got)
	}
	time.Sleep(300 * time.Millisecond) // give a wrong second delivery time to show up
	if n := app.count(); n != 1 {
		t.Fatalf("deliveries: %d, want 1", n)
	}
	if n := a.count(`SELECT count(*) FROM receipts`); n != 2 {
		t.Errorf("receipts: %d, want 2 (the duplicate is recorded too)", n)
	}
}

func TestConcurrentDoublesDeliverOnce(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "")
	body := []byte(`{"type":"x"}`)
	var wg sync.WaitGroup
	results := make([]answerT, 64)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each copy is signed anew, as a provider's retry would be.
			results[i] = do(t, signed(t, a.hookURL(), "msg_double", body, time.Now(), testSecret))
		}()
	}
	wg.Wait()
	accepted := 0
	for _, r := range results {
		if r.Code != 200 {
			t.Fatalf("got %+v, want 200", r)
		}
		if r.Status == "accepted" {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("accepted %d times, want exactly 1", accepted)
	}
	if n := a.count(`SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("jobs: %d, want 1", n)
	}
	app.wait(t)
	time.Sleep(300 * time.Millisecond)
	if n := app.count(); n != 1 {
		t.Fatalf("deliveries: %d, want 1", n)
	}
}

func TestRefusalsAndQuarantine(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "")
	url := a.hookURL()
	body := []byte(`{"type":"x"}`)

	tampered := signed(t, url, "msg_t", body, time.Now(), testSecret)
	tampered.Body = io.NopCloser(strings.NewReader(`{"type":"y"}`))
	wrongSecret := signed(t, url, "msg_w", body, time.Now(), "whsec_d3JvbmctY29tcGxldGVseS13cm9uZw==")
	stale := signed(t, url, "msg_s", body, time.Now().Add(-time.Hour), testSecret)
	unsigned, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	unknown := signed(t, "http://"+a.HookAddr()+"/hooks/nope", "msg_u", body, time.Now(), testSecret)
	get, _ := http.NewRequest(http.MethodGet, url, nil)
	big := signed(t, url, "msg_big", bytes.Repeat([]byte("a"), 5000), time.Now(), testSecret)
	for _, c := range []struct {
		name   string
		req    *http.Request
		code   int
		status string
	}{
		{"tampered body", tampered, 401, "unauthorized"},
		{"wrong secret", wrongSecret, 401, "unauthorized"},
		{"stale timestamp", stale, 401, "unauthorized"},
		{"no signature", unsigned, 401, "unauthorized"},
		{"unknown source", unknown, 404, "not_found"},
		{"GET", get, 405, "method_not_allowed"},
		{"too large", big, 413, "too_large"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := do(t, c.req)
			if got.Code != c.code || got.Status != c.status {
				t.Fatalf("got %d %q, want %d %q", got.Code, got.Status, c.code, c.status)
			}
		})
	}
	if n := a.count(`SELECT count(*) FROM receipts`); n != 0 {
		t.Fatalf("refused requests stored %d receipts, want 0 (no body stored for failed auth)", n)
	}
}

func TestQuarantinedWhenNoEventID(t *testing.T) {
	app := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	// A generic HMAC source whose id lives in the body: a body without it is
	// authentic but unidentifiable.
	a := startAppYAML(t, fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
sources:
  - name: mail
    scheme: hmac
    secrets: ["s3cret"]
    hmac: { header: X-Sig, algorithm: sha256, encoding: hex }
    event_id: "json:meta.id"
    destinations: [{ name: app, url: %q }]
`, db, app.URL), db)
	post := func(body string) answerT {
		mac := hmac.New(sha256.New, []byte("s3cret"))
		mac.Write([]byte(body))
		req, _ := http.NewRequest(http.MethodPost, "http://"+a.HookAddr()+"/hooks/mail", strings.NewReader(body))
		req.Header.Set("X-Sig", fmt.Sprintf("%x", mac.Sum(nil)))
		return do(t, req)
	}
	if got := post(`{"meta":{}}`); got.Code != 200 || got.Status != "quarantined" {
		t.Fatalf("got %+v, want 200 quarantined", got)
	}
	if n := a.count(`SELECT count(*) FROM receipts WHERE kind = 'quarantined' AND body = ?`, []byte(`{"meta":{}}`)); n != 1 {
		t.Fatalf("quarantined receipt stored %d times, want 1", n)
	}
	if got := post(`{"meta":{"id":"m1"}}`); got.Status != "accepted" {
		t.Fatalf("with id: %+v, want accepted", got)
	}
	app.wait(t)
}

func TestRetryThenDeliver(t *testing.T) {
	app := newSink(t, 503, 503)
	a := startApp(t, app.URL, "")
	a.post("msg_r", `{"type":"x"}`)
	app.wait(t)
	app.wait(t)
	r := app.wait(t)
	if got := r.Header.Get("Hookwarden-Attempt"); got != "3" {
		t.Fatalf("delivered on attempt %s, want 3", got)
	}
	for _, q := range app.reqs {
		if q.Header.Get("Idempotency-Key") != "std:msg_r" {
			t.Fatalf("Idempotency-Key changed across attempts: %q", q.Header.Get("Idempotency-Key"))
		}
	}
	eventually(t, "job delivered", func() bool {
		return a.count(`SELECT count(*) FROM jobs WHERE state = 'delivered' AND attempts = 3`) == 1
	})
	if n := a.count(`SELECT count(*) FROM attempts`); n != 3 {
		t.Fatalf("attempts logged: %d, want 3", n)
	}
}

func TestPoisonAndExhaustedDeadLetter(t *testing.T) {
	t.Run("422 at once", func(t *testing.T) {
		app := newSink(t, 422)
		a := startApp(t, app.URL, "")
		a.post("msg_p", `{"type":"x"}`)
		app.wait(t)
		eventually(t, "dead letter", func() bool {
			return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead' AND attempts = 1 AND dead_count = 1`) == 1
		})
	})
	t.Run("max_attempts", func(t *testing.T) {
		app := newSink(t, 500, 500, 500, 500, 500)
		a := startApp(t, app.URL, "        max_attempts: 3\n")
		a.post("msg_m", `{"type":"x"}`)
		eventually(t, "dead letter after 3 attempts", func() bool {
			return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead' AND attempts = 3`) == 1
		})
		time.Sleep(200 * time.Millisecond)
		if n := app.count(); n != 3 {
			t.Fatalf("attempts at the app: %d, want 3", n)
		}
	})
}

func TestHealthAndReadiness(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "")
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + a.AdminAddr() + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d, want 200", p, resp.StatusCode)
		}
	}
}

func TestDrainAnswers503(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "")
	a.Receiver.Drain()
	got := a.post("msg_d", `{}`)
	if got.Code != 503 || got.Status != "unavailable" || got.RetryAfter == "" {
		t.Fatalf("while draining: %+v, want 503 unavailable with Retry-After", got)
	}
	if n := a.count(`SELECT count(*) FROM receipts`); n != 0 {
		t.Fatalf("receipts: %d, want 0", n)
	}
}
