package pgstore

// LISTEN/NOTIFY: the transactions that make jobs due announce their
// destinations on one channel, and each serve listens on a dedicated
// connection and wakes its workers of that destination, so that a job
// created or made due by another instance (or by an operator's command) is
// leased at once instead of at the next poll. PostgreSQL delivers a NOTIFY
// only when its transaction commits, so nothing is announced that did not
// commit; a wake-up that finds nothing costs one lease. Polling stays the
// safety net: a notification lost while the listener was disconnected
// costs the poll delay, never a job.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// jobsChannel is the channel every store announces due jobs on; the
// payload is the destination's name.
const jobsChannel = "hookwarden_jobs"

// listenerName is the LISTEN connection's application_name.
const listenerName = "hookwarden listener"

// announceSQL announces each destination of $1 once. A NOTIFY is sent at
// COMMIT (the server folds repeats of one payload within a transaction).
const announceSQL = `SELECT pg_notify('` + jobsChannel + `', d) FROM unnest($1::text[]) AS d`

// notifying wraps a statement that makes jobs due and returns their
// destination column so that it also announces each destination, in the
// same statement (no extra round trip). Its command tag still counts the
// jobs (the rows selected).
func (s *Store) notifying(update string) string {
	if s.noNotify {
		return `WITH due AS (` + update + `) SELECT 1 FROM due`
	}
	return `WITH due AS (` + update + `) SELECT pg_notify('` + jobsChannel + `', destination) FROM due`
}

// announce announces dests (repeats allowed) in tx with one statement, or
// none when dests is empty: for the operator's writes (Replay, Resume),
// rare enough that the lock announcing commits share costs nothing.
func (s *Store) announce(ctx context.Context, tx pgx.Tx, dests []string) error {
	if len(dests) == 0 || s.noNotify {
		return nil
	}
	if len(dests) > 1 {
		dests = slices.Compact(slices.Sorted(slices.Values(dests)))
	}
	if _, err := tx.Exec(ctx, announceSQL, dests); err != nil {
		return fmt.Errorf("announce due jobs: %w", err)
	}
	return nil
}

// announcer sends Record's announcements after its COMMIT instead of in
// its transaction: a transaction that NOTIFYs takes a cluster-wide lock
// from its COMMIT's start to its end, which serializes every announcing
// commit (BenchmarkRecordNotify: Record ~1.5 times slower under 16
// concurrent requests when each announced in its transaction; 0.93 to 1.0
// sent afterwards). Sent afterwards, by one goroutine per store at a time, the destinations of
// every commit meanwhile share one statement and the ack path takes no
// lock; a process dying between the two loses only a wake-up (polling).
type announcer struct {
	mu      sync.Mutex
	dests   map[string]struct{} // to send
	running bool                // a goroutine is sending
	closed  bool                // Close: start no goroutine
	wg      sync.WaitGroup
}

// announceCommitted announces dests, whose jobs committed, soon: never
// blocking the caller.
func (s *Store) announceCommitted(dests []string) {
	if len(dests) == 0 || s.noNotify {
		return
	}
	a := &s.announcer
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	if a.dests == nil {
		a.dests = make(map[string]struct{})
	}
	for _, d := range dests {
		a.dests[d] = struct{}{}
	}
	if !a.running {
		a.running = true
		a.wg.Add(1)
		go s.sendAnnouncements()
	}
}

// sendAnnouncements sends what announceCommitted gathered until nothing
// is left. A failure is only logged: the workers' polls cover it.
func (s *Store) sendAnnouncements() {
	a := &s.announcer
	defer a.wg.Done()
	for {
		a.mu.Lock()
		if len(a.dests) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		dests := slices.Sorted(maps.Keys(a.dests))
		clear(a.dests)
		a.mu.Unlock()
		ctx, cancel := s.bound(context.Background())
		_, err := s.pool.Exec(ctx, announceSQL, dests)
		cancel()
		if err != nil {
			s.log.Warn("store: announce due jobs failed (polling covers)", "destinations", len(dests), "err", err)
		}
	}
}

// flushAnnouncements waits for what is gathered to be sent and starts no
// more sending: Close, before the pool closes.
func (s *Store) flushAnnouncements() {
	a := &s.announcer
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.wg.Wait()
}

// Listener backoff between reconnects, and how often an idle listening
// connection is checked with a ping, so that a connection the network lost
// silently (no reset) is noticed and replaced.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
	listenPing       = 30 * time.Second
)

// listener is the goroutine holding the LISTEN connection.
type listener struct {
	mu     sync.Mutex
	cancel context.CancelFunc // nil: not started
	done   chan struct{}
	stats  ListenStats
}

// ListenStats counts the listener's work, for tests and diagnostics.
type ListenStats struct {
	Listens int64 // successful LISTENs: 1 plus one per reconnect
	Heard   int64 // notifications received (own ones included)
}

// ListenStats returns the listener's counts so far.
func (s *Store) ListenStats() ListenStats {
	s.listen.mu.Lock()
	defer s.listen.mu.Unlock()
	return s.listen.stats
}

// wake wakes the Direct pool's workers of dests (none: all), if the pool
// set now is a hookwarden.Waker.
func (s *Store) wake(dests ...string) {
	if dp := s.direct.Load(); dp != nil {
		if w, ok := (*dp).(hookwarden.Waker); ok {
			w.Notify(dests...)
		}
	}
}

// startListener starts the LISTEN goroutine once; Close stops it.
func (s *Store) startListener() {
	l := &s.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil || s.closed.Load() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		s.listenLoop(ctx)
	}()
}

// stopListener stops the LISTEN goroutine, if started, and waits for it.
func (s *Store) stopListener() {
	l := &s.listen
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// listenLoop listens until ctx ends, reconnecting with backoff. After a
// reconnect it wakes every destination once: a notification sent while it
// was away is then not even a poll's delay.
func (s *Store) listenLoop(ctx context.Context) {
	backoff := listenMinBackoff
	for first := true; ; first = false {
		err := s.listenOnce(ctx, !first, func() { backoff = listenMinBackoff })
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("store: LISTEN connection lost, reconnecting (polling covers meanwhile)",
			"channel", jobsChannel, "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listenOnce opens the listening connection (outside the pool: it is held
// for ever and must not take one of the pool's bounded connections),
// LISTENs and wakes the workers per notification until the connection fails or ctx
// ends.
func (s *Store) listenOnce(ctx context.Context, again bool, listening func()) error {
	cctx, cancel := s.bound(ctx)
	cfg := s.listenCfg.Copy()
	cfg.RuntimeParams["application_name"] = listenerName // pg_stat_activity shows it
	c, err := pgx.ConnectConfig(cctx, cfg)
	if err == nil {
		_, err = c.Exec(cctx, "LISTEN "+jobsChannel)
	}
	cancel()
	if c != nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = c.Close(cctx)
		}()
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.address, err)
	}
	s.listen.mu.Lock()
	s.listen.stats.Listens++
	s.listen.mu.Unlock()
	listening()
	s.log.Info("store: listening for due jobs", "channel", jobsChannel)
	if again {
		s.wake() // every destination: what was announced while away
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := c.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			s.listen.mu.Lock()
			s.listen.stats.Heard++
			s.listen.mu.Unlock()
			s.wake(n.Payload) // never blocks (hookwarden.Waker)
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return err
		}
		// Idle for listenPing: is the server still there?
		pctx, cancel := s.bound(ctx)
		err = c.Ping(pctx)
		cancel()
		if err != nil {
			return err
		}
	}
}
