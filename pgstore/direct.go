package pgstore

// The direct hand-over: a job created with a slot reserved from the worker
// pool is committed already leased, to this process's run, and handed to
// the slot in memory after COMMIT returns, so that the usual delivery needs
// no lease write and no read of the event. Where SQLite's one writer hands
// a batch over, here each Record call hands over its own jobs: the pool's
// slots take calls from many goroutines.

import (
	"time"

	"github.com/hookwarden/hookwarden"
)

// SetDirect makes Record hand new jobs to d while it has free slots (nil:
// off). Call it before the first Record.
func (s *Store) SetDirect(d hookwarden.Direct) {
	if d == nil {
		s.direct.Store(nil)
		return
	}
	s.direct.Store(&d)
}

// handed is a job created leased in a Record's transaction, to be started
// when it commits or given back when it does not.
type handed struct {
	slot hookwarden.Slot
	dest string
	job  hookwarden.Job
	set  bool // job is filled in: the insert returned its row
}

// reserve asks the Direct pool, if any, for a slot of destination.
func (s *Store) reserve(destination string) (hookwarden.Slot, bool) {
	dp := s.direct.Load()
	if dp == nil {
		return nil, false
	}
	return (*dp).Reserve(destination)
}

// handOver starts the jobs of a committed transaction and gives back the
// slots of one that failed. A COMMIT whose outcome is unknown counts as
// failed: if it did commit, the job is due when its lease ends (or at the
// next start), as any leased job whose process lost it.
func handOver(jobs []handed, committed bool) {
	for _, h := range jobs {
		if committed && h.set {
			h.slot.Hand(h.job)
		} else {
			h.slot.Release()
		}
	}
}

// directJob is the in-memory job handed over for event ev of receipt r:
// what Lease would read back, from what Record holds already.
func directJob(r *hookwarden.Receipt, ev *hookwarden.Event, id int64, destination string) hookwarden.Job {
	j := hookwarden.Job{ID: id, Source: r.Source, EventID: ev.ID, EventType: ev.Type, Destination: destination,
		Attempt: 1, ReceivedAt: r.ReceivedAt.UTC().Truncate(time.Microsecond)} // as timestamptz keeps it
	if ev.Body != nil {
		j.Body, j.ContentType = ev.Body, "application/json" // a batch element, as Lease gives it
	} else {
		j.Body, j.ContentType = r.Body, r.Header.Get("Content-Type")
	}
	if j.Body == nil {
		j.Body = []byte{}
	}
	return j
}
