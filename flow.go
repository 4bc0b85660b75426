package hookwarden

// Flow control per destination (docs/reference.md, "Flow control"): pause,
// rate, order_by and concurrency across instances. The policy is the
// configuration's, handed to the store (Queue.SetFlow) at start and on
// every reload; the state (pause, consecutive failures, next probe, the
// rate's bucket, the order of keyed jobs) lives in the store, so every
// serve sharing it keeps the same limits and a restart forgets nothing.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// FlowPolicy is one destination's flow control as configured.
type FlowPolicy struct {
	Destination string // "source/name"
	// Concurrency is the most leases in flight at once across every serve
	// on the store (0: the store does not limit; the workers' slots do).
	Concurrency int
	// Rate is how many attempts may start per period (zero: unlimited).
	Rate Rate
	// PauseAfter consecutive retryable failures pause the destination
	// (0: never); ProbeEvery (backoff.max) spaces the probes while paused.
	PauseAfter int
	ProbeEvery time.Duration
	// Ordered: the destination has an order_by, so its keyed jobs are
	// attempted one at a time per key, in commit order.
	Ordered bool
}

// Rate is a token bucket: N attempts per Per, at most N at once.
type Rate struct {
	N   int
	Per time.Duration
}

// IsZero reports an unlimited rate.
func (r Rate) IsZero() bool { return r.N <= 0 || r.Per <= 0 }

// String is the rate as configured ("20/s"), "" when unlimited.
func (r Rate) String() string {
	if r.IsZero() {
		return ""
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	if unit == "" {
		return fmt.Sprintf("%d/%s", r.N, r.Per)
	}
	return fmt.Sprintf("%d/%s", r.N, unit)
}

// ParseRate reads "N/s", "N/m" or "N/h", N a positive integer.
func ParseRate(s string) (Rate, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("%q: want N/s, N/m or N/h", s)
	}
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	if per == 0 {
		return Rate{}, fmt.Errorf("%q: the unit must be s, m or h", s)
	}
	v, err := strconv.Atoi(n)
	if err != nil || v < 1 || v > 1_000_000 {
		return Rate{}, fmt.Errorf("%q: N must be a whole number from 1 to 1000000", s)
	}
	return Rate{N: v, Per: per}, nil
}

// Why a destination is paused (DestinationState.Pause).
const (
	// PauseAuto: pause_after consecutive retryable failures; one probe
	// every ProbeEvery, and the first success resumes it.
	PauseAuto = "auto"
	// PauseManual: an operator's pause; nothing is attempted until resume.
	PauseManual = "manual"
)

// DestinationState is one destination's flow state, as GET
// /api/destinations answers it.
type DestinationState struct {
	Destination         string       `json:"destination"`
	Paused              bool         `json:"paused"`
	Pause               *string      `json:"pause"` // PauseAuto, PauseManual or null
	ConsecutiveFailures int          `json:"consecutive_failures"`
	NextProbeAt         *time.Time   `json:"next_probe_at"`
	Pending             int          `json:"pending"`
	InFlight            int          `json:"in_flight"`
	Rate                *string      `json:"rate"` // as configured, or null (filled from the configuration)
	BlockedKeys         []BlockedKey `json:"blocked_keys"`
}

// BlockedKey is an order_by key whose head job failed and waits for its
// retry: the key's later jobs wait behind it.
type BlockedKey struct {
	Key         string    `json:"key"`
	HeadEventID string    `json:"head_event_id"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error"`
	Since       time.Time `json:"since"` // the head's first failed attempt
}

// MaxBlockedKeys bounds the blocked keys listed per destination.
const MaxBlockedKeys = 100

// FlowOperator holds and restarts destinations: the pause and resume of
// the CLI, the admin API and the dashboard. Both are idempotent, and each
// call records its audit entry (when given) in the same transaction.
type FlowOperator interface {
	// Pause makes destination paused manually (an auto pause becomes a
	// manual one). changed is false when it was paused manually already.
	Pause(ctx context.Context, destination string, audit *AuditEntry) (changed bool, err error)
	// Resume ends a pause of either kind and forgets the failure streak.
	Resume(ctx context.Context, destination string, audit *AuditEntry) (changed bool, err error)
}

// FlowInspector reads flow state.
type FlowInspector interface {
	// Destinations reads the flow state of each destination named, in
	// order (Rate left nil: the configuration has it). Cheap: counts of
	// the outbox, not of the history, and at most MaxBlockedKeys keys.
	Destinations(ctx context.Context, names []string) ([]DestinationState, error)
}

// PauseInspector reads only whether each destination is paused, in order:
// one flow row each, without Destinations' counts of the outbox, for a
// reader that polls (the metrics refresh, every 2 s on every instance).
type PauseInspector interface {
	Paused(ctx context.Context, names []string) ([]bool, error)
}

// WaitingDue is the due time of a keyed job waiting behind its key's
// head: far beyond any real time, so no lease takes it until the head is
// finished (delivered or dead) and the store makes the next one due.
var WaitingDue = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// FlowTable holds the flow policies a store was given (SetFlow) for its hot
// paths to read without a lock. The zero value has none.
type FlowTable struct {
	m atomic.Pointer[map[string]FlowPolicy]
}

// Set replaces the policies and returns the destinations that are not
// ordered (any more): a store makes their waiting jobs due, since nothing
// else would release them.
func (t *FlowTable) Set(policies []FlowPolicy) (unordered []string) {
	m := make(map[string]FlowPolicy, len(policies))
	for _, p := range policies {
		m[p.Destination] = p
		if !p.Ordered {
			unordered = append(unordered, p.Destination)
		}
	}
	t.m.Store(&m)
	return unordered
}

// Policy is dest's policy (zero when none was set).
func (t *FlowTable) Policy(dest string) FlowPolicy {
	if m := t.m.Load(); m != nil {
		return (*m)[dest]
	}
	return FlowPolicy{}
}

// FinishHooks reports whether some destination's policy needs a Finish to
// look at its job's destination: pause_after or order_by.
func (t *FlowTable) FinishHooks() bool {
	m := t.m.Load()
	if m == nil {
		return false
	}
	for _, p := range *m {
		if p.PauseAfter > 0 || p.Ordered {
			return true
		}
	}
	return false
}
