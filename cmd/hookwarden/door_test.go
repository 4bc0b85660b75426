package main

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/hookwarden/hookwarden/internal/metrics"
)

// The door: what a request may cost before it is authenticated (docs/reference.md,
// "Limits and timeouts"), held through the real binary.

// declare opens a connection to addr and sends a POST that declares
// contentLength bytes of body, then only the first of them.
func declare(t *testing.T, addr string, contentLength int, first string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /hooks/std HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, contentLength, first)
	return c
}

// heapAlloc is the child's go_memstats_heap_alloc_bytes from /metrics:
// unlike RSS it counts a buffer whose pages were never touched (with
// transparent huge pages off, a 1 MiB buffer holding 10 bytes costs one
// page of RSS but 1 MiB of heap).
func heapAlloc(t *testing.T, adm string) int64 {
	t.Helper()
	return int64(scrape(t, adm, "go_memstats_heap_alloc_bytes"))
}

// scrape reads one series from the child's /metrics; the test fails if it
// is absent.
func scrape(t *testing.T, adm, series string) float64 {
	t.Helper()
	v, ok := scrapeAll(t, adm)[series]
	if !ok {
		t.Fatalf("no %s in /metrics", series)
	}
	return v
}

// scrapeAll reads the child's /metrics, one value per series as the
// exposition writes it (name{label="value",...}).
func scrapeAll(t *testing.T, adm string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + adm + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, err := metrics.ParseText(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// procStatus reads the process's /proc/PID/status (sizes in bytes).
func procStatus(t *testing.T, pid int) procfs.ProcStatus {
	t.Helper()
	p, err := procfs.NewProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.NewStatus()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestIdleDeclaredBodiesDoNotTakeMemory: 300 connections each declaring a
// 1 MiB body and sending 10 bytes of it grow the server's RSS by less than
// 96 MiB (a buffer sized from Content-Length took it past 400 MiB), and
// signed requests sent meanwhile are answered: 200, or 503 with
// Retry-After while the budget is full, never a hang or a crash. Run with
// the default budget (room for all of them) and with one of 2 MiB (most
// are refused at once).
func TestIdleDeclaredBodiesDoNotTakeMemory(t *testing.T) {
	for _, tc := range []struct{ name, extra string }{
		{"default budget", ""},
		{"full budget", "limits: { max_inflight_bytes: 2097152 }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { idleDeclaredBodies(t, tc.extra) })
	}
}

func idleDeclaredBodies(t *testing.T, extra string) {
	app := newSink(t)
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "hw.db")
	hook, adm := freeAddr(t), freeAddr(t)
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, extra)
	p := startServe(t, cfg, hook, adm)
	pid := p.cmd.Process.Pid
	for i := range 5 { // warm up: the first requests' allocations are not the attack's
		if got := do(t, signed(t, "http://"+hook+"/hooks/std", fmt.Sprintf("msg_warm_%d", i), []byte(`{"type":"w"}`), time.Now(), testSecret)); got.Code != 200 {
			t.Fatalf("warm-up: %+v", got)
		}
	}
	before, heapBefore := int64(procStatus(t, pid).VmRSS>>10), heapAlloc(t, adm)

	const conns = 300
	idle := make([]net.Conn, 0, conns)
	for range conns {
		idle = append(idle, declare(t, hook, 1<<20, `{"type":"`))
	}
	client := &http.Client{Timeout: 20 * time.Second}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := signed(t, "http://"+hook+"/hooks/std", fmt.Sprintf("msg_meanwhile_%d", i), []byte(`{"type":"m"}`), time.Now(), testSecret)
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("signed request %d beside the idle bodies: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[200]+codes[503] != 20 {
		t.Fatalf("answers to the signed requests: %v, want only 200 or 503", codes)
	}
	// Every idle connection has been read by now (the signed ones came
	// after them); give the last reads a moment, then take the peak.
	time.Sleep(300 * time.Millisecond)
	peak, heap := int64(procStatus(t, pid).VmHWM>>10), heapAlloc(t, adm)
	if held := scrape(t, adm, "hookwarden_receiver_inflight_bytes"); held <= 0 {
		t.Errorf("hookwarden_receiver_inflight_bytes %v with %d bodies open, want > 0", held, conns)
	}
	growth := peak - before
	t.Logf("RSS %d KiB before, peak %d KiB with %d idle bodies: +%d KiB; heap in use %d -> %d KiB; answers %v",
		before, peak, conns, growth, heapBefore>>10, heap>>10, codes)
	if growth >= 96<<10 {
		t.Fatalf("RSS grew by %d KiB with %d idle declared bodies, want < 96 MiB", growth, conns)
	}
	if heap-heapBefore >= 96<<20 {
		t.Fatalf("heap in use grew by %d KiB with %d idle declared bodies, want < 96 MiB", (heap-heapBefore)>>10, conns)
	}
	for _, c := range idle {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, adm, "hookwarden_receiver_inflight_bytes") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("hookwarden_receiver_inflight_bytes never returned to 0 after the connections closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := do(t, signed(t, "http://"+hook+"/hooks/std", "msg_after", []byte(`{"type":"a"}`), time.Now(), testSecret)); got.Code != 200 {
		t.Fatalf("after the idle connections closed: %+v", got)
	}
}

// TestMaxConnections: with limits.max_connections 2, a third connection
// waits for a free place and is served once one closes.
func TestMaxConnections(t *testing.T) {
	app := newSink(t)
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "hw.db")
	hook, adm := freeAddr(t), freeAddr(t)
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, "limits: { max_connections: 2 }\n")
	startServe(t, cfg, hook, adm)
	a := declare(t, hook, 100, "")
	declare(t, hook, 100, "")

	answered := make(chan answerT, 1)
	go func() {
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		req := signed(t, "http://"+hook+"/hooks/std", "msg_third", []byte(`{"type":"t"}`), time.Now(), testSecret)
		resp, err := client.Do(req)
		if err != nil {
			answered <- answerT{Code: -1, Status: err.Error()}
			return
		}
		resp.Body.Close()
		answered <- answerT{Code: resp.StatusCode}
	}()
	select {
	case got := <-answered:
		t.Fatalf("a third connection was served while two were open: %+v", got)
	case <-time.After(500 * time.Millisecond):
	}
	a.Close()
	select {
	case got := <-answered:
		if got.Code != 200 {
			t.Fatalf("third connection after one closed: %+v", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the third connection was never served after one closed")
	}
}

// TestHTTP2SixteenStreamsPerConnection: with native TLS, the receiver's
// first SETTINGS frame caps concurrent streams at 16 and a 17th is reset, so
// one HTTP/2 connection cannot hold 250 request bodies at once. Raw frames:
// Go's client would queue the 17th itself.
func TestHTTP2SixteenStreamsPerConnection(t *testing.T) {
	app := newSink(t)
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "hw.db")
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	MustWriteCert(t, certPath, keyPath, 1)
	hook, adm := freeAddr(t), freeAddr(t)
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, fmt.Sprintf("tls: { cert: %q, key: %q }\n", certPath, keyPath))
	startServe(t, cfg, hook, adm)

	c, err := tls.Dial("tcp", hook, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.ConnectionState().NegotiatedProtocol; got != "h2" {
		t.Fatalf("negotiated %q, want h2", got)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// Client preface and an empty SETTINGS frame (RFC 9113 section 3.4).
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatal(err)
	}
	length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	if hdr[3] != 0x4 {
		t.Fatalf("first frame of type %d, want SETTINGS (4)", hdr[3])
	}
	payload := make([]byte, length)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatal(err)
	}
	streams := uint32(0)
	var settings []string
	for i := 0; i+6 <= len(payload); i += 6 {
		id, v := binary.BigEndian.Uint16(payload[i:]), binary.BigEndian.Uint32(payload[i+2:])
		settings = append(settings, fmt.Sprintf("%#x=%d", id, v))
		if id == 0x3 { // SETTINGS_MAX_CONCURRENT_STREAMS
			streams = v
		}
	}
	if streams != 16 {
		t.Fatalf("SETTINGS %s: MAX_CONCURRENT_STREAMS %d, want 16", strings.Join(settings, " "), streams)
	}

	// Enforced: acknowledge the settings, open 17 streams that each declare a
	// 1 MiB body and send none of it; the 17th is reset, the first 16 are not.
	frame := func(typ, flags byte, stream uint32, payload []byte) []byte {
		f := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(f[5:], stream)
		return append(f, payload...)
	}
	// HPACK literal fields without indexing, new names (RFC 7541 section 6.2.2).
	var block []byte
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", "/hooks/std"},
		{":authority", hook}, {"content-type", "application/json"}, {"content-length", "1048576"}} {
		block = append(block, 0, byte(len(kv[0])))
		block = append(block, kv[0]...)
		block = append(block, byte(len(kv[1])))
		block = append(block, kv[1]...)
	}
	out := frame(0x4, 0x1, 0, nil) // SETTINGS ACK
	for i := range 17 {
		out = append(out, frame(0x1, 0x4, uint32(2*i+1), block)...) // HEADERS, END_HEADERS
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	const last = 2*16 + 1
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			t.Fatalf("no RST_STREAM for stream %d: %v", last, err)
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(r, payload); err != nil {
			t.Fatal(err)
		}
		id := binary.BigEndian.Uint32(hdr[5:]) &^ (1 << 31)
		switch hdr[3] {
		case 0x7: // GOAWAY
			t.Fatalf("GOAWAY instead of refusing one stream: %x", payload)
		case 0x3: // RST_STREAM
			if id != last {
				t.Fatalf("stream %d reset (code %d); only the 17th (%d) should be", id, binary.BigEndian.Uint32(payload), last)
			}
			return
		case 0x1:
			t.Fatalf("stream %d answered while its body was never sent", id)
		}
	}
}

