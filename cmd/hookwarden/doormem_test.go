package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// The door's memory beyond one body per connection: HTTP/2's streams and
// clients that hold their share slowly (docs/reference.md, "Limits and
// timeouts"), through the real binary.

// fromAddr is a client whose connections leave from the loopback address
// ip (Linux routes all of 127/8 to lo), so that the receiver sees distinct
// clients; h2 makes it speak HTTP/2 over TLS only.
func fromAddr(ip string, h2 bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	if h2 {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetHTTP2(true)
		tr.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true}
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// legit sends n signed requests from ip, one after the other, and counts
// the answers by status code.
func legit(t *testing.T, client *http.Client, url, prefix string, n int) map[int]int {
	t.Helper()
	codes := map[int]int{}
	for i := range n {
		req := signed(t, url, fmt.Sprintf("%s_%d", prefix, i), []byte(`{"type":"legit"}`), time.Now(), testSecret)
		resp, err := client.Do(req)
		if err != nil {
			codes[-1]++
			t.Logf("legitimate request %d: %v", i, err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	return codes
}

// settle waits until ready() and then until the child's in-flight gauge has
// not moved for half a second: the attack's requests are all admitted or
// refused.
func settle(t *testing.T, adm string, ready func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, still := -1.0, 0
	for still < 5 {
		if time.Now().After(deadline) {
			t.Fatal("the attack never settled")
		}
		time.Sleep(100 * time.Millisecond)
		if !ready() {
			continue
		}
		if v := scrape(t, adm, "hookwarden_receiver_inflight_bytes"); v == last {
			still++
		} else {
			last, still = v, 0
		}
	}
}

// TestHTTP2StreamsStayInTheBudget: the attack of issue 46 scaled down to 48
// HTTP/2 connections (all from one address, or each from its own), each
// opening 16 streams with 60 KB of headers that send 48 KiB of a declared
// 1 MiB body and hold the rest. Those headers and DATA used to sit outside
// limits.max_inflight_bytes (a 1 MiB flow-control window and 64 KiB header
// lists per stream): RSS +75 MiB against a budget of 8 MiB, and every
// legitimate request 503. Now a header list is at most 16 KiB and charged
// to the budget, and a connection buffers at most 64 KiB of unread DATA, so
// RSS stays within three times (GOGC=200) the budget plus that and its
// streams' header lists per connection, and legitimate HTTP/2 requests
// from another address are answered 200.
func TestHTTP2StreamsStayInTheBudget(t *testing.T) {
	t.Run("one address", func(t *testing.T) { http2Streams(t, false) })
	t.Run("many addresses", func(t *testing.T) { http2Streams(t, true) })
}

func http2Streams(t *testing.T, many bool) {
	const (
		conns, streams = 48, 16
		header         = 60_000
		data           = 48 << 10
		budget         = 8 << 20
		maxHeader      = 16 << 10 // receiver.MaxHeaderBytes
	)
	app := newSink(t)
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "hw.db")
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	MustWriteCert(t, certPath, keyPath, 1)
	hook, adm := freeAddr(t), freeAddr(t)
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret},
		fmt.Sprintf("tls: { cert: %q, key: %q }\nlimits: { max_inflight_bytes: %d }\n", certPath, keyPath, budget))
	p := startServe(t, cfg, hook, adm)
	pid := p.cmd.Process.Pid
	url := "https://" + hook + "/hooks/std"
	good := fromAddr("127.0.0.2", true)
	if codes := legit(t, good, url, "msg_warm", 5); codes[200] != 5 {
		t.Fatalf("warm-up: %v", codes)
	}
	before := int64(procStatus(t, pid).VmRSS)

	var wg sync.WaitGroup
	var opened atomic.Int64
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
		wg.Wait()
	}()
	for c := range conns {
		from := "127.0.0.1"
		if many {
			from = fmt.Sprintf("127.0.1.%d", c+1)
		}
		conn := h2Attacker(t, hook, from, streams, header, data)
		open = append(open, conn)
		opened.Add(1)
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, conn) }() // the server's frames, unread otherwise
	}
	settle(t, adm, func() bool { return opened.Load() == conns })
	codes := legit(t, good, url, "msg_meanwhile", 20)
	peak := int64(procStatus(t, pid).VmHWM)
	growth := peak - before
	// What may grow: the budget (bodies and the header lists charged to it),
	// each connection's unread DATA (its 64 KiB flow-control window) and
	// its HPACK table and its streams' header lists; times three, as serve
	// runs with GOGC=200 (the heap grows to three times what is live before
	// a collection).
	bound := int64(3 * (budget + conns*(64<<10+4<<10+streams*maxHeader)))
	t.Logf("RSS %d KiB before, peak %d KiB with %d connections x %d streams: +%d KiB, bound %d KiB; legitimate answers %v",
		before>>10, peak>>10, conns, streams, growth>>10, bound>>10, codes)
	if !many && codes[200] != 20 {
		t.Errorf("legitimate HTTP/2 requests beside the streams: %v, want 20 x 200", codes)
	}
	if many && codes[200]+codes[503] != 20 {
		t.Errorf("legitimate HTTP/2 requests beside the streams: %v, want only 200 or 503", codes)
	}
	if growth > bound {
		t.Errorf("RSS grew by %d KiB, want at most %d KiB", growth>>10, bound>>10)
	}
}

