package torture

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// destMode is how the destination app answers.
type destMode int32

const (
	modeOK      destMode = iota // 200
	modeRefused                 // not listening: connection refused
	mode503                     // 503, with Retry-After when set
	modeSlow                    // answers only after slowFor (beyond the timeout)
)

// seen is one request the destination app received.
type seen struct {
	At, End time.Time
	Attempt int // Hookwarden-Attempt
	Key     string
	Status  int // what the app answered; 0: the client gave up first
	Sum     [32]byte
}

// destApp is the user's application on loopback: it records every request
// by event id. A request answered 2xx is a delivery.
type destApp struct {
	t    testing.TB
	addr string

	mode       atomic.Int32
	slowFor    time.Duration
	retryAfter string // sent with 503s

	mu        sync.Mutex
	srv       *http.Server
	byID      map[string][]seen
	delivered atomic.Int64 // requests answered 2xx
	requests  atomic.Int64
}

func newDestApp(t testing.TB) *destApp {
	t.Helper()
	a := &destApp{t: t, addr: freeAddr(t), byID: map[string][]seen{}, slowFor: 5 * time.Second}
	a.listen()
	t.Cleanup(func() {
		a.mu.Lock()
		srv := a.srv
		a.srv = nil
		a.mu.Unlock()
		if srv != nil {
			_ = srv.Close()
		}
	})
	return a
}

func (a *destApp) url() string { return "http://" + a.addr + "/webhooks" }

func (a *destApp) listen() {
	a.t.Helper()
	var ln net.Listener
	var err error
	// The port was ours a moment ago; rebinding can race a TIME_WAIT or
	// another process for a moment.
	for i := 0; i < 100; i++ {
		if ln, err = net.Listen("tcp", a.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		a.t.Fatalf("destination app: listen %s: %v", a.addr, err)
	}
	srv := &http.Server{
		Handler:           a,
		ReadHeaderTimeout: 5 * time.Second,
		// Short: hookwarden's idle keep-alive connections are closed soon,
		// so the child's fd count settles when it is idle.
		IdleTimeout: time.Second,
	}
	a.mu.Lock()
	a.srv = srv
	a.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// setMode switches how the app answers; modeRefused closes the listener and
// every connection, and leaving it listens again on the same address.
func (a *destApp) setMode(m destMode) {
	a.t.Helper()
	old := destMode(a.mode.Swap(int32(m)))
	if old == m {
		return
	}
	switch {
	case m == modeRefused:
		a.mu.Lock()
		srv := a.srv
		a.srv = nil
		a.mu.Unlock()
		if srv != nil {
			_ = srv.Close()
		}
	case old == modeRefused:
		a.listen()
	}
}

func (a *destApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	id := r.Header.Get("Hookwarden-Event-Id")
	n, _ := strconv.Atoi(r.Header.Get("Hookwarden-Attempt"))
	s := seen{At: start, Attempt: n, Key: r.Header.Get("Idempotency-Key"), Sum: sha256.Sum256(body)}
	switch destMode(a.mode.Load()) {
	case mode503:
		s.Status = http.StatusServiceUnavailable
	case modeSlow:
		t := time.NewTimer(a.slowFor)
		select {
		case <-r.Context().Done():
			s.Status = 0 // hookwarden gave up (its timeout): not delivered
		case <-t.C:
			s.Status = http.StatusOK
		}
		t.Stop()
	default:
		s.Status = http.StatusOK
	}
	s.End = time.Now()
	a.mu.Lock()
	a.byID[id] = append(a.byID[id], s)
	a.mu.Unlock()
	switch s.Status {
	case 0:
		return
	case http.StatusServiceUnavailable:
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
	case http.StatusOK:
		a.delivered.Add(1)
	}
	w.WriteHeader(s.Status)
}

// deliveries returns, per event id, the requests the app answered 2xx.
func (a *destApp) deliveries() map[string][]seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string][]seen, len(a.byID))
	for id, ss := range a.byID {
		for _, s := range ss {
			if s.Status >= 200 && s.Status < 300 {
				out[id] = append(out[id], s)
			}
		}
	}
	return out
}

// requestsByID returns every request seen, per event id, in arrival order.
func (a *destApp) requestsByID() map[string][]seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string][]seen, len(a.byID))
	for id, ss := range a.byID {
		out[id] = append([]seen(nil), ss...)
	}
	return out
}

func (a *destApp) hasDelivery(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.byID[id] {
		if s.Status >= 200 && s.Status < 300 {
			return true
		}
	}
	return false
}

// shutdown stops the app (used before goleak runs).
func (a *destApp) shutdown() {
	a.mu.Lock()
	srv := a.srv
	a.srv = nil
	a.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			_ = srv.Close()
		}
	}
}
