package hookwarden

// Late arrivals (SPEC 12): events whose own time (event_time) lies inside
// an outage window and that arrived after it, which the platform's retries
// recovered.

import (
	"context"
	"time"
)

// Late reports whether a newly claimed event is kept as a possible late
// arrival (the stores' late_events): it has an event time no later than
// since, the start of the serve run that receives it. An outage window
// always ends at a run's start, so every event timed inside a window and
// received after it is kept; live traffic, timed after its run began,
// writes nothing more. An event recovered by a backfill is not the
// platform's retry and is not kept. since zero (no run: a command) keeps
// nothing.
func Late(ev *Event, backfill bool, since time.Time) bool {
	return !since.IsZero() && !backfill && !ev.EventTime.IsZero() && !ev.EventTime.After(since)
}

// LateCount is what arrived after a window from inside it, for one source.
type LateCount struct {
	N    int64
	Last time.Time     // the last such arrival (zero: none)
	Max  time.Duration // the longest lag among them
}

// LateLog is implemented by stores that keep late arrivals: both of the
// project's. LateArrivals counts the source's events with an event time in
// [from, to] received after to: an index range over those events only.
type LateLog interface {
	LateArrivals(ctx context.Context, source string, from, to time.Time) (LateCount, error)
}

// AddLateArrivals fills, for every outage window's source with an
// event_time, what the platform's retries brought from inside the window.
func AddLateArrivals(ctx context.Context, s any, rep *GapReport, opt GapOptions) error {
	ll, ok := s.(LateLog)
	if !ok {
		return nil
	}
	timed := map[string]bool{}
	for _, p := range opt.Sources {
		timed[p.Name] = p.EventTime
	}
	for i := range rep.Outages {
		o := &rep.Outages[i]
		end := o.End
		if o.Open || end.IsZero() {
			end = rep.Now
		}
		for j := range o.Sources {
			sr := &o.Sources[j]
			if !timed[sr.Source] {
				continue
			}
			c, err := ll.LateArrivals(ctx, sr.Source, o.Start, end)
			if err != nil {
				return err
			}
			n := c.N
			sr.RecoveredByRetries = &n
			if c.N > 0 {
				last, lag := c.Last, c.Max.Seconds()
				sr.LastLateArrival, sr.MaxLag = &last, &lag
			}
		}
	}
	return nil
}
