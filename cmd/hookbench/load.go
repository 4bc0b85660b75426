package main

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load generator speaks HTTP/1.1 over raw keep-alive connections, one
// goroutine per connection: the cheapest client that can be written in Go,
// so that as much of the two cores as possible is left to the server under
// test. Baseline and hookwarden get exactly the same requests from it.

// loadSpec describes one load phase.
type loadSpec struct {
	Addr string // host:port of the server
	Path string // /hooks/bench
	// Conns is the number of keep-alive connections, each with one request
	// in flight at a time (closed loop).
	Conns int
	// Warmup is run first and not counted; Duration bounds the measured
	// window; MaxRequests (if > 0) bounds the requests sent in all.
	Warmup, Duration time.Duration
	MaxRequests      int64
	// DupShare is the share of requests that re-send an event id this
	// connection sent before (a provider retry: same id and body, new
	// timestamp and signature).
	DupShare float64
	// Rate, if > 0, paces the whole phase at this many requests per second
	// (open loop, spread over the connections); 0 sends as fast as answered.
	Rate float64
	// Redrive, if set, is the list of event ids to send again, each once
	// (every request a duplicate of an already processed event).
	Redrive []uint64
	Gen     *generator
	// OnMeasure, if set, is called when the measured window opens.
	OnMeasure func()
	// Live, if set, counts accepted answers as they come (for samplers).
	Live *atomic.Int64
}

// loadResult is what one phase measured. Latencies are in milliseconds.
type loadResult struct {
	Conns       int     `json:"conns"`
	Requests    int64   `json:"requests"`
	Acks        int64   `json:"acks"` // 2xx answers
	Accepted    int64   `json:"accepted"`
	Duplicates  int64   `json:"duplicates"`
	Unavailable int64   `json:"unavailable_503"`
	Other       int64   `json:"other_status"`
	NetErrors   int64   `json:"net_errors"`
	Seconds     float64 `json:"seconds"`
	AcksPerSec  float64 `json:"acks_per_sec"`
	P50         float64 `json:"p50_ms"`
	P95         float64 `json:"p95_ms"`
	P99         float64 `json:"p99_ms"`
	Max         float64 `json:"max_ms"`
	// ClientCPU is the harness's own CPU seconds during the phase.
	ClientCPU float64 `json:"client_cpu_s"`
	// ServerCPUPerAck is the server's CPU (user and system) per
	// acknowledgement in the measured window, in µs, where the caller
	// measured it: the work behind each one, apart from the disk's waits.
	// Not free of the machine's noise: a guest's CPU time grows when the
	// host shares its cores (a fresh store's rounds spread 124-196 µs in
	// one run).
	ServerCPUPerAck float64 `json:"server_cpu_us_per_ack,omitempty"`

	firstSend   time.Time
	acceptedIDs []uint64
}

// generator makes signed Standard Webhooks requests with a fixed-size JSON
// body. Event ids are unique across the whole harness run.
type generator struct {
	key      []byte
	bodySize int
	prefix   string // run-unique part of every event id
	next     atomic.Uint64
	// stripe makes the body a Stripe-like invoice.paid event (filter.go)
	// instead of a bench.event.
	stripe bool
	// spread leads each id with eight hex digits in no order, as a UUID
	// does (GitHub's, Shopify's): each claim lands on a random leaf of the
	// claim index, among the history's (hookwarden.HistoryEventID), not
	// after the newest.
	spread bool
	// meta, if > 0, makes each request a WhatsApp-shaped batch of meta
	// messages (batch.go), signed as Meta signs (scheme meta, key the App
	// Secret's bytes), instead of a Standard Webhooks event.
	meta int
}

const idDigits = 10

func newGenerator(key []byte, bodySize int) *generator {
	var p [4]byte
	for i := range p {
		p[i] = "abcdefghijklmnopqrstuvwxyz"[rand.IntN(26)]
	}
	return &generator{key: key, bodySize: bodySize, prefix: "msg_" + string(p[:]) + "_"}
}

func (g *generator) newID() uint64 { return g.next.Add(1) }