// h2Attacker opens an HTTP/2 connection from the loopback address from and
// writes raw frames, as an attacker would (Go's client keeps to the
// server's limits): streams requests, each with a header of header bytes,
// declaring a 1 MiB body and sending data bytes of it, never the rest.
func h2Attacker(t *testing.T, addr, from string, streams, header, data int) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	frame := func(typ, flags byte, stream uint32, payload []byte) []byte {
		f := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags,
			byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream)}
		return append(f, payload...)
	}
	// HPACK: a literal field without indexing, new name (RFC 7541 6.2.2),
	// lengths as 7-bit prefix integers (5.1).
	hpackInt := func(b []byte, v int) []byte {
		if v < 127 {
			return append(b, byte(v))
		}
		b = append(b, 127)
		for v -= 127; v >= 128; v >>= 7 {
			b = append(b, byte(v&127|128))
		}
		return append(b, byte(v))
	}
	var block []byte
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", "/hooks/std"},
		{":authority", addr}, {"content-type", "application/json"}, {"content-length", "1048576"},
		{"x-pad", strings.Repeat("p", header)}} {
		block = append(block, 0)
		block = hpackInt(block, len(kv[0]))
		block = append(block, kv[0]...)
		block = hpackInt(block, len(kv[1]))
		block = append(block, kv[1]...)
	}
	out := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	out = append(out, frame(0x4, 0, 0, nil)...)   // SETTINGS
	out = append(out, frame(0x4, 0x1, 0, nil)...) // and the ACK of the server's
	for i := range streams {
		id := uint32(2*i + 1)
		// HEADERS (END_HEADERS) in one frame, CONTINUATION past 16 KiB.
		first := min(len(block), 16384)
		if first == len(block) {
			out = append(out, frame(0x1, 0x4, id, block)...)
		} else {
			out = append(out, frame(0x1, 0, id, block[:first])...)
			for rest := block[first:]; len(rest) > 0; {
				n := min(len(rest), 16384)
				flags := byte(0)
				if n == len(rest) {
					flags = 0x4
				}
				out = append(out, frame(0x9, flags, id, rest[:n])...)
				rest = rest[n:]
			}
		}
		for sent := 0; sent < data; sent += 16384 {
			out = append(out, frame(0x0, 0, id, make([]byte, min(16384, data-sent)))...)
		}
	}
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write(out) // the server may close first: that is a defence, not a failure
	return c
}

