package pgstore

// The common path of Record, a new single event, in one statement: the body
// key, the claim, the accepted receipt and the jobs are data-modifying CTEs
// of one INSERT, where the general path sends one statement each and reads
// every destination's pause state in another: a round trip and a statement's
// server work for each (docs/performance.md has the figures). A free Direct
// slot of a destination with a concurrency adds one statement before it
// (lockDirect).
//
// Each later CTE inserts only from the rows an earlier one returned, so a
// statement that did not claim wrote nothing but, perhaps, the body key
// (then the general path, in the same transaction, meets the key as this
// call's own). A duplicate must take the general path: the claim that
// ON CONFLICT waited for is committed, but invisible to the snapshot of the
// statement that waited, so only a second statement can read its row.

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
)

// freshSQL: $1 source, $2 event id, $3 type, $4 received at, $5 the body's
// hash, $6 remote address, $7 headers, $8 the receipt's body, $9 origin,
// $10 destinations, $11 their leases in µs (0: no Direct slot), $12 the
// body replay check, $13 the store's clock (NULL: now()), $14 the holder,
// $15 the destinations' concurrency.
//
// With the check on, the claim follows only a body key this statement
// inserted: a key held by another id is for the general path to judge.
//
// A destination with a slot ($11 > 0) gets a leased job unless it is
// paused or, with a concurrency ($15 > 0), all of it is in flight on every
// instance. With a concurrency, lockDirect has locked its flow row and
// checked the pause, and the count here sees every lease committed before
// (this statement's snapshot is taken after the lock). Without one, the
// pause is read in this statement's snapshot, as a separate read would.
// A slot whose job came back unleased (attempts 0) is given back.
const freshSQL = `WITH bk AS (
	INSERT INTO body_keys (source, body_sha256, event_id, claimed_at)
	SELECT $1::text, $5::bytea, $2::text, $4::timestamptz WHERE $12::bool
	ON CONFLICT (source, body_sha256) DO NOTHING RETURNING 1
), ev AS (
	INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256)
	SELECT $1, $2, $3::text, $4, $5 WHERE NOT $12::bool OR EXISTS (SELECT 1 FROM bk)
	ON CONFLICT (source, event_id) DO NOTHING RETURNING id
), rc AS (
	INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256, origin)
	SELECT $1, ev.id, 'accepted', $4, $6::text, $7::text, $8::bytea, '\x'::bytea, $9::text FROM ev RETURNING id
), jb AS (
	INSERT INTO jobs (event_ref, destination, state, attempts, next_at, leased_until, leased_by, created_at)
	SELECT ev.id, d.dest, 'pending', CASE WHEN l.lease > 0 THEN 1 ELSE 0 END, t,
		CASE WHEN l.lease > 0 THEN t + l.lease * interval '1 microsecond' END,
		CASE WHEN l.lease > 0 THEN $14::bigint END, t
	FROM ev, COALESCE($13::timestamptz, now()) AS t,
		unnest($10::text[], $11::bigint[], $15::int[]) AS d(dest, lease, cap),
		` + leaseTestSQL + `
	RETURNING id, destination, attempts
)
SELECT ev.id, rc.id, jb.id, jb.destination, jb.attempts FROM ev CROSS JOIN rc LEFT JOIN jb ON true`

// leaseTestSQL is the lease a job of destination d.dest gets (l.lease): its
// slot's (d.lease, 0 for none) unless the destination is paused or, with a
// concurrency (d.cap > 0), all of it is in flight by clock t. A LATERAL of
// freshSQL's and batchSQL's jobs.
const leaseTestSQL = `LATERAL (SELECT CASE -- CASE, not AND: the reads only for a slot
			WHEN d.lease <= 0 THEN 0
			WHEN d.cap > 0 THEN CASE WHEN (SELECT count(*) FROM job_leases j WHERE j.destination = d.dest
				AND j.leased_until > t) < d.cap THEN d.lease ELSE 0 END
			WHEN EXISTS (SELECT 1 FROM destination_flow f WHERE f.destination = d.dest AND f.pause IS NOT NULL) THEN 0
			ELSE d.lease END AS lease OFFSET 0) l -- OFFSET 0: computed once, not at each of its three uses`

// freshable reports whether ev can take the one-statement path: a single
// event of the request's own body whose destinations are all plain (an
// ordered destination's keyed job is written by keyedJobTx).
func (rc *recording) freshable(ev *hookwarden.Event) bool {
	// A derived id, a sequence value or a late arrival is kept by claim
	// (sequence.go).
	if rc.release != nil || ev.Body != nil || ev.Derived || ev.Seq != nil || hookwarden.Late(ev, rc.r.Backfill, rc.s.since()) {
		return false
	}
	for i, d := range ev.Destinations {
		if ev.OrderKey(i) != "" && rc.s.policy(d).Ordered {
			return false
		}
	}
	return true
}

