package main

// The receiver's answers per source and minute, for gaps' windows of kind
// "unavailable" (a receiver that answers 503 is down for that provider).

import (
	"context"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/metrics"
	"github.com/hookwarden/hookwarden/receiver"
)

const (
	// availabilityFlush is how often serve adds its finished minutes to the
	// store: gaps knows a minute of 503s this long after it ended.
	availabilityFlush = 10 * time.Second
	// availabilityKeep bounds the minutes kept in memory while the store
	// cannot be written (a full disk answers 503 too): the newest are kept.
	availabilityKeep = 10_000
)

type availKey struct {
	source string
	minute time.Time
}

// availability wraps the receiver's observer (the metrics) and counts, per
// source and minute, the requests and those answered 503.
type availability struct {
	receiver.Observer
	now func() time.Time

	mu     sync.Mutex
	counts map[availKey]*[2]int // requests, unavailable
}

func newAvailability(o receiver.Observer) *availability {
	return &availability{Observer: o, now: time.Now, counts: map[availKey]*[2]int{}}
}

func (a *availability) Request(source, outcome string, d time.Duration) {
	a.Observer.Request(source, outcome, d)
	if source == "" {
		return // an unknown source: attacker-chosen, never a row
	}
	k := availKey{source, a.now().UTC().Truncate(time.Minute)}
	a.mu.Lock()
	c := a.counts[k]
	if c == nil {
		c = new([2]int)
		a.counts[k] = c
	}
	c[0]++
	if outcome == "unavailable" {
		c[1]++
	}
	a.mu.Unlock()
}

// take removes and returns the minutes before the current one (all with
// all set, at stop), those with a 503 only: a minute with none is no
// window, and the current one is still counting.
func (a *availability) take(all bool) []hookwarden.AvailabilityCount {
	cur := a.now().UTC().Truncate(time.Minute)
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []hookwarden.AvailabilityCount
	for k, c := range a.counts {
		if !all && !k.minute.Before(cur) {
			continue
		}
		delete(a.counts, k)
		if c[1] > 0 {
			out = append(out, hookwarden.AvailabilityCount{Source: k.source, Minute: k.minute, Requests: c[0], Unavailable: c[1]})
		}
	}
	return out
}

// giveBack returns counts the store refused, to be added at the next flush;
// beyond availabilityKeep minutes the oldest go.
func (a *availability) giveBack(counts []hookwarden.AvailabilityCount) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range counts {
		k := availKey{c.Source, c.Minute}
		cur := a.counts[k]
		if cur == nil {
			cur = new([2]int)
			a.counts[k] = cur
		}
		cur[0] += c.Requests
		cur[1] += c.Unavailable
	}
	for len(a.counts) > availabilityKeep {
		var oldest availKey
		for k := range a.counts {
			if oldest.minute.IsZero() || k.minute.Before(oldest.minute) {
				oldest = k
			}
		}
		delete(a.counts, oldest)
	}
}

// flush adds the finished minutes (all, at stop) to the store.
func (a *availability) flush(ctx context.Context, s hookwarden.AvailabilityLog, all bool) error {
	counts := a.take(all)
	if len(counts) == 0 {
		return nil
	}
	if err := s.CountAvailability(ctx, counts); err != nil {
		a.giveBack(counts)
		return err
	}
	return nil
}

// availabilityLoop flushes the receiver's 503 minutes every
// availabilityFlush; Stop flushes the rest.
func (a *App) availabilityLoop(ctx context.Context) {
	defer a.wg.Done()
	t := time.NewTicker(availabilityFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.avail.flush(ctx, a.Store, false); err != nil && ctx.Err() == nil {
				a.log.Warn("cannot record the minutes answered 503 yet", "err", err)
			}
		}
	}
}

// Handshake passes the door's handshakes on to the metrics: the wrapper must
// not hide the receiver's optional observer parts.
func (a *availability) Handshake(source, kind, outcome string) {
	if h, ok := a.Observer.(receiver.HandshakeObserver); ok {
		h.Handshake(source, kind, outcome)
	}
}

// EventLag passes a new event's lag on to the metrics
// (hookwarden_event_lag_seconds).
func (a *availability) EventLag(source string, lag time.Duration) {
	if l, ok := a.Observer.(receiver.LagObserver); ok {
		l.EventLag(source, lag)
	}
}

// FilterRefused passes a filter evaluation refused past the decode bounds
// on to the metrics (hookwarden_filter_decode_refused_total).
func (a *availability) FilterRefused(destination string) {
	if f, ok := a.Observer.(receiver.FilterRefusalObserver); ok {
		f.FilterRefused(destination)
	}
}

// The receiver's optional observer parts the metrics implement: the wrapper
// passes each on (a part it lacked would silently drop its metric).
var (
	_ receiver.HandshakeObserver     = (*availability)(nil)
	_ receiver.LagObserver           = (*availability)(nil)
	_ receiver.FilterRefusalObserver = (*availability)(nil)
	_ receiver.HandshakeObserver     = (*metrics.Metrics)(nil)
	_ receiver.LagObserver           = (*metrics.Metrics)(nil)
	_ receiver.FilterRefusalObserver = (*metrics.Metrics)(nil)
)
