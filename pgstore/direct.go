package pgstore

// The direct hand-over: a job created with a slot reserved from the worker
// pool is committed already leased, to this process's run, and handed to
// the slot in memory after COMMIT returns, so that the usual delivery needs
// no lease write and no read of the event. Where SQLite's one writer hands
// a batch over, here each Record call hands over its own jobs: the pool's
// slots take calls from many goroutines.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

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
		Attempt: 1, ReceivedAt: r.ReceivedAt.UTC().Truncate(time.Microsecond), // as timestamptz keeps it
		Header: storedHeader(r.Header)}
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

// storedHeader is h as Lease reads it back: encodeHeaders drops NUL bytes
// and replaces invalid UTF-8, which PostgreSQL text cannot hold. h itself
// when it has neither (always, for what net/http accepts but obs-text).
func storedHeader(h http.Header) http.Header {
	for k, vs := range h {
		for _, v := range vs {
			if !utf8.ValidString(k) || !utf8.ValidString(v) || strings.Contains(k+v, "\x00") {
				return decodeHeaders(encodeHeaders(h))
			}
		}
	}
	return h
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
// the rate, the key's order and the pause; and a destination with every
// one of its concurrency in flight across instances (the pause and the
// count are the store's, not this process's memory).
func (rc *recording) directAllowed(ctx context.Context, dest string) (bool, error) {
	p := rc.s.policy(dest)
	if !p.Rate.IsZero() || p.Ordered {
		return false, nil
	}
	if p.Concurrency <= 0 {
		f, _, err := rc.s.readFlow(ctx, rc.tx, dest, false)
		return err == nil && f.kind() == "", err
	}
	free, err := rc.lockDirect(ctx, []string{dest})
	if err != nil || !free[dest] {
		return false, err
	}
	var inflight int
	if err := rc.tx.QueryRow(ctx, inflightSQL, dest, rc.now).Scan(&inflight); err != nil {
		return false, fmt.Errorf("count leases of %s: %w", dest, err)
	}
	return inflight < p.Concurrency, nil
}

// inflightSQL counts dest's ($1) leases in flight on every instance by the
// store's clock ($2), as a lease counts them against concurrency: a range
// of job_leases_live (schema 12), the leases in flight and no other job.
const inflightSQL = `SELECT count(*) FROM job_leases
	WHERE destination = $1 AND leased_until > COALESCE($2::timestamptz, now())`

// lockDirect takes the flow rows of dests for the transaction, without
// waiting, and reports the destinations whose row it holds and that are
// not paused: only those may have a job handed over.
//
// Every transaction that adds a lease holds its destination's row (a lease
// locks it, FOR UPDATE, before it counts the leases in flight), so a count
// in a statement after this one sees every lease committed before and none
// can be added until this transaction ends: concurrency holds across
// instances with the hand-over, exactly. SKIP LOCKED: a row held by a
// lease or another Record means no hand-over, never a wait that would
// queue every request of the destination behind one commit; the job waits
// for a lease instead. A destination without a row (never leased yet) gets
// it inserted, held by this transaction until it ends as a locked one is.
func (rc *recording) lockDirect(ctx context.Context, dests []string) (map[string]bool, error) {
	rows, err := rc.tx.Query(ctx, `WITH ins AS (
			INSERT INTO destination_flow (destination) SELECT unnest($1::text[])
			ON CONFLICT DO NOTHING RETURNING destination
		), lk AS (
			SELECT destination FROM destination_flow
			WHERE destination = ANY($1::text[]) AND pause IS NULL FOR UPDATE SKIP LOCKED
		)
		SELECT destination FROM ins UNION ALL SELECT destination FROM lk`, dests)
	if err != nil {
		return nil, fmt.Errorf("lock flow state: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("lock flow state: %w", err)
	}
	free := make(map[string]bool, len(names))
	for _, n := range names {
		free[n] = true
	}
	return free, nil
}
