package receiver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
)

const stdSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// partial opens a connection and sends a POST declaring contentLength
// bytes, followed by the first of them only.
func partial(t *testing.T, addr string, contentLength int, first []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /hooks/std HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", contentLength)
	if _, err := c.Write(first); err != nil {
		t.Fatal(err)
	}
	return c
}

// readAnswer reads the response on c; a hang fails the test at the deadline.
func readAnswer(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	var body struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp, body.Status
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// partialWith is partial with extra header lines ("Name: value\r\n" each)
// and the connection leaving from the loopback address from ("": any).
func partialWith(t *testing.T, addr, from, extra string, contentLength int, first []byte) net.Conn {
	t.Helper()
	d := net.Dialer{}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /hooks/std HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", extra, contentLength)
	if _, err := c.Write(first); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestInflightBudget: requests in memory share max_inflight_bytes: their
// header lists and the buffers their bodies grow in. A new request whose
// headers do not fit is answered 503 + Retry-After at once (without
// reading its body); a small one that fits is still served; an admitted
// body whose next buffer does not fit is answered 503; and the budget is
// back to zero when the requests are done.
func TestInflightBudget(t *testing.T) {
	const budget = 200 << 10
	store := openStore(t)
	p := signature.Params{Scheme: "standard", Secrets: []string{stdSecret}}
	rc := receiver.New([]receiver.Source{source(t, "std", p)}, receiver.Options{Recorder: store,
		MaxBodyBytes: 1 << 20, MaxInflightBytes: budget, MaxInflightPerClient: budget,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	// A declares 1 MiB and sends 100 KiB: its buffer has grown to 128 KiB
	// (through 64 KiB and 128 KiB at once: 192 KiB fit).
	a := partial(t, addr, 1<<20, bytes.Repeat([]byte("a"), 100<<10))
	waitFor(t, "A's bytes to be read", func() bool { n := rc.InflightBytes(); return n > 128<<10 && n < 129<<10 })

	// B's 70 KB of headers do not fit in the 72 KiB left beside A's: 503
	// before its body is read.
	b := partialWith(t, addr, "", "X-Pad: "+strings.Repeat("b", 70_000)+"\r\n", 1<<20, nil)
	resp, status := readAnswer(t, b)
	if resp.StatusCode != http.StatusServiceUnavailable || status != "unavailable" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("B: %d %q Retry-After=%q, want 503 unavailable with Retry-After", resp.StatusCode, status, resp.Header.Get("Retry-After"))
	}
	if !resp.Close {
		t.Fatal("B: the connection with an unread body must close")
	}

	// A small signed request fits in what is left and is recorded.
	body := []byte(`{"type":"small"}`)
	h, err := signature.Sign(p, body, time.Now(), "msg_small")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/std", bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("small request beside A: %d, want 200", res.StatusCode)
	}

	// A grows past 128 KiB: a 256 KiB buffer beside it does not fit.
	if _, err := a.Write(bytes.Repeat([]byte("a"), 30<<10)); err != nil {
		t.Fatal(err)
	}
	resp, status = readAnswer(t, a)
	if resp.StatusCode != http.StatusServiceUnavailable || status != "unavailable" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("A grown: %d %q, want 503 unavailable with Retry-After", resp.StatusCode, status)
	}
	waitFor(t, "the budget to return to zero", func() bool { return rc.InflightBytes() == 0 })

	// With the budget free, a body of 80 KiB goes through whole.
	big := []byte(`{"type":"big","pad":"` + strings.Repeat("x", 80<<10) + `"}`)
	h, _ = signature.Sign(p, big, time.Now(), "msg_big")
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/hooks/std", bytes.NewReader(big))
	for k, v := range h {
		req.Header[k] = v
	}
	if res, err = srv.Client().Do(req); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("big request alone: %d, want 200", res.StatusCode)
	}
	var stored []byte
	if err := store.DB().QueryRow(`SELECT body FROM receipts WHERE id = (SELECT max(id) FROM receipts)`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored, big) {
		t.Fatalf("stored body of %d bytes differs from the %d sent", len(stored), len(big))
	}
	if n := rc.InflightBytes(); n != 0 {
		t.Fatalf("budget holds %d after every request finished", n)
	}
}