// appendID writes the text form of event n.
func (g *generator) appendID(b []byte, n uint64) []byte {
	if g.spread {
		var lead [8]byte
		x := mix32(n)
		for i := range lead {
			lead[7-i] = "0123456789abcdef"[x>>(4*i)&15]
		}
		b = append(append(b, lead[:]...), '-')
	}
	b = append(b, g.prefix...)
	s := strconv.FormatUint(n, 10)
	for range idDigits - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// mix32 scrambles n (the finalizer of splitmix64), for spread ids.
func mix32(n uint64) uint32 {
	n = (n ^ n>>30) * 0xbf58476d1ce4e5b9
	n = (n ^ n>>27) * 0x94d049bb133111eb
	return uint32(n ^ n>>31)
}

// conn is one load connection with its reusable buffers.
type loadConn struct {
	g        *generator
	spec     *loadSpec
	c        net.Conn
	br       *bufio.Reader
	mac      hash.Hash
	body     []byte // template; the id is rewritten in place
	idAt     int    // offset of the id in body
	req      []byte
	sig      [64]byte
	recent   [4096]uint64 // ids this connection sent, for duplicates
	nrecent  int
	rnd      *rand.Rand
	lat      []uint32 // microseconds, measured window only
	accepted []uint64
}

func newLoadConn(spec *loadSpec, seed uint64) *loadConn {
	g := spec.Gen
	lc := &loadConn{g: g, spec: spec, mac: hmac.New(sha256.New, g.key), rnd: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	head := []byte(`{"id":"`)
	lc.idAt = len(head)
	b := g.appendID(head, 0)
	if g.stripe {
		lc.body = stripeBody(b, g.bodySize)
		return lc
	}
	b = append(b, `","type":"bench.event","data":{"object":"invoice","pad":"`...)
	tail := `"}}`
	for len(b) < g.bodySize-len(tail) {
		b = append(b, 'x')
	}
	lc.body = append(b, tail...)
	return lc
}

func (lc *loadConn) dial() error {
	c, err := net.DialTimeout("tcp", lc.spec.Addr, 5*time.Second)
	if err != nil {
		return err
	}
	lc.c = c
	lc.br = bufio.NewReaderSize(c, 4096)
	return nil
}

func (lc *loadConn) close() {
	if lc.c != nil {
		lc.c.Close()
		lc.c = nil
	}
}

// build renders the request for event n, signed now.
func (lc *loadConn) build(n uint64) {
	g := lc.g
	if g.meta > 0 {
		lc.buildMeta(n)
		return
	}
	id := g.appendID(lc.body[:lc.idAt], n) // fixed width: rewrites the id in place
	idb := id[lc.idAt:]
	ts := strconv.AppendInt(nil, time.Now().Unix(), 10)
	lc.mac.Reset()
	lc.mac.Write(idb)
	lc.mac.Write([]byte{'.'})
	lc.mac.Write(ts)
	lc.mac.Write([]byte{'.'})
	lc.mac.Write(lc.body)
	sum := lc.mac.Sum(lc.sig[:0])
	r := lc.req[:0]
	r = append(r, "POST "...)
	r = append(r, lc.spec.Path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, lc.spec.Addr...)
	r = append(r, "\r\nUser-Agent: hookbench\r\nContent-Type: application/json\r\nwebhook-id: "...)
	r = append(r, idb...)
	r = append(r, "\r\nwebhook-timestamp: "...)
	r = append(r, ts...)
	r = append(r, "\r\nwebhook-signature: v1,"...)
	r = base64.StdEncoding.AppendEncode(r, sum)
	r = append(r, "\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(lc.body)), 10)
	r = append(r, "\r\n\r\n"...)
	r = append(r, lc.body...)
	lc.req = r
}

type answerKind int

const (
	ansAccepted answerKind = iota
	ansDuplicate
	ansOther2xx
	ans503
	ansOther
)

var errProtocol = errors.New("malformed response")

// roundTrip sends the built request and reads the answer.
func (lc *loadConn) roundTrip() (answerKind, error) {
	if lc.c == nil {
		if err := lc.dial(); err != nil {
			return ansOther, err
		}
	}
	lc.c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := lc.c.Write(lc.req); err != nil {
		return ansOther, err
	}
	line, err := lc.br.ReadSlice('\n')
	if err != nil {
		return ansOther, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return ansOther, errProtocol
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return ansOther, errProtocol
	}
	length, chunked, closeAfter := -1, false, false
	for {
		h, err := lc.br.ReadSlice('\n')
		if err != nil {
			return ansOther, err
		}
		if len(h) <= 2 {
			break
		}
		name, val, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return ansOther, errProtocol
		}
		val = bytes.TrimSpace(val)
		switch {
		case asciiEqualFold(name, "content-length"):
			if length, err = strconv.Atoi(string(val)); err != nil {
				return ansOther, errProtocol
			}
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(val, "chunked")
		case asciiEqualFold(name, "connection"):
			closeAfter = asciiEqualFold(val, "close")
		}
	}
	var body []byte
	switch {
	case chunked:
		body, err = readChunked(lc.br)
	case length >= 0:
		body = make([]byte, length)
		_, err = io.ReadFull(lc.br, body)
	default:
		body, err = io.ReadAll(lc.br)
		closeAfter = true
	}
	if err != nil {
		return ansOther, err
	}
	if closeAfter {
		lc.close()
	}
	switch {
	case code >= 200 && code < 300:
		switch {
		case bytes.Contains(body, []byte(`"accepted"`)):
			return ansAccepted, nil
		case bytes.Contains(body, []byte(`"duplicate"`)):
			return ansDuplicate, nil
		}
		return ansOther2xx, nil
	case code == 503:
		return ans503, nil
	}
	return ansOther, nil
}

func readChunked(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 32)
		if err != nil {
			return nil, errProtocol
		}
		if size == 0 {
			_, err := br.ReadSlice('\n')
			return out, err
		}
		chunk := make([]byte, size+2)
		if _, err := io.ReadFull(br, chunk); err != nil {
			return nil, err
		}
		out = append(out, chunk[:size]...)
	}
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// runLoad runs one phase and returns its measurements.
func runLoad(spec loadSpec) loadResult {
	cpu0 := selfCPU()
	conns := make([]*loadConn, spec.Conns)
	for i := range conns {
		conns[i] = newLoadConn(&spec, uint64(i+1)*7919+uint64(time.Now().UnixNano()))
	}
	var (
		sent                                             atomic.Int64
		cursor                                           atomic.Int64 // redrive
		accepted, dups, other2xx, unavail, other, neterr atomic.Int64
		wg                                               sync.WaitGroup
	)
	start := time.Now()
	measureFrom := start.Add(spec.Warmup)
	end := measureFrom.Add(spec.Duration)
	if spec.Duration <= 0 {
		end = start.Add(24 * time.Hour) // bounded by count only
	}
	allDone, measured := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(measured)
		select {
		case <-time.After(time.Until(measureFrom)):
			if spec.OnMeasure != nil {
				spec.OnMeasure()
			}
		case <-allDone:
		}
	}()
	var interval time.Duration
	if spec.Rate > 0 {
		interval = time.Duration(float64(spec.Conns) / spec.Rate * float64(time.Second))
	}
	for i, lc := range conns {
		wg.Go(func() {
			defer lc.close()
			next := start.Add(time.Duration(i) * interval / time.Duration(spec.Conns))
			for {
				if spec.MaxRequests > 0 && sent.Add(1) > spec.MaxRequests {
					return
				}
				if interval > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					next = next.Add(interval)
				}
				now := time.Now()
				if !now.Before(end) {
					return
				}
				var n uint64
				if spec.Redrive != nil {
					k := cursor.Add(1) - 1
					if k >= int64(len(spec.Redrive)) {
						return
					}
					n = spec.Redrive[k]
				} else if lc.nrecent > 0 && lc.rnd.Float64() < spec.DupShare {
					n = lc.recent[lc.rnd.IntN(min(lc.nrecent, len(lc.recent)))]
				} else {
					n = spec.Gen.newID()
					lc.recent[lc.nrecent%len(lc.recent)] = n
					lc.nrecent++
				}
				lc.build(n)
				t0 := time.Now()
				kind, err := lc.roundTrip()
				t1 := time.Now()
				if err != nil {
					lc.close()
					neterr.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if t0.Before(measureFrom) {
					continue
				}
				lc.lat = append(lc.lat, uint32(min(t1.Sub(t0).Microseconds(), 1<<32-1)))
				switch kind {
				case ansAccepted:
					accepted.Add(1)
					lc.accepted = append(lc.accepted, n)
					if spec.Live != nil {
						spec.Live.Add(1)
					}
				case ansDuplicate:
					dups.Add(1)
				case ansOther2xx:
					other2xx.Add(1)
				case ans503:
					unavail.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	stop := time.Now()
	close(allDone)
	<-measured
	window := stop.Sub(measureFrom)
	if spec.Duration > 0 && window > spec.Duration {
		window = spec.Duration + stop.Sub(end) // requests started before end finish after it
	}
	res := loadResult{Conns: spec.Conns, Accepted: accepted.Load(), Duplicates: dups.Load(),
		Unavailable: unavail.Load(), Other: other.Load(), NetErrors: neterr.Load(),
		Seconds: window.Seconds(), firstSend: start}
	res.Acks = res.Accepted + res.Duplicates + other2xx.Load()
	res.Requests = res.Acks + res.Unavailable + res.Other
	res.AcksPerSec = float64(res.Acks) / window.Seconds()
	var lat []uint32
	for _, lc := range conns {
		lat = append(lat, lc.lat...)
		res.acceptedIDs = append(res.acceptedIDs, lc.accepted...)
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)]) / 1000
	}
	res.P50, res.P95, res.P99 = q(0.50), q(0.95), q(0.99)
	if len(lat) > 0 {
		res.Max = float64(lat[len(lat)-1]) / 1000
	}
	res.ClientCPU = selfCPU() - cpu0
	return res
}

func (r loadResult) String() string {
	s := fmt.Sprintf("%7.0f acks/s  p50 %6.2f  p95 %6.2f  p99 %6.2f  max %7.2f ms  (%d acks, %d dup, %d 503, %d other, %d net errors)",
		r.AcksPerSec, r.P50, r.P95, r.P99, r.Max, r.Acks, r.Duplicates, r.Unavailable, r.Other, r.NetErrors)
	if r.ServerCPUPerAck > 0 {
		s += fmt.Sprintf("  serve %.0f µs CPU/ack", r.ServerCPUPerAck)
	}
	return s
}
