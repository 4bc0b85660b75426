package worker

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// recorded is one request as the app saw it.
type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

// MustApp starts a loopback app that answers with respond(n) for the n-th
// request (1-based) and records every request.
func MustApp(tb testing.TB, respond func(n int, w http.ResponseWriter, r *http.Request)) (*httptest.Server, func() []recorded) {
	tb.Helper()
	var mu sync.Mutex
	var reqs []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, recorded{r.Method, r.URL.RequestURI(), r.Header.Clone(), body})
		n := len(reqs)
		mu.Unlock()
		respond(n, w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv, func() []recorded {
		mu.Lock()
		defer mu.Unlock()
		return append([]recorded(nil), reqs...)
	}
}

// MustHTTP builds an HTTP deliverer whose idle connections are closed at
// cleanup (before the server, cleanups run last-in first-out).
func MustHTTP(tb testing.TB, cfg HTTPConfig) *HTTP {
	tb.Helper()
	h, err := NewHTTP(cfg)
	if err != nil {
		tb.Fatalf("NewHTTP: %v", err)
	}
	tb.Cleanup(func() { _ = h.Close() })
	return h
}

func testJob() *hookwarden.Job {
	return &hookwarden.Job{
		ID: 42, Source: "stripe", EventID: "evt_1NXq", EventType: "invoice.paid",
		Destination: "stripe/app", Attempt: 1, ContentType: "application/json; charset=utf-8",
		Body: []byte("{\"id\":\"evt_1NXq\",\n \"amount\": 1200}\x00\xff"),
	}
}

func TestHTTPHeadersAndSignature(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	srv, requests := MustApp(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	h := MustHTTP(t, HTTPConfig{URL: srv.URL + "/webhooks/stripe?token=abc", SigningSecret: secret})
	job := testJob()
	for attempt := 1; attempt <= 2; attempt++ {
		job.Attempt = attempt
		res := h.Deliver(context.Background(), job)
		if res.Class != Success || res.StatusCode != 204 || res.Err != nil || res.ExitCode != -1 {
			t.Fatalf("attempt %d: result = %+v, want success 204", attempt, res)
		}
	}
	reqs := requests()
	if len(reqs) != 2 {
		t.Fatalf("app got %d requests, want 2", len(reqs))
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	for i, r := range reqs {
		if r.method != http.MethodPost || r.path != "/webhooks/stripe?token=abc" {
			t.Errorf("request %d: %s %s, want POST /webhooks/stripe?token=abc", i, r.method, r.path)
		}
		if !bytes.Equal(r.body, job.Body) {
			t.Errorf("request %d: body = %q, want the original bytes %q", i, r.body, job.Body)
		}
		want := map[string]string{
			"Content-Type":          "application/json; charset=utf-8",
			"Idempotency-Key":       "stripe:evt_1NXq",
			"Hookwarden-Source":     "stripe",
			"Hookwarden-Event-Id":   "evt_1NXq",
			"Hookwarden-Event-Type": "invoice.paid",
			"Hookwarden-Attempt":    strconv.Itoa(i + 1),
			"Webhook-Id":            "stripe:evt_1NXq", // stable across attempts
		}
		for name, v := range want {
			if got := r.header.Values(name); len(got) != 1 || got[0] != v {
				t.Errorf("request %d: %s = %q, want exactly %q", i, name, got, v)
			}
		}
		// Verify as an app would, without the signature package.
		ts := r.header.Get("Webhook-Timestamp")
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
			t.Errorf("request %d: webhook-timestamp = %q, want unix seconds near now", i, ts)
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(r.header.Get("Webhook-Id") + "." + ts + "."))
		mac.Write(r.body)
		wantSig := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		if got := r.header.Get("Webhook-Signature"); got != wantSig {
			t.Errorf("request %d: webhook-signature = %q, want %q", i, got, wantSig)
		}
	}
}

func TestHTTPUnsignedHasNoWebhookHeaders(t *testing.T) {
	t.Parallel()
	srv, requests := MustApp(t, func(int, http.ResponseWriter, *http.Request) {})
	h := MustHTTP(t, HTTPConfig{URL: srv.URL})
	job := testJob()
	job.ContentType = ""
	if res := h.Deliver(context.Background(), job); res.Class != Success {
		t.Fatalf("result = %+v, want success", res)
	}
	r := requests()[0]
	for _, name := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature", "Content-Type"} {
		if v, ok := r.header[name]; ok {
			t.Errorf("%s = %q, want absent", name, v)
		}
	}
	if got := r.header.Get("Idempotency-Key"); got != "stripe:evt_1NXq" {
		t.Errorf("Idempotency-Key = %q", got)
	}
}

