package main

// The receiver's answers per source and minute, for gaps' windows of kind
// "unavailable" (a receiver that answers 503 is down for that provider), and
// its refusals per source, reason and hour, for stats (a wrong secret must
// show where an operator looks, after a restart too). Both are counted in
// memory and added to the store every availabilityFlush: a flood of forged
// requests is never a store write per request.

import (
	"context"
	"errors"
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
	// refusalKeep bounds the refusal counts kept likewise (per source,
	// reason and hour: known sources only, so far fewer in practice).
	refusalKeep = 10_000
)

type refusalKey struct {
	source, reason string
	hour           time.Time
}

// answerLog is where serve adds its counts: the store.
type answerLog interface {
	hookwarden.AvailabilityLog
	hookwarden.RefusalLog
}

type availKey struct {
	source string
	minute time.Time
}

// availability wraps the receiver's observer (the metrics) and counts, per
// source and minute, the requests and those answered 503, and per source,
// reason and hour the refusals.
type availability struct {
	receiver.Observer
	now func() time.Time

	mu      sync.Mutex
	counts  map[availKey]*[2]int // requests, unavailable
	refused map[refusalKey]int
}

func newAvailability(o receiver.Observer) *availability {
	return &availability{Observer: o, now: time.Now, counts: map[availKey]*[2]int{}, refused: map[refusalKey]int{}}
}

// refuse counts one refusal of a known source.
func (a *availability) refuse(source, reason string) {
	if source == "" {
		return // an unknown source: attacker-chosen, never a row
	}
	k := refusalKey{source, reason, a.now().UTC().Truncate(time.Hour)}
	a.mu.Lock()
	a.refused[k]++
	a.mu.Unlock()
}

// Unauthorized counts a failed verification (401) by its reason.
func (a *availability) Unauthorized(source, reason string) {
	a.Observer.Unauthorized(source, reason)
	if !hookwarden.KnownRefusal(reason) {
		reason = hookwarden.RefusedMalformed // signature.Reason's "invalid": no check named it
	}
	a.refuse(source, reason)
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
	switch outcome {
	case "too_large", "too_slow", "unavailable": // the 401s come by Unauthorized, with their reason
		a.refuse(source, outcome)
	}
}

// takeRefusals removes and returns every refusal count: an upsert adds
// them, so the current hour goes too.
func (a *availability) takeRefusals() []hookwarden.RefusalCount {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []hookwarden.RefusalCount
	for k, n := range a.refused {
		out = append(out, hookwarden.RefusalCount{Source: k.source, Hour: k.hour, Reason: k.reason, N: n})
	}
	clear(a.refused)
	return out
}

// giveBackRefusals returns counts the store refused, to be added at the
// next flush; beyond refusalKeep the oldest hours go.
func (a *availability) giveBackRefusals(counts []hookwarden.RefusalCount) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range counts {
		a.refused[refusalKey{c.Source, c.Reason, c.Hour}] += c.N
	}
	for len(a.refused) > refusalKeep {
		var oldest refusalKey
		for k := range a.refused {
			if oldest.hour.IsZero() || k.hour.Before(oldest.hour) {
				oldest = k
			}
		}
		delete(a.refused, oldest)
	}
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

// flush adds the finished minutes (all, at stop) and the refusals to the
// store.
func (a *availability) flush(ctx context.Context, s answerLog, all bool) error {
	var errs []error
	if counts := a.take(all); len(counts) > 0 {
		if err := s.CountAvailability(ctx, counts); err != nil {
			a.giveBack(counts)
			errs = append(errs, err)
		}
	}
	if counts := a.takeRefusals(); len(counts) > 0 {
		if err := s.CountRefusals(ctx, counts); err != nil {
			a.giveBackRefusals(counts)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// availabilityLoop flushes the receiver's 503 minutes every
// availabilityFlush; Stop flushes the rest.
func (a *App) availabilityLoop(ctx context.Context) {
	a.every(ctx, availabilityFlush, func() {
		if err := a.avail.flush(ctx, a.Store, false); err != nil && ctx.Err() == nil {
			a.log.Warn("cannot record the minutes answered 503 and the refusals yet", "err", err)
		}
	})
}

// Handshake passes the door's handshakes on to the metrics: the wrapper must
// not hide the receiver's optional observer parts.
func (a *availability) Handshake(source, kind, outcome string) {
	if h, ok := a.Observer.(receiver.HandshakeObserver); ok {
		h.Handshake(source, kind, outcome)
	}
	// A wrong verify_token (Meta's) is answered 403: a wrong secret too.
	if kind == "verify" && outcome == receiver.HandshakeRefused {
		a.refuse(source, hookwarden.RefusedForbidden)
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