// TestClientShareAndSlowBodies: one client (here 127.0.0.1) holding its
// share of the budget with bodies it never finishes gets 503 for more,
// while another client (127.0.0.2) is served; and the held bodies are cut
// with 408 once they stall for the grace, which frees the share.
func TestClientShareAndSlowBodies(t *testing.T) {
	const budget = 8 << 20
	store := openStore(t)
	p := signature.Params{Scheme: "standard", Secrets: []string{stdSecret}}
	rc := receiver.New([]receiver.Source{source(t, "std", p)}, receiver.Options{Recorder: store,
		MaxBodyBytes: 1 << 20, MaxInflightBytes: budget, MaxInflightPerClient: budget / 4,
		SlowBodyGrace: 300 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	// 1 MiB - 1 of a 1 MiB body holds a 1 MiB buffer: the share (2 MiB)
	// takes one at most (a buffer grows beside the one it replaces), and
	// the second is refused.
	first := partialWith(t, addr, "127.0.0.1", "", 1<<20, bytes.Repeat([]byte("a"), 1<<20-1))
	waitFor(t, "the first body to be read", func() bool { return rc.InflightBytes() >= 1<<20 })
	second := partialWith(t, addr, "127.0.0.1", "", 1<<20, bytes.Repeat([]byte("a"), 1<<20-1))
	resp, status := readAnswer(t, second)
	if resp.StatusCode != http.StatusServiceUnavailable || status != "unavailable" {
		t.Fatalf("the client's second body: %d %q, want 503 unavailable", resp.StatusCode, status)
	}
	// Another client is served beside it.
	body := []byte(`{"type":"other"}`)
	h, _ := signature.Sign(p, body, time.Now(), "msg_other")
	c := partialWith(t, addr, "127.0.0.2", "Webhook-Id: "+h.Get("Webhook-Id")+"\r\nWebhook-Timestamp: "+h.Get("Webhook-Timestamp")+
		"\r\nWebhook-Signature: "+h.Get("Webhook-Signature")+"\r\n", len(body), body)
	if resp, status := readAnswer(t, c); resp.StatusCode != 200 {
		t.Fatalf("another client beside the full share: %d %q, want 200", resp.StatusCode, status)
	}
	// The first body stalls: cut after the grace, 408, and the share is free.
	start := time.Now()
	resp, status = readAnswer(t, first)
	if resp.StatusCode != http.StatusRequestTimeout || status != "too_slow" || !resp.Close {
		t.Fatalf("the stalled body: %d %q close=%v, want 408 too_slow and the connection closed", resp.StatusCode, status, resp.Close)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("cut after %s, want about the 300ms grace", waited)
	}
	waitFor(t, "the budget to return to zero", func() bool { return rc.InflightBytes() == 0 })

	// A trickle keeps arriving but below the rate: cut too. 1 byte per
	// 100ms is 10 B/s, far below 16 KiB/s.
	trickle := partialWith(t, addr, "127.0.0.1", "", 1<<10, []byte("{"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 40 {
			time.Sleep(100 * time.Millisecond)
			if _, err := trickle.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	resp, status = readAnswer(t, trickle)
	if resp.StatusCode != http.StatusRequestTimeout || status != "too_slow" {
		t.Fatalf("the trickle: %d %q, want 408 too_slow", resp.StatusCode, status)
	}
	trickle.Close()
	<-done
}

// TestBodiesSurviveBufferReuse: many concurrent requests with distinct
// bodies each store their own bytes, so a pooled growth buffer never leaks
// into a body handed to the store.
func TestBodiesSurviveBufferReuse(t *testing.T) {
	store := openStore(t)
	p := signature.Params{Scheme: "standard", Secrets: []string{stdSecret}}
	rc := receiver.New([]receiver.Source{source(t, "std", p)}, receiver.Options{Recorder: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	const n = 40
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		// Sizes on both sides of the first buffer and of a chunk.
		bodies[i] = []byte(fmt.Sprintf(`{"type":"t","i":%d,"pad":"%s"}`, i, strings.Repeat(string(rune('a'+i%26)), i*900)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, _ := signature.Sign(p, bodies[i], time.Now(), fmt.Sprintf("msg_%d", i))
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/std", bytes.NewReader(bodies[i]))
			for k, v := range h {
				req.Header[k] = v
			}
			if i%2 == 0 {
				req.ContentLength = -1 // chunked: no declared length
				req.Body = io.NopCloser(bytes.NewReader(bodies[i]))
			}
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Errorf("request %d: %d", i, res.StatusCode)
			}
		}()
	}
	wg.Wait()
	rows, err := store.DB().Query(`SELECT body FROM receipts`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		var v struct{ I int }
		if err := json.Unmarshal(b, &v); err != nil || !bytes.Equal(b, bodies[v.I]) {
			t.Fatalf("stored body %.60q... is not the body sent", b)
		}
		seen++
	}
	if seen != n {
		t.Fatalf("%d receipts, want %d", seen, n)
	}
}