func TestHTTPClassification(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 100_000)
	// A Retry-After date is read against the clock at delivery: the wait
	// shrinks by the time since it was written (and up to a second for the
	// format's whole seconds), however slow a loaded machine runs the table.
	dated := time.Now()
	date := dated.Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		status     int
		header     map[string]string
		body       string
		want       Class
		retryAfter time.Duration // approximate for dates
		errHas     string
	}{
		{200, nil, "ok", Success, 0, ""},
		{201, nil, "", Success, 0, ""},
		{204, nil, "", Success, 0, ""},
		{299, nil, "", Success, 0, ""},
		{301, map[string]string{"Location": "/elsewhere"}, "", Transient, 0, "redirect not followed"},
		{307, map[string]string{"Location": "/elsewhere"}, "", Transient, 0, `"/elsewhere"`},
		{400, nil, "bad", Permanent, 0, "HTTP 400"},
		{401, nil, "", Permanent, 0, "HTTP 401"},
		{404, nil, "", Permanent, 0, "HTTP 404"},
		{410, nil, "", Permanent, 0, "HTTP 410"},
		{422, nil, "", Permanent, 0, "HTTP 422"},
		{408, nil, "", Transient, 0, "HTTP 408"},
		{425, nil, "", Transient, 0, "HTTP 425"},
		{429, map[string]string{"Retry-After": "7"}, "", Transient, 7 * time.Second, "HTTP 429"},
		{429, map[string]string{"Retry-After": "garbage"}, "", Transient, 0, "HTTP 429"},
		{429, map[string]string{"Retry-After": "-5"}, "", Transient, 0, "HTTP 429"},
		{503, map[string]string{"Retry-After": date}, "", Transient, 90 * time.Second, "HTTP 503"},
		{500, nil, big, Transient, 0, "HTTP 500"},
		{502, nil, "", Transient, 0, "HTTP 502"},
		{504, nil, "", Transient, 0, "HTTP 504"},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			srv, _ := MustApp(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			h := MustHTTP(t, HTTPConfig{URL: srv.URL})
			res := h.Deliver(context.Background(), testJob())
			if res.Class != tt.want || res.StatusCode != tt.status {
				t.Fatalf("result = %s %d (%v), want %s %d", res.Class, res.StatusCode, res.Err, tt.want, tt.status)
			}
			if tt.errHas == "" && res.Err != nil || tt.errHas != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), tt.errHas)) {
				t.Errorf("err = %v, want one containing %q", res.Err, tt.errHas)
			}
			if d := res.RetryAfter - tt.retryAfter; d < -(time.Since(dated)+time.Second) || d > 0 || tt.retryAfter == 0 && res.RetryAfter != 0 {
				t.Errorf("RetryAfter = %s, want about %s", res.RetryAfter, tt.retryAfter)
			}
			wantBody := tt.body
			if len(wantBody) > maxHTTPResponse {
				wantBody = wantBody[:maxHTTPResponse]
			}
			if string(res.Response) != wantBody {
				t.Errorf("response = %d bytes, want %d", len(res.Response), len(wantBody))
			}
		})
	}
}

func TestHTTPTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	srv, _ := MustApp(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	})
	h := MustHTTP(t, HTTPConfig{URL: srv.URL + "/?token=s3cret", Timeout: 100 * time.Millisecond})
	start := time.Now()
	res := h.Deliver(context.Background(), testJob())
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Deliver took %s with a 100ms timeout", took)
	}
	if res.Class != Transient || !res.TimedOut || res.Err == nil || !strings.Contains(res.Err.Error(), "timed out") {
		t.Fatalf("result = %+v, want a transient timeout", res)
	}
	if strings.Contains(res.Err.Error(), "s3cret") {
		t.Errorf("error %q leaks the URL", res.Err)
	}
}

func TestHTTPConnectionRefusedIsTransient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	h := MustHTTP(t, HTTPConfig{URL: "http://" + addr + "/?token=s3cret"})
	res := h.Deliver(context.Background(), testJob())
	// Usually "connection refused"; a parallel test may grab the freed port
	// and reset the connection instead: either way a transient failure.
	if res.Class != Transient || res.TimedOut || res.Err == nil {
		t.Fatalf("result = %+v, want a transient connection error", res)
	}
	if strings.Contains(res.Err.Error(), "s3cret") {
		t.Errorf("error %q leaks the URL", res.Err)
	}
}

func TestHTTPInvalidHeaderValueIsPermanent(t *testing.T) {
	t.Parallel()
	h := MustHTTP(t, HTTPConfig{URL: "http://127.0.0.1:1/"})
	job := testJob()
	job.EventID = "evt\r\nX-Injected: 1"
	if res := h.Deliver(context.Background(), job); res.Class != Permanent {
		t.Fatalf("result = %+v, want permanent", res)
	}
}

func TestNewHTTPErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []HTTPConfig{
		{URL: ""},
		{URL: "ftp://example.com/"},
		{URL: "http:///nohost"},
		{URL: "http://127.0.0.1/", Timeout: -time.Second},
		{URL: "http://127.0.0.1/", SigningSecret: "whsec_!!!not-base64!!!"},
	} {
		if _, err := NewHTTP(cfg); err == nil {
			t.Errorf("NewHTTP(%+v) = nil error", cfg)
		} else if cfg.SigningSecret != "" && strings.Contains(err.Error(), cfg.SigningSecret) {
			t.Errorf("error %q leaks the secret", err)
		}
	}
}