// TestSlowClientsHoldOnlyTheirShare: 24 clients on one address each send
// 1 MiB - 1 of a 1 MiB body and wait (issue 46's attack, scaled to a 16 MiB
// budget). They used to take the whole budget until the read timeout, and
// every legitimate request got 503; now that address holds its share (a
// quarter of the budget), a legitimate client on another address is
// answered 200 throughout, and the held bodies are cut with 408 once they
// stall for limits.slow_body_grace.
func TestSlowClientsHoldOnlyTheirShare(t *testing.T) {
	const (
		clients = 24
		budget  = 16 << 20
	)
	_, cfg, _, hook, adm := serveFiles(t, fmt.Sprintf("limits: { max_inflight_bytes: %d, slow_body_grace: 2s }\n", budget))
	p := startServe(t, cfg, hook, adm)
	pid := p.cmd.Process.Pid
	url := "http://" + hook + "/hooks/std"
	good := fromAddr("127.0.0.2", false)
	if codes := legit(t, good, url, "msg_warm", 5); codes[200] != 5 {
		t.Fatalf("warm-up: %v", codes)
	}
	before := int64(procStatus(t, pid).VmRSS)
	slow := make([]net.Conn, clients)
	for i := range slow {
		slow[i] = declare(t, hook, 1<<20, strings.Repeat("a", 1<<20-1))
	}
	start := time.Now()
	settle(t, adm, func() bool { return true })
	codes := legit(t, good, url, "msg_meanwhile", 20)
	peak := int64(procStatus(t, pid).VmHWM)
	// The slow bodies: 503 at once beyond the share, 408 after the grace.
	answers := map[string]int{}
	for _, c := range slow {
		_ = c.SetReadDeadline(time.Now().Add(40 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			answers[err.Error()]++
			continue
		}
		resp.Body.Close()
		answers[resp.Status]++
	}
	waited := time.Since(start)
	t.Logf("RSS %d KiB before, peak %d KiB with %d slow clients: +%d KiB; legitimate answers %v; slow ones %v after %s",
		before>>10, peak>>10, clients, (peak-before)>>10, codes, answers, waited.Round(time.Millisecond))
	if codes[200] != 20 {
		t.Errorf("legitimate requests beside the slow clients: %v, want 20 x 200", codes)
	}
	if answers["408 Request Timeout"] == 0 || answers["408 Request Timeout"]+answers["503 Service Unavailable"] != clients {
		t.Errorf("slow clients' answers %v, want 408 (cut after the grace) or 503 (beyond the share)", answers)
	}
	if waited > 20*time.Second {
		t.Errorf("the slow bodies were cut after %s, want about the 2s grace", waited)
	}
	if growth := peak - before; growth > 96<<20 {
		t.Errorf("RSS grew by %d KiB, want < 96 MiB as for idle HTTP/1.1 bodies", growth>>10)
	}
}

// TestUnavailableWindowInGaps: while the in-flight budget is full, a
// source's requests are answered 503: serve records those minutes, and
// `gaps` lists them as an outage of kind "unavailable" for that source, with
// its recovery, in --json and in text, although serve ran throughout.
func TestUnavailableWindowInGaps(t *testing.T) {
	const budget = 2 << 20
	_, cfg, _, hook, adm := serveFiles(t, fmt.Sprintf(
		"limits: { max_inflight_bytes: %d, max_inflight_bytes_per_client: %d, slow_body_grace: 25s }\n", budget, budget))
	p := startServe(t, cfg, hook, adm)
	url := "http://" + hook + "/hooks/std"
	client := fromAddr("127.0.0.1", false)
	if codes := legit(t, client, url, "msg_before", 3); codes[200] != 3 {
		t.Fatalf("before: %v", codes)
	}
	// Bodies of 1 MiB, 512 KiB, ... 4 KiB less a byte hold buffers of those
	// sizes: the budget is full to less than a small request's first buffer.
	var held []net.Conn
	for size := 1 << 20; size >= 4<<10; size /= 2 {
		held = append(held, declare(t, hook, 1<<20, strings.Repeat("a", size-1)))
		settle(t, adm, func() bool { return true })
	}
	// Most of the minute's requests, the holders' included, are refused.
	codes := legit(t, client, url, "msg_refused", 30)
	if codes[503] < 25 {
		t.Fatalf("with the budget full: %v, want most answered 503", codes)
	}
	for _, c := range held {
		c.Close()
	}
	p.signal(os.Interrupt) // the stop adds the current minute
	if err := p.waitExit(30 * time.Second); err != nil {
		t.Fatalf("serve: %v", err)
	}
	code, out, errOut := runBin(t, "gaps", "--json", "--config", cfg)
	if code != 0 {
		t.Fatalf("gaps: exit %d: %s", code, errOut)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var o struct {
			Kind    string                      `json:"kind"`
			Source  string                      `json:"source"`
			Length  float64                     `json:"length_seconds"`
			Sources []hookwarden.SourceRecovery `json:"sources"`
		}
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("gaps --json line %q: %v", line, err)
		}
		if o.Kind == "unavailable" {
			found = true
			if o.Source != "std" || o.Length < 60 || len(o.Sources) != 1 || o.Sources[0].Source != "std" || o.Sources[0].Recovery == "" {
				t.Errorf("unavailable window %s, want std's minute with its recovery", line)
			}
		}
	}
	if !found {
		t.Fatalf("gaps --json: %s\nwant a window of kind unavailable (answers %v)", out, codes)
	}
	if _, text, _ := runBin(t, "gaps", "--config", cfg); !strings.Contains(text, "503 to std") {
		t.Errorf("gaps text:\n%s\nwant the window ended by \"503 to std\"", text)
	}
}
