package main

// Flow control across serve processes on one PostgreSQL database, through
// the real binary (skipped without PostgreSQL unless CI is set).

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// inflightSink is a destination app that holds each request a little and
// records the most requests it ever had in flight at once, and the events
// it answered 2xx.
type inflightSink struct {
	now, most atomic.Int64
	mu        sync.Mutex
	ids       map[string]int
}

func newInflightSink(t *testing.T, hold time.Duration) (*inflightSink, string) {
	s := &inflightSink{ids: map[string]int{}}
	srv := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.now.Add(1)
		for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
		}
		// Held so that attempts of several instances would overlap here
		// if nothing kept them apart.
		t := time.NewTimer(hold)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		s.mu.Lock()
		s.ids[r.Header.Get("Hookwarden-Event-Id")]++
		s.mu.Unlock()
		s.now.Add(-1)
		w.WriteHeader(http.StatusNoContent)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s, "http://" + ln.Addr().String() + "/"
}

func (s *inflightSink) delivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// TestConcurrencyAcrossThreeInstances: std/app with concurrency 2 and three
// serve processes on one database, 90 events posted over all three at
// once: the sink never has more than 2 requests in flight (each instance
// alone would allow 2: 6 in all without the store's bound, the direct
// hand-over included), and every event is delivered.
func TestConcurrencyAcrossThreeInstances(t *testing.T) {
	url := pgtest.Database(t)
	sink, dest := newInflightSink(t, 30*time.Millisecond)
	var cs [3]*child
	for i := range cs {
		cs[i] = newChildLimited(t, pgURLDB(url), dest, "warn", 2, "")
		cs[i].start()
	}
	defer func() {
		for _, c := range cs {
			c.stop()
		}
	}()
	for _, c := range cs {
		c.ready()
	}
	const events = 90
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 12 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= events {
					return
				}
				id := fmt.Sprint("c_", i)
				req := signed(t, "http://"+cs[i%3].hook+"/hooks/std", id, []byte(`{"type":"t"}`), time.Now(), testSecret)
				if a := do(t, req); a.Status != "accepted" {
					t.Errorf("post %s: %+v", id, a)
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "every event delivered", func() bool { return sink.delivered() == events })
	if most := sink.most.Load(); most > 2 {
		t.Fatalf("%d requests in flight at the sink at once, want at most 2 (concurrency 2 over 3 instances)", most)
	}
	waitFor(t, "every job marked delivered", func() bool {
		return pgCount(t, url, `SELECT count(*) FROM jobs WHERE state = 'delivered'`) == events
	})
	t.Logf("at most %d in flight over 3 instances; %d events delivered", sink.most.Load(), sink.delivered())
}
