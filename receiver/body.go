package receiver

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Memory before authentication. A request body is read into a buffer that
// grows with the bytes that arrive, never sized from Content-Length (a
// header costs the sender nothing), and every body in memory holds a share
// of one budget, limits.max_inflight_bytes, reserved in budgetChunk steps
// as bytes arrive. A request that cannot get its first chunk is answered
// 503 at once, and so is one whose body outgrows what is left.
const (
	// budgetChunk is the step in which a body reserves budget, so the
	// shared counter is touched once per 16 KiB and not once per read.
	budgetChunk = 16 << 10
	// firstBuffer is the size a growth buffer starts at: most webhook
	// bodies are a few KiB and never grow it.
	firstBuffer = 4 << 10
	// maxPooled: buffers grown past this go to the garbage collector, so
	// one large body does not pin its buffer in the pool.
	maxPooled = 64 << 10
)

// errBudget: the in-flight budget has no room for (more of) this body.
var errBudget = errors.New("in-flight body budget exhausted")

// budget counts the request body bytes held in memory, all connections
// together.
type budget struct {
	max  int64
	used atomic.Int64
}

// take reserves n bytes, or reports that they do not fit.
func (b *budget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *budget) release(n int64) {
	if n != 0 {
		b.used.Add(-n)
	}
}

// bufPool holds growth buffers. Only the growth buffer is pooled: the body
// handed on is an exact-size copy, because the store keeps the Receipt (and
// so its body) past Record, in its write queue when the caller gave up, and
// in a job handed straight to a delivery slot.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, firstBuffer)
	return &b
}}

// readBody reads the whole body once, refusing more than max_body_bytes
// (*http.MaxBytesError) and more than the budget has left (errBudget). It
// returns the bytes of budget it holds, which the caller releases when the
// request is done, whatever the error.
func (rc *Receiver) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, err error) {
	limit := rc.opts.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, 0, &http.MaxBytesError{Limit: limit}
	}
	if r.ContentLength == 0 {
		return []byte{}, 0, nil
	}
	// The first reservation: a chunk, or less when the body is declared
	// smaller (net/http never reads past Content-Length).
	held = budgetChunk
	if r.ContentLength > 0 && r.ContentLength < held {
		held = r.ContentLength
	}
	if !rc.budget.take(held) {
		return nil, 0, errBudget
	}
	bp := bufPool.Get().(*[]byte)
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= maxPooled {
			*bp = buf[:0]
			bufPool.Put(bp)
		}
	}()
	rd := http.MaxBytesReader(w, r.Body, limit)
	for {
		if int64(len(buf)) == held {
			if !rc.budget.take(budgetChunk) {
				return nil, held, errBudget
			}
			held += budgetChunk
		}
		if len(buf) == cap(buf) {
			// Double, but not far past the limit: the budget, not this
			// size, is what bounds memory; doubling keeps copies linear.
			grown := make([]byte, len(buf), max(min(2*int64(cap(buf)), limit+1), int64(len(buf))+1))
			copy(grown, buf)
			buf = grown
		}
		// Never read past what the budget holds.
		end := min(int64(cap(buf)), held)
		n, rerr := rd.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, held, rerr
		}
		if r.ContentLength > 0 && int64(len(buf)) == r.ContentLength {
			break // all declared bytes are here; net/http allows no more
		}
	}
	body = make([]byte, len(buf))
	copy(body, buf)
	return body, held, nil
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
