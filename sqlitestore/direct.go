package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/hookwarden/hookwarden"
)

// SetDirect makes the writer hand new jobs to d while it has free slots. Call
// it before the first Record; nil turns it off.
func (s *Store) SetDirect(d hookwarden.Direct) {
	if d == nil {
		s.direct.Store(nil)
		return
	}
	s.direct.Store(&d)
}

// handed is a job created leased in the current transaction, to be started
// when it commits or released when it does not.
type handed struct {
	slot hookwarden.Slot
	job  hookwarden.Job
}

// reserve asks the Direct pool, if any, for a slot for a job of destination.
// It returns the slot and the lease's end (as stored) when the job is to be
// created leased. Flow control may keep the job out of the hand-over
// (directAllowed): it then waits for a lease, which applies it.
func (s *Store) reserve(ctx context.Context, tx *sql.Tx, destination string, now time.Time) (slot hookwarden.Slot, until string, ok bool, err error) {
	dp := s.direct.Load()
	if dp == nil {
		return nil, "", false, nil
	}
	if allowed, err := s.directAllowed(ctx, tx, destination); err != nil || !allowed {
		if err == nil {
			s.waiting(destination)
		}
		return nil, "", false, err
	}
	if slot, ok = (*dp).Reserve(destination); !ok {
		return nil, "", false, nil
	}
	return slot, fmtTime(now.Add(slot.LeaseFor())), true, nil
}

// waiting tells the Direct pool, if it listens (hookwarden.Waiter), that a
// job of destination was created without asking it for a slot.
func (s *Store) waiting(destination string) {
	if dp := s.direct.Load(); dp != nil {
		if w, ok := (*dp).(hookwarden.Waiter); ok {
			w.Waiting(destination)
		}
	}
}

// handOver starts (committed) or releases (rolled back) the jobs created
// leased by one transaction. Only the writer goroutine calls it.
func handOver(jobs []handed, committed bool) {
	for _, h := range jobs {
		if committed {
			h.slot.Hand(h.job)
		} else {
			h.slot.Release()
		}
	}
}

// directJob is the in-memory job handed over for event ev of receipt r.
func directJob(r *hookwarden.Receipt, ev *hookwarden.Event, id int64, destination string) hookwarden.Job {
	j := hookwarden.Job{ID: id, Source: r.Source, EventID: ev.ID, EventType: ev.Type, Destination: destination,
		Attempt: 1, ReceivedAt: r.ReceivedAt.UTC().Truncate(time.Microsecond), Header: r.Header}
	if ev.Body != nil {
		j.Body, j.ContentType = ev.Body, "application/json" // a batch element, as loadJobEvents
	} else {
		j.Body, j.ContentType = r.Body, r.Header.Get("Content-Type")
	}
	if j.Body == nil {
		j.Body = []byte{}
	}
	return j
}
