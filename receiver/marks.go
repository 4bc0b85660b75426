package receiver

import (
	"net/http"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/extract"
)

// Marks are what a source reads from each event beside its id (SPEC 12):
// its sequence value and its event time. A value that is absent or not
// usable is left out; the event is recorded all the same.
type Marks struct {
	Sequence extract.Extractor // nil: none
	Reset    int64             // sequence_reset
	Horizon  time.Duration     // the source's retry_horizon
	// EventTime reads when the platform says the event happened (nil:
	// none); Snowflake: its value is a Discord snowflake id.
	EventTime extract.Extractor
	Snowflake bool
}

// LagObserver is implemented by an Observer that keeps the lag of events
// (received time minus event time: hookwarden_event_lag_seconds).
type LagObserver interface {
	EventLag(source string, lag time.Duration)
}

// stamp sets ev's sequence value and event time from doc.
func (m *Marks) stamp(h http.Header, doc *extract.Body, ev *hookwarden.Event, now time.Time) {
	if m == nil {
		return
	}
	if m.Sequence != nil {
		if s, err := m.Sequence.ExtractBody(h, doc); err == nil {
			if v, ok := extract.SequenceValue(s); ok {
				ev.Seq = &hookwarden.Seq{Value: v, Reset: m.Reset, Horizon: m.Horizon}
			}
		}
	}
	if m.EventTime != nil {
		if s, err := m.EventTime.ExtractBody(h, doc); err == nil {
			if t, ok := extract.EventTime(s, m.Snowflake, now); ok {
				ev.EventTime = t
			}
		}
	}
}

// observeLag reports a newly accepted event's lag.
func (rc *Receiver) observeLag(src *Source, rec *hookwarden.Receipt, ev *hookwarden.Event, er hookwarden.EventResult) {
	if ev.EventTime.IsZero() || er.Outcome != hookwarden.Accepted {
		return
	}
	if lo, ok := rc.opts.Observer.(LagObserver); ok {
		lo.EventLag(src.Name, rec.ReceivedAt.Sub(ev.EventTime))
	}
}
