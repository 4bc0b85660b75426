package receiver

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Memory before authentication. A request body is read into a buffer that
// grows with the bytes that arrive, never sized from Content-Length (a
// header costs the sender nothing), and every request holds a share of one
// budget, limits.max_inflight_bytes: its header list (HTTP/2 multiplies
// those by its streams), the capacity of its growth buffer (the old and the
// new one both, while a growth copies) and the exact-size copy handed on.
// Each client (an address, a /64 for IPv6) may hold at most
// limits.max_inflight_bytes_per_client of it, so a few clients cannot take
// it all. A request that finds no room is answered 503 at once, and so is
// one whose body outgrows what is left. A body that arrives slower than
// limits.min_body_bytes_per_second after limits.slow_body_grace, or stalls
// for that grace, is cut (408).
const (
	// firstBuffer is the size a growth buffer starts at: most webhook
	// bodies are a few KiB and never grow it.
	firstBuffer = 4 << 10
	// maxPooled: buffers grown past this go to the garbage collector, so
	// one large body does not pin its buffer in the pool.
	maxPooled = 64 << 10
	// headerFieldOverhead is what each header field costs besides its name
	// and value, as HTTP/2 counts a header list (RFC 9113 section 6.5.2).
	headerFieldOverhead = 32
	// ReadTimeout is the receiver server's http.Server.ReadTimeout: no
	// request body is read for longer, however fast it arrives.
	ReadTimeout = 30 * time.Second
)

// errBudget: the in-flight budget has no room for (more of) this body.
var errBudget = errors.New("in-flight body budget exhausted")

// errClientShare: the client's share of the budget has no room.
var errClientShare = errors.New("client's share of the in-flight budget exhausted")

// errTooSlow: the body arrived slower than the minimum rate.
var errTooSlow = errors.New("body arrived slower than the minimum rate")

// budget counts the request bytes held in memory, all connections
// together and per client.
type budget struct {
	max, perClient int64
	used           atomic.Int64

	mu      sync.Mutex
	clients map[netip.Prefix]int64 // only clients holding some
}

// hold is one request's part of the budget.
type hold struct {
	b      *budget
	client netip.Prefix
	n      int64
}

// take reserves n more bytes for the request, or reports which bound they
// do not fit.
func (h *hold) take(n int64) error {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.clients[h.client]
	if c+n > b.perClient {
		return errClientShare
	}
	for {
		u := b.used.Load()
		if u+n > b.max {
			return errBudget
		}
		if b.used.CompareAndSwap(u, u+n) {
			break
		}
	}
	b.clients[h.client] = c + n
	h.n += n
	return nil
}

// give returns n of the request's bytes (all of them with n < 0).
func (h *hold) give(n int64) {
	if n < 0 || n > h.n {
		n = h.n
	}
	if n == 0 {
		return
	}
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used.Add(-n)
	h.n -= n
	if c := b.clients[h.client] - n; c > 0 {
		b.clients[h.client] = c
	} else {
		delete(b.clients, h.client)
	}
}

// release returns everything the request holds.
func (h *hold) release() { h.give(-1) }

// clientKey is the budget's client: the address, or its /64 for IPv6 (one
// host's allocation). An address that does not parse is one client "".
func clientKey(addr string) netip.Prefix {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return netip.Prefix{}
		}
		a = ap.Addr()
	}
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// headerBytes is what the request's header list costs as HTTP/2 counts it.
func headerBytes(r *http.Request) int64 {
	n := int64(len(r.Method) + len(r.RequestURI) + len(r.Host) + 3*headerFieldOverhead)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + headerFieldOverhead)
		}
	}
	return n
}

// bufPool holds growth buffers. Only a small growth buffer is pooled: the
// body handed on is an exact-size copy, because the store keeps the Receipt
// (and so its body) past Record, in its write queue when the caller gave up,
// and in a job handed straight to a delivery slot.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, firstBuffer)
	return &b
}}

// pace cuts a body that arrives too slowly: the next byte is due within the
// grace of the last one, and by then at least rate bytes a second past the
// grace must have arrived. The connection's read deadline carries it, moved
// only when it moved by a second or more (a small body sets it once).
type pace struct {
	rc          *http.ResponseController
	start, last time.Time
	grace       time.Duration
	rate        int64
	set         time.Time // the deadline set; zero: none yet
	cap         time.Time
}

