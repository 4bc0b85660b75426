package hookwarden

// Windows in which a source was answered 503 (hookwarden gaps, kind
// "unavailable"): a receiver that refuses a provider is down for it, whether
// or not a serve process was running.

import (
	"context"
	"slices"
	"time"
)

// AvailabilityCount is one source's requests in one UTC minute and how many
// of them were answered 503.
type AvailabilityCount struct {
	Source      string
	Minute      time.Time // the minute's start, UTC
	Requests    int
	Unavailable int
}

// AvailabilityLog keeps the receiver's answers per source and minute.
type AvailabilityLog interface {
	// CountAvailability adds the counts to the store's, minute by minute
	// (several instances add to the same rows).
	CountAvailability(ctx context.Context, counts []AvailabilityCount) error
}

// Mostly503 is the rule of an unavailable minute: most of its requests were
// answered 503.
func Mostly503(requests, unavailable int) bool { return 2*unavailable > requests }

// AddUnavailable appends, per source, a window of kind "unavailable" for
// each run of consecutive minutes of counts (those a store read with
// Mostly503, ordered by source and minute) that ends at or after since;
// the window is beyond a source's retry horizon when it is longer. Outages
// stay in start order.
func (rep *GapReport) AddUnavailable(counts []AvailabilityCount, since time.Time, sources []SourcePolicy) {
	horizon := map[string]time.Duration{}
	for _, p := range sources {
		horizon[p.Name] = p.RetryHorizon
	}
	add := func(source string, start, end time.Time) {
		if !since.IsZero() && end.Before(since) {
			return
		}
		l := end.Sub(start)
		o := Outage{Kind: "unavailable", Source: source, Start: start, End: end, Length: l, LengthSeconds: l.Seconds()}
		if h, ok := horizon[source]; ok && l > h {
			o.BeyondRetryHorizon = []string{source}
		}
		rep.Outages = append(rep.Outages, o)
	}
	for i := 0; i < len(counts); {
		j := i + 1
		for j < len(counts) && counts[j].Source == counts[i].Source && counts[j].Minute.Equal(counts[j-1].Minute.Add(time.Minute)) {
			j++
		}
		add(counts[i].Source, counts[i].Minute, counts[j-1].Minute.Add(time.Minute))
		i = j
	}
	slices.SortStableFunc(rep.Outages, func(a, b Outage) int { return a.Start.Compare(b.Start) })
}
