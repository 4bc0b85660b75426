package receiver

import (
	"errors"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/internal/filter"
)

// FilterRefusalObserver is an Observer that also counts the filter
// evaluations refused because what they would decode of the body is past
// package filter's bounds (MaxDecodeBytes, MaxDecodeValues,
// MaxDecodeDepth). Each is a filter error too: the job is created.
type FilterRefusalObserver interface {
	FilterRefused(destination string)
}

// filterWarnEvery is how often a destination's filter errors are logged at
// WARN; the ones in between are logged at DEBUG and counted in the next WARN.
const filterWarnEvery = time.Minute

// filter reports whether ev gets a job at d. An evaluation error says yes:
// the event is delivered rather than dropped, and the error counted.
func (rc *Receiver) filter(d Destination, ev *filter.Event) bool {
	ok, err := d.Filter.Match(ev)
	if err == nil {
		return ok
	}
	rc.opts.Observer.FilterError(d.FullName)
	if errors.Is(err, filter.ErrDecodeLimit) {
		if o, ok := rc.opts.Observer.(FilterRefusalObserver); ok {
			o.FilterRefused(d.FullName)
		}
	}
	if n, warn := rc.filterLog.note(d.FullName, rc.opts.Now()); warn {
		rc.opts.Logger.Warn("filter failed; the job is created", "destination", d.FullName, "event_id", ev.ID,
			"err", err, "errors_since_last_warning", n)
	} else {
		rc.opts.Logger.Debug("filter failed; the job is created", "destination", d.FullName, "event_id", ev.ID, "err", err)
	}
	return true
}

// filterLog rate-limits the WARN lines of filter errors per destination, so a
// filter that fails on every event does not flood the log (the counter
// hookwarden_filter_errors_total has every one).
type filterLog struct {
	mu   sync.Mutex
	last map[string]filterWarned
}

type filterWarned struct {
	at     time.Time
	missed int // errors logged at DEBUG since
}

// note records an error at dest and says whether to WARN now, with the
// number of errors since the last WARN (this one included).
func (l *filterLog) note(dest string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]filterWarned{}
	}
	w, seen := l.last[dest]
	if seen && now.Sub(w.at) < filterWarnEvery {
		w.missed++
		l.last[dest] = w
		return 0, false
	}
	l.last[dest] = filterWarned{at: now}
	return w.missed + 1, true
}
