package pgstore

// The direct hand-over: a job created with a slot reserved from the worker
// pool is committed already leased, to this process's run, and handed to
// the slot in memory after COMMIT returns, so that the usual delivery needs
// no lease write and no read of the event. Where SQLite's one writer hands
// a batch over, here each Record call hands over its own jobs: the pool's
// slots take calls from many goroutines.

import (
	"context"
	"time"

	"github.com/hookwarden/hookwarden"
)

// SetDirect makes Record hand new jobs to d while it has free slots (nil:
// off). Call it before the first Record. When d is a hookwarden.Waker
// (worker.Pool is), it also starts the listener (notify.go) that wakes d
// when any process's commit makes jobs due; Close stops it.
func (s *Store) SetDirect(d hookwarden.Direct) {
	if d == nil {
		s.direct.Store(nil)
		return
	}
	s.direct.Store(&d)
	if _, ok := d.(hookwarden.Waker); ok {
		s.startListener()
	}
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

// hasDirect reports whether a Direct pool is set.
func (s *Store) hasDirect() bool { return s.direct.Load() != nil }

// waiting tells the Direct pool, if it listens (hookwarden.Waiter), that a
// job of destination was created without asking it for a slot.
func (s *Store) waiting(destination string) {
	if dp := s.direct.Load(); dp != nil {
		if w, ok := (*dp).(hookwarden.Waiter); ok {
			w.Waiting(destination)
		}
	}
}

// directAllowed: flow control keeps rated, ordered and paused destinations
// out of the hand-over, so that their jobs wait for a lease, which applies
// the rate, the key's order and the pause (across instances: the pause is
// read from the store, not from this process's memory).
func (rc *recording) directAllowed(ctx context.Context, dest string) (bool, error) {
	if p := rc.s.policy(dest); !p.Rate.IsZero() || p.Ordered {
		return false, nil
	}
	f, _, err := rc.s.readFlow(ctx, rc.tx, dest, false)
	if err != nil {
		return false, err
	}
	return f.kind() == "", nil
}