func (p *pace) before(n int64) {
	if p.rate <= 0 {
		return
	}
	due := p.last.Add(p.grace)
	if byRate := p.start.Add(p.grace + time.Duration(float64(n)/float64(p.rate)*float64(time.Second))); byRate.Before(due) {
		due = byRate
	}
	if due.After(p.cap) {
		due = p.cap
	}
	if !p.set.IsZero() && due.Sub(p.set) < time.Second {
		return
	}
	p.set = due
	_ = p.rc.SetReadDeadline(due) // unsupported (a test's recorder): the server's ReadTimeout still holds
}

// done gives the connection back the deadline it would have had: HTTP/1's
// background read after the body must not time out during the commit.
func (p *pace) done() {
	if !p.set.IsZero() && p.set.Before(p.cap) {
		_ = p.rc.SetReadDeadline(p.cap)
	}
}

// readBody reads the whole body once, refusing more than max_body_bytes
// (*http.MaxBytesError), more than the budget or the client's share has
// left (errBudget, errClientShare) and a body that arrives too slowly
// (errTooSlow). What it holds of the budget stays held by h, which the
// caller releases when the request is done, whatever the error.
func (rc *Receiver) readBody(w http.ResponseWriter, r *http.Request, h *hold) (body []byte, err error) {
	limit := rc.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	// The header list lives as long as the request.
	if err := h.take(headerBytes(r)); err != nil {
		return nil, err
	}
	if r.ContentLength == 0 {
		return []byte{}, nil
	}
	bp := bufPool.Get().(*[]byte)
	buf := (*bp)[:0]
	bufHeld := int64(cap(buf))
	if err := h.take(bufHeld); err != nil {
		bufPool.Put(bp)
		return nil, err
	}
	handed := false // buf is the body
	defer func() {
		if handed {
			return
		}
		if cap(buf) <= maxPooled {
			*bp = buf[:0]
			bufPool.Put(bp)
		}
		h.give(bufHeld)
	}()
	// Never more than the body can be: its declared length (net/http
	// reads no further), or one byte past the limit to see it exceeded.
	most := limit + 1
	if r.ContentLength > 0 {
		most = r.ContentLength
	}
	now := time.Now()
	pc := &pace{rc: http.NewResponseController(w), start: now, last: now, grace: rc.opts.SlowBodyGrace,
		rate: rc.opts.MinBodyRate, cap: now.Add(ReadTimeout)}
	defer pc.done()
	rd := http.MaxBytesReader(w, r.Body, limit)
	for {
		if len(buf) == cap(buf) {
			// Double, but not past what the body can be: the budget, not
			// this size, bounds memory; doubling keeps copies linear. The
			// old buffer is held until the copy is done.
			size := max(min(2*int64(cap(buf)), most), int64(len(buf))+1)
			if err := h.take(size); err != nil {
				return nil, err
			}
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			h.give(bufHeld)
			buf, bufHeld = grown, size
		}
		pc.before(int64(len(buf)))
		n, rerr := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 {
			now = time.Now()
			pc.last = now
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if errors.Is(rerr, os.ErrDeadlineExceeded) && pc.rate > 0 {
				return nil, errTooSlow
			}
			return nil, rerr
		}
		if r.ContentLength > 0 && int64(len(buf)) == r.ContentLength {
			break // all declared bytes are here; net/http allows no more
		}
	}
	if cap(buf) > maxPooled && len(buf) == cap(buf) {
		// Not pooled and exactly full: it is the exact-size copy, and
		// what it holds of the budget is the body's.
		handed = true
		return buf, nil
	}
	if err := h.take(int64(len(buf))); err != nil {
		return nil, err
	}
	body = make([]byte, len(buf))
	copy(body, buf)
	return body, nil
}

// InflightBytes is the budget request bodies hold now.
func (rc *Receiver) InflightBytes() int64 { return rc.budget.used.Load() }

// LimitListener returns a listener that keeps at most n of its connections
// open: Accept waits while n are open (the kernel's backlog holds the
// rest), so idle or slow clients cannot pile up goroutines and buffers
// without end. n <= 0 means no limit.
func LimitListener(ln net.Listener, n int) net.Listener {
	if n <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