// TestCommitTimeoutAnswers503: while another process holds the SQLite
// write lock, a request is answered 503 + Retry-After after about
// limits.commit_timeout instead of waiting for the lock. The commit lands
// once the lock is free, and the provider's retry is a duplicate: the event
// is delivered once.
func TestCommitTimeoutAnswers503(t *testing.T) {
	app, cfg, db, hook, adm := serveFiles(t, "limits: { commit_timeout: 300ms }\n")
	p := startServe(t, cfg, hook, adm)

	raw := MustOpenRaw(t, db, "_txlock=immediate")
	defer raw.Close()
	tx, err := raw.Begin() // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"late"}`)
	start := time.Now()
	got := do(t, signed(t, "http://"+hook+"/hooks/std", "msg_late", body, time.Now(), testSecret))
	waited := time.Since(start)
	if got.Code != 503 || got.Status != "unavailable" || got.RetryAfter == "" {
		t.Fatalf("with the write lock held: %+v, want 503 unavailable with Retry-After", got)
	}
	// Not a speed assert: only that it did not wait on the lock (the
	// store's busy timeout is 10 s).
	if waited > 3*time.Second {
		t.Fatalf("answered after %s, want about the 300ms commit_timeout", waited)
	}
	p.waitLog("the timeout", "commit timed out")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	// The provider retries: the first commit has landed or lands before
	// this one, so the retry is a duplicate (or the first accept).
	retry := do(t, signed(t, "http://"+hook+"/hooks/std", "msg_late", body, time.Now(), testSecret))
	if retry.Code != 200 || (retry.Status != "duplicate" && retry.Status != "accepted") {
		t.Fatalf("retry after the lock: %+v, want 200", retry)
	}
	app.wait(t)
	time.Sleep(300 * time.Millisecond)
	if n := app.count(); n != 1 {
		t.Fatalf("delivered %d times, want once", n)
	}
	var receipts int
	if err := raw.QueryRow(`SELECT count(*) FROM receipts`).Scan(&receipts); err != nil {
		t.Fatal(err)
	}
	if receipts != 2 {
		t.Fatalf("%d receipts, want 2 (the timed-out request committed, and its retry)", receipts)
	}
}