// httpPool runs a pool with one HTTP destination against app and returns
// the queue.
func httpPool(t *testing.T, app *httptest.Server, dest Destination, opt Options) *memQueue {
	t.Helper()
	q := newMemQueue(opt.Now)
	dest.Name = "stripe/app"
	dest.Deliverer = MustHTTP(t, HTTPConfig{URL: app.URL, Timeout: 2 * time.Second})
	if dest.Backoff == (Backoff{}) {
		dest.Backoff = Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}
	}
	opt.PollInterval = 10 * time.Millisecond
	MustOpen(t, New(q, []Destination{dest}, opt))
	return q
}

func TestHTTPDeliveredOnThirdAttempt(t *testing.T) {
	t.Parallel()
	app, requests := MustApp(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "thanks")
	})
	q := httpPool(t, app, Destination{}, Options{})
	id := q.add("stripe/app", "evt_1", []byte(`{"id":"evt_1"}`))
	got := q.MustFinal(t, id)
	want := []hookwarden.Verdict{hookwarden.Retry, hookwarden.Retry, hookwarden.Delivered}
	if len(got) != len(want) {
		t.Fatalf("got %d attempts, want %d: %+v", len(got), len(want), got)
	}
	for i, a := range got {
		wantStatus := 503
		if i == 2 {
			wantStatus = 200
		}
		if a.Verdict != want[i] || a.Number != i+1 || a.StatusCode != wantStatus || a.ExitCode != -1 {
			t.Errorf("attempt %d = %+v, want #%d %s %d", i+1, a, i+1, want[i], wantStatus)
		}
	}
	if string(got[2].Response) != "thanks" || got[2].Error != "" {
		t.Errorf("last attempt response %q error %q", got[2].Response, got[2].Error)
	}
	keys := map[string]bool{}
	for i, r := range requests() {
		keys[r.header.Get("Idempotency-Key")] = true
		if got := r.header.Get("Hookwarden-Attempt"); got != strconv.Itoa(i+1) {
			t.Errorf("request %d: Hookwarden-Attempt = %s", i+1, got)
		}
	}
	if len(keys) != 1 || !keys["stripe:evt_1"] {
		t.Errorf("idempotency keys = %v, want only stripe:evt_1", keys)
	}
}

func TestHTTPPoisonIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	app, _ := MustApp(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "cannot process", http.StatusUnprocessableEntity)
	})
	q := httpPool(t, app, Destination{}, Options{})
	id := q.add("stripe/app", "evt_1", nil)
	got := q.MustFinal(t, id)
	if len(got) != 1 || got[0].Verdict != hookwarden.Dead || got[0].StatusCode != 422 ||
		!strings.Contains(string(got[0].Response), "cannot process") {
		t.Fatalf("attempts = %+v, want one dead 422 with its response", got)
	}
	if q.state(id) != hookwarden.JobDead || calls.Load() != 1 {
		t.Errorf("state %s after %d calls, want dead after 1", q.state(id), calls.Load())
	}
}

func TestHTTPMaxAttemptsDeadLetters(t *testing.T) {
	t.Parallel()
	app, requests := MustApp(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	})
	q := httpPool(t, app, Destination{MaxAttempts: 3}, Options{})
	id := q.add("stripe/app", "evt_1", nil)
	got := q.MustFinal(t, id)
	if len(got) != 3 {
		t.Fatalf("got %d attempts, want 3", len(got))
	}
	last := got[2]
	if last.Verdict != hookwarden.Dead || !strings.Contains(last.Error, "giving up after 3 attempts") {
		t.Errorf("last attempt = %s %q, want dead, giving up", last.Verdict, last.Error)
	}
	if n := len(requests()); n != 3 {
		t.Errorf("app got %d requests, want 3", n)
	}
}

func TestHTTPRetryAfterHonouredUpToMax(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter string
		max        time.Duration
		want       time.Duration
	}{
		{"honoured", "3", time.Hour, 3 * time.Second},
		{"capped", "120", 2 * time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app, _ := MustApp(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", tt.retryAfter)
				w.WriteHeader(http.StatusTooManyRequests)
			})
			clock := &fakeClock{t: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
			q := httpPool(t, app, Destination{Backoff: Backoff{Initial: time.Millisecond, Max: tt.max}},
				Options{Now: clock.Now, Rand: func() float64 { return 0 }})
			id := q.add("stripe/app", "evt_1", nil)
			a := q.MustAttempt(t)
			if a.JobID != id || a.Verdict != hookwarden.Retry || a.StatusCode != 429 {
				t.Fatalf("attempt = %+v, want a 429 retry", a)
			}
			if got := a.RetryAt.Sub(clock.Now()); got != tt.want {
				t.Errorf("retry in %s, want %s", got, tt.want)
			}
		})
	}
}
