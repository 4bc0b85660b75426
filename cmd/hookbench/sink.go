package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// sink is the local destination: it answers 200 to every delivery and
// counts distinct idempotency keys. /hold keeps each delivery waiting until
// release, which parks the workers of a destination so that an ack-only
// measurement is not shared with deliveries.
type sink struct {
	srv  *http.Server
	addr string

	mu      sync.Mutex
	seen    map[string]struct{}
	repeats int64 // deliveries of a key seen before
	lastNew time.Time
	hold    chan struct{}
	changed chan struct{} // closed and replaced on every new key
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{addr: ln.Addr().String(), seen: map[string]struct{}{}, hold: make(chan struct{}),
		changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/events", s.deliver)
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		hold := s.hold
		s.mu.Unlock()
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
		s.deliver(w, r)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *sink) url(path string) string { return "http://" + s.addr + path }

func (s *sink) deliver(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	now := time.Now()
	s.mu.Lock()
	if _, ok := s.seen[key]; ok {
		s.repeats++
	} else {
		s.seen[key] = struct{}{}
		s.lastNew = now
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// releaseAll lets every held delivery through, now and later, until rehold.
func (s *sink) releaseAll() {
	s.mu.Lock()
	close(s.hold)
	s.mu.Unlock()
}

func (s *sink) rehold() {
	s.mu.Lock()
	s.hold = make(chan struct{})
	s.mu.Unlock()
}

// reset forgets every key.
func (s *sink) reset() {
	s.mu.Lock()
	s.seen = map[string]struct{}{}
	s.repeats = 0
	s.lastNew = time.Time{}
	s.mu.Unlock()
}

func (s *sink) counts() (distinct int, repeats int64, lastNew time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen), s.repeats, s.lastNew
}

// waitDistinct waits until n distinct keys arrived; it returns the arrival
// time of the last new key and whether n was reached before the deadline.
func (s *sink) waitDistinct(n int, timeout time.Duration) (time.Time, bool) {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		got, last, ch := len(s.seen), s.lastNew, s.changed
		s.mu.Unlock()
		if got >= n {
			return last, true
		}
		select {
		case <-ch:
		case <-deadline:
			return last, false
		}
	}
}

func (s *sink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.releaseAll()
	_ = s.srv.Shutdown(ctx)
}
