package hookwarden

// Refusals at the door per source, reason and hour (hookwarden stats): a
// wrong secret must show where an operator looks, and survive a restart.

import (
	"context"
	"slices"
	"strings"
	"time"
)

// The reasons a request of a known source is refused, as RefusalCount's
// Reason: the five of a failed verification (401), then the receiver's
// other refusals.
const (
	RefusedMissing     = "missing"     // no signature
	RefusedMalformed   = "malformed"   // a signature that does not parse
	RefusedMismatch    = "mismatch"    // a wrong signature: often a wrong secret
	RefusedStale       = "stale"       // a timestamp outside the tolerance
	RefusedReplayed    = "replayed"    // a signature or token already used
	RefusedTooLarge    = "too_large"   // 413, over max_body_bytes
	RefusedTooSlow     = "too_slow"    // 408, a body slower than the minimum rate
	RefusedForbidden   = "forbidden"   // 403, a wrong verify_token (Meta's handshake)
	RefusedUnavailable = "unavailable" // 503: budget full, store down, draining
)

// RefusalCount is how many of a source's requests in one UTC hour were
// refused for one reason.
type RefusalCount struct {
	Source string
	Hour   time.Time // the hour's start, UTC
	Reason string
	N      int
}

// RefusalLog keeps the receiver's refusals per source, reason and hour.
type RefusalLog interface {
	// CountRefusals adds the counts to the store's (several instances and
	// flushes add to the same rows); a count of 0 is no row.
	CountRefusals(ctx context.Context, counts []RefusalCount) error
}

// Refusals are a source's refusals by reason (SourceStats.Refused).
type Refusals struct {
	Missing     int `json:"missing,omitempty"`
	Malformed   int `json:"malformed,omitempty"`
	Mismatch    int `json:"mismatch,omitempty"`
	Stale       int `json:"stale,omitempty"`
	Replayed    int `json:"replayed,omitempty"`
	TooLarge    int `json:"too_large,omitempty"`
	TooSlow     int `json:"too_slow,omitempty"`
	Forbidden   int `json:"forbidden,omitempty"`
	Unavailable int `json:"unavailable,omitempty"`
}

// field is reason's counter; nil for a reason this binary does not know
// (a newer one wrote it).
func (r *Refusals) field(reason string) *int {
	switch reason {
	case RefusedMissing:
		return &r.Missing
	case RefusedMalformed:
		return &r.Malformed
	case RefusedMismatch:
		return &r.Mismatch
	case RefusedStale:
		return &r.Stale
	case RefusedReplayed:
		return &r.Replayed
	case RefusedTooLarge:
		return &r.TooLarge
	case RefusedTooSlow:
		return &r.TooSlow
	case RefusedForbidden:
		return &r.Forbidden
	case RefusedUnavailable:
		return &r.Unavailable
	}
	return nil
}

// KnownRefusal says whether reason is one of the Refused constants.
func KnownRefusal(reason string) bool { return new(Refusals).field(reason) != nil }

// Add counts n refusals of reason; an unknown reason is dropped.
func (r *Refusals) Add(reason string, n int) {
	if p := r.field(reason); p != nil {
		*p += n
	}
}

// Each calls fn with each reason and its count that is not zero, in the
// order of the constants.
func (r Refusals) Each(fn func(reason string, n int)) {
	for _, reason := range []string{RefusedMissing, RefusedMalformed, RefusedMismatch, RefusedStale, RefusedReplayed,
		RefusedTooLarge, RefusedTooSlow, RefusedForbidden, RefusedUnavailable} {
		if n := *r.field(reason); n != 0 {
			fn(reason, n)
		}
	}
}

// RefusalWindow is how far back Stats counts the refusals: the current
// hour and the 23 before it.
const RefusalWindow = 24 * time.Hour

// RefusalsSince is the first hour Stats counts at now.
func RefusalsSince(now time.Time) time.Time {
	return now.UTC().Truncate(time.Hour).Add(-RefusalWindow + time.Hour)
}

// AddRefusals folds counts (a store's read from RefusalsSince on) into the
// sources' stats, after the counter rows; a source not listed yet (refused
// only) is added, and the sources not named stay in name order.
func (c *StatsCounter) AddRefusals(counts []RefusalCount) {
	n := len(c.Sources)
	for _, rc := range counts {
		c.Source(rc.Source).Refused.Add(rc.Reason, rc.N)
	}
	if len(c.Sources) == n {
		return
	}
	slices.SortStableFunc(c.Sources[c.given:], func(a, b SourceStats) int { return strings.Compare(a.Source, b.Source) })
	for i, s := range c.Sources {
		c.src[s.Source] = i
	}
}