// fresh records ev as a new event in one statement. It reports false, with
// nothing but maybe the body key written and every slot it reserved given
// back, when the statement did not claim ev: the general path decides.
func (rc *recording) fresh(ctx context.Context, ev *hookwarden.Event) (bool, error) {
	r := rc.r
	first := len(rc.handed)
	dests := ev.Destinations
	leases, caps, wanted := rc.slots(ev)
	if len(wanted) > 0 {
		// A second statement, only when a slot of a destination with a
		// concurrency is free: the count of leases in flight needs a
		// snapshot taken after the lock.
		free, err := rc.lockDirect(ctx, wanted)
		if err != nil {
			return false, err
		}
		unlocked(dests, leases, caps, free)
	}
	_, body := receiptKind(true, false, false, r.Body) // "accepted", as freshSQL spells it
	var origin any
	if r.Backfill {
		origin = "backfill"
	}
	// One round trip: the plan mode for this transaction, then the
	// statement. A custom plan of freshSQL costs the server more to plan
	// than its generic plan costs to run (docs/performance.md): the
	// generic one is forced here, for this transaction only (SET LOCAL).
	b := &pgx.Batch{}
	b.Queue(`SET LOCAL plan_cache_mode = force_generic_plan`)
	b.Queue(freshSQL, r.Source, ev.ID, ev.Type, rc.at, ev.BodySHA256[:], r.RemoteAddr,
		rc.headers, body, origin, dests, leases, r.BodyReplayCheck, rc.now, rc.s.holder(), caps)
	br := rc.tx.SendBatch(ctx, b)
	mine := rc.handed[first:]
	claimed, err := rc.freshRows(br, ev, mine)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("record event: %w", cerr)
	}
	if err != nil {
		return false, err
	}
	if !claimed {
		// A duplicate (or a body key held by another id): the general
		// path asks for slots again if it turns out to claim.
		handOver(mine, false)
		rc.handed = rc.handed[:first]
		return false, nil
	}
	rc.accepted(ev, mine)
	return true, nil
}

// slots reserves a Direct slot for each destination of ev that may take
// one: the lease of each in µs (0: none) and its concurrency (0: none),
// and the destinations among them whose flow row lockDirect must lock
// (those with a concurrency). Each reserved slot is listed in rc.handed
// before any statement, so that any failure from here on gives it back.
func (rc *recording) slots(ev *hookwarden.Event) (leases []int64, caps []int32, wanted []string) {
	dests := ev.Destinations
	leases, caps = make([]int64, len(dests)), make([]int32, len(dests))
	for i, d := range dests {
		if !rc.direct || !rc.s.hasDirect() {
			break
		}
		p := rc.s.policy(d)
		if !p.Rate.IsZero() || p.Ordered {
			rc.s.waiting(d)
			continue
		}
		slot, ok := rc.s.reserve(d)
		if !ok {
			continue
		}
		rc.handed = append(rc.handed, handed{slot: slot, dest: d})
		leases[i], caps[i] = max(slot.LeaseFor().Microseconds(), 1), int32(max(p.Concurrency, 0))
		if caps[i] > 0 {
			wanted = append(wanted, d)
		}
	}
	return leases, caps, wanted
}

// unlocked takes the lease away from each destination with a concurrency
// whose flow row lockDirect did not lock (paused, or busy): its slot goes
// back once the statement ran.
func unlocked(dests []string, leases []int64, caps []int32, free map[string]bool) {
	for i, d := range dests {
		if caps[i] > 0 && !free[d] {
			leases[i] = 0
		}
	}
}

// freshJob takes one job row of ev's: a job leased to one of mine's slots
// is filled in to be handed over, one without a slot is announced.
func (rc *recording) freshJob(ev *hookwarden.Event, mine []handed, job int64, dest string, attempts int) {
	if attempts == 0 {
		// No slot: it waits for a lease, which any instance's workers
		// may take once the commit is announced (notify.go).
		rc.due = append(rc.due, dest)
		return
	}
	// Rows of one destination are alike but for their id: any pairing
	// with its slots is right.
	for k := range mine {
		if h := &mine[k]; !h.set && h.dest == dest {
			h.job, h.set = directJob(rc.r, ev, job, dest), true
			return
		}
	}
}

// accepted sets the outcome of a new single event whose jobs are
// written; a slot that got no job (paused, its flow row busy or its
// concurrency all in flight) goes back, the job waits for a lease.
func (rc *recording) accepted(ev *hookwarden.Event, mine []handed) {
	for _, h := range mine {
		if !h.set {
			rc.s.waiting(h.dest)
		}
	}
	rc.res.Outcome = hookwarden.Accepted
	rc.res.Events[0] = hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: len(ev.Destinations)}
}

// freshRows reads freshSQL's rows from br (after the SET): whether it
// claimed the event, its receipt, and the jobs leased to mine's slots.
func (rc *recording) freshRows(br pgx.BatchResults, ev *hookwarden.Event, mine []handed) (claimed bool, err error) {
	if _, err := br.Exec(); err != nil {
		return false, fmt.Errorf("record event: plan mode: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return false, fmt.Errorf("record event: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ref, receipt int64
		var job *int64
		var dest *string
		var attempts *int
		if err := rows.Scan(&ref, &receipt, &job, &dest, &attempts); err != nil {
			return false, fmt.Errorf("record event: %w", err)
		}
		claimed, rc.res.ReceiptID = true, receipt
		if job != nil { // nil: no destination
			rc.freshJob(ev, mine, *job, *dest, *attempts)
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("record event: %w", err)
	}
	return claimed, nil
}
