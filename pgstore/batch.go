package pgstore

// Batching: concurrent Records of a new single event share one statement
// and one transaction, as sqlitestore's writer shares a commit between the
// requests queued. PostgreSQL already lets concurrent commits share a WAL
// flush, so what a batch saves is not the flush but the server's work per
// statement (plan, executor start, the counters' statement triggers, which
// fire once per statement whatever its rows) and the round trips: on this
// 2-core machine that work, not the disk, bounded the acks (docs/
// performance.md has the figures). Grouping whole transactions behind
// savepoints, tried before (docs/performance.md), saved only BEGIN and COMMIT.
//
// A batch never costs a member a promise:
//   - a repeat of an id claimed before gets its duplicate or divergent
//     receipt from a second statement of the batch (repeatSQL), by the
//     general path's rules;
//   - any other member the batch did not claim (a body key held by another
//     id, a repeat with the body replay check or from a backfill, an id or
//     a body repeated within the batch) is recorded by its caller on a
//     transaction of its own, by the general path, after the batch
//     committed: the batch wrote for it at most its body key, as the
//     one-statement path does;
//   - anything that fails before COMMIT leaves nothing committed, and every
//     member then runs on its own (as sqlitestore retries a failed batch op
//     by op); a failed COMMIT's outcome is unknown, so every member gets a
//     503, never a second try;
//   - a batch is formed only from calls already waiting (no call waits for
//     company); its deadline is its members' earliest;
//   - slots are handed their jobs only once the COMMIT returned, and given
//     back otherwise;
//   - a destination's concurrency across instances holds for every slot of
//     the batch: its k-th slot is granted only if fewer than concurrency-k+1
//     leases are in flight.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
)

// batchMax bounds a batch: a bigger one holds its keys' locks longer.
const batchMax = 64

// batchers is how many batch transactions run at once, each on a pooled
// connection; calls arriving meanwhile wait and form the next batches.
var batchers = 2

// batchCall is one Record call handed to a batcher.
type batchCall struct {
	ctx context.Context
	rc  *recording
	// The outcome: recorded (rc.res is set); err, it failed (a 503);
	// neither, its caller records it on its own.
	recorded bool
	err      error
	done     chan struct{}
}

// batching runs the batchers of one Store.
type batching struct {
	s       *Store
	queue   chan *batchCall // unbuffered: a call is taken only by a batcher that is free
	calls   atomic.Int64    // calls so far (a test's count)
	repeats atomic.Int64    // repeats recorded by repeatSQL (a test's count)
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func newBatching(s *Store, n int) *batching {
	b := &batching{s: s, queue: make(chan *batchCall), stop: make(chan struct{})}
	for range n {
		b.wg.Go(b.loop)
	}
	return b
}

// close stops the batchers once the batches under way are committed.
func (b *batching) close() {
	b.once.Do(func() { close(b.stop) })
	b.wg.Wait()
}

// batchable reports whether rc may join a batch: a single new event of the
// request's own body (freshable), with no one-time token to check first.
func (rc *recording) batchable() bool {
	r := rc.r
	return r.Token == nil && len(r.Events) == 1 && rc.freshable(&r.Events[0])
}

// record hands rc to a batcher and waits for its outcome. It reports
// false, with no error, when the caller must record rc on its own.
func (b *batching) record(ctx context.Context, rc *recording) (bool, error) {
	c := &batchCall{ctx: ctx, rc: rc, done: make(chan struct{})}
	b.calls.Add(1)
	select {
	case b.queue <- c:
	case <-b.stop:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
	<-c.done // bounded by the members' earliest deadline
	return c.recorded, c.err
}

func (b *batching) loop() {
	for {
		var first *batchCall
		select {
		case <-b.stop:
			return
		case first = <-b.queue:
		}
		if h := b.s.opts.testHold; h != nil {
			h()
		}
		group := []*batchCall{first}
	waiting:
		for len(group) < batchMax {
			select {
			case c := <-b.queue:
				group = append(group, c)
			default:
				break waiting
			}
		}
		if len(group) == 1 {
			// Nothing to share: the one-statement path, run here, so that
			// calls arriving meanwhile wait and form the next batch.
			first.recorded, first.err = b.alone(first)
			close(first.done)
			continue
		}
		b.commit(group)
		for _, c := range group {
			close(c.done)
		}
	}
}

// alone records c's call on its own transaction, new or not.
func (b *batching) alone(c *batchCall) (bool, error) {
	if _, err := c.rc.alone(c.ctx); err != nil {
		return false, err
	}
	return true, nil
}

// member is one call of a batch, with its Direct slots.
type member struct {
	c      *batchCall
	isNew  bool // claimed by the batch (else, if recorded, a duplicate)
	first  int  // its slots: rc.handed[first:]
	leases []int64
	caps   []int32
}

// commit records group's new events and repeats in one transaction; the
// other members are left to their callers.
func (b *batching) commit(group []*batchCall) {
	// The earliest deadline of the members (Record bounds each call);
	// members out of time already are answered at once.
	var deadline time.Time
	live := make([]*batchCall, 0, len(group))
	for _, c := range group {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			continue
		}
		if d, ok := c.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
		live = append(live, c)
	}
	// Keys in one order, so that batches of several instances claiming the
	// same ids take their locks in one order (no deadlock). An id or a
	// checked body repeated within the batch stays out: the statement
	// could not tell which copy claimed.
	slices.SortStableFunc(live, func(x, y *batchCall) int {
		ex, ey := &x.rc.r.Events[0], &y.rc.r.Events[0]
		return cmp.Or(cmp.Compare(x.rc.r.Source, y.rc.r.Source), cmp.Compare(ex.ID, ey.ID))
	})
	type key struct{ source, id string }
	ids := make(map[key]bool, len(live))
	bodies := map[key]bool{}
	ms := make([]member, 0, len(live))
	for _, c := range live {
		r, ev := c.rc.r, &c.rc.r.Events[0]
		if ids[key{r.Source, ev.ID}] || (r.BodyReplayCheck && bodies[key{r.Source, string(ev.BodySHA256[:])}]) {
			continue // on its own after the batch
		}
		ids[key{r.Source, ev.ID}] = true
		if r.BodyReplayCheck {
			bodies[key{r.Source, string(ev.BodySHA256[:])}] = true
		}
		ms = append(ms, member{c: c})
	}
	switch len(ms) {
	case 0:
		return
	case 1:
		ms[0].c.recorded, ms[0].c.err = b.alone(ms[0].c)
		return
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(b.s.opts.Timeout)
	}
	ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), batchSizeKey{}, len(ms)), deadline)
	defer cancel()
	committed, err := b.run(ctx, ms)
	for i := range ms {
		c := ms[i].c
		handOver(c.rc.handed, err == nil)
		clear(c.rc.handed) // drop the bodies
		c.rc.handed = c.rc.handed[:0]
		switch {
		case err != nil:
			c.recorded, ms[i].isNew = false, false
			if committed {
				c.err = err // the COMMIT's outcome is unknown: a 503
			} // else nothing committed: on its own, the one-statement path again
		case !c.recorded:
			c.rc.batched = true // a duplicate: straight to the general path
		}
	}
	if err == nil {
		var due []string
		for i := range ms {
			if ms[i].isNew {
				due = append(due, ms[i].c.rc.due...)
			}
		}
		b.s.announceCommitted(due)
	}
}

// batchSizeKey carries a batch's size to the COMMIT's tracer (OnCommit).
type batchSizeKey struct{}

// run runs the batch's transaction. committed reports that COMMIT was
// sent: an error then means its outcome is unknown.
func (b *batching) run(ctx context.Context, ms []member) (committed bool, err error) {
	s := b.s
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // after Commit a no-op
	}()
	// Slots first, then the flow rows of the destinations with a
	// concurrency that got one, locked by one statement for the batch.
	var wanted []string
	for i := range ms {
		rc := ms[i].c.rc
		rc.tx, rc.due = tx, rc.due[:0]
		rc.res = hookwarden.RecordResult{Events: make([]hookwarden.EventResult, 1)}
		ms[i].first = len(rc.handed)
		var w []string
		ms[i].leases, ms[i].caps, w = rc.slots(&rc.r.Events[0])
		wanted = append(wanted, w...)
	}
	if len(wanted) > 0 {
		wanted = slices.Compact(slices.Sorted(slices.Values(wanted)))
		free, err := ms[0].c.rc.lockDirect(ctx, wanted)
		if err != nil {
			return false, err
		}
		taken := map[string]int32{} // slots of the batch so far, per destination
		for i := range ms {
			dests := ms[i].c.rc.r.Events[0].Destinations
			unlocked(dests, ms[i].leases, ms[i].caps, free)
			for k, d := range dests {
				if ms[i].caps[k] > 0 && ms[i].leases[k] > 0 {
					// The batch's n-th slot of d needs n-1 more free; past
					// the concurrency, none (its slot goes back).
					if ms[i].caps[k] -= taken[d]; ms[i].caps[k] <= 0 {
						ms[i].leases[k] = 0
					}
					taken[d]++
				}
			}
		}
	}
	if s.opts.testBatchTx != nil {
		s.opts.testBatchTx(ctx, tx)
	}
	args := batchArgs(ms, s)
	bt := &pgx.Batch{}
	bt.Queue(`SET LOCAL plan_cache_mode = force_generic_plan`)
	bt.Queue(batchSQL, args...)
	br := tx.SendBatch(ctx, bt)
	err = readBatch(br, ms)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("record events: %w", cerr)
	}
	if err != nil {
		return false, err
	}
	if err := b.recordRepeats(ctx, tx, ms); err != nil {
		return false, err
	}
	if s.opts.testBatchCommit != nil {
		s.opts.testBatchCommit(ctx, tx)
	}
	if err := tx.Commit(ctx); err != nil {
		return true, fmt.Errorf("%w: %w: %w", hookwarden.ErrUnavailable, errCommit, err)
	}
	for i := range ms {
		if rc := ms[i].c.rc; ms[i].isNew {
			rc.accepted(&rc.r.Events[0], rc.handed[ms[i].first:])
		}
	}
	return true, nil
}

// batchSQL is freshSQL over many events: $1-$10 one element per member
// (source, id, type, received at, body hash, remote address, headers,
// receipt body, origin, body replay check), $11-$14 one element per job
// (the member's ordinal, counting from 1, its destination, lease and
// concurrency), $15 the store's clock (NULL: now()), $16 the holder.
// A member's events row, receipt and jobs follow only from its claim; the
// rows returned are the claimed members' (ordinal, event, receipt, job).
const batchSQL = `WITH m AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bytea[],
		$6::text[], $7::text[], $8::bytea[], $9::text[], $10::bool[])
		WITH ORDINALITY AS m(source, event_id, event_type, at, sum, remote, headers, body, origin, checked, i)
), bk AS (
	INSERT INTO body_keys (source, body_sha256, event_id, claimed_at)
	SELECT source, sum, event_id, at FROM m WHERE checked ORDER BY i
	ON CONFLICT (source, body_sha256) DO NOTHING RETURNING source, body_sha256
), ev AS (
	INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256)
	SELECT m.source, m.event_id, m.event_type, m.at, m.sum FROM m
	WHERE NOT m.checked OR EXISTS (SELECT 1 FROM bk WHERE bk.source = m.source AND bk.body_sha256 = m.sum)
	ORDER BY m.i
	ON CONFLICT (source, event_id) DO NOTHING RETURNING id, source, event_id
), cl AS MATERIALIZED (
	SELECT m.*, ev.id AS ref FROM m JOIN ev ON ev.source = m.source AND ev.event_id = m.event_id
), rc AS (
	INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256, origin)
	SELECT source, ref, 'accepted', at, remote, headers, body, '\x'::bytea, origin FROM cl ORDER BY i
	RETURNING id, event_ref
), jb AS (
	INSERT INTO jobs (event_ref, destination, state, attempts, next_at, leased_until, leased_by, created_at)
	SELECT cl.ref, d.dest, 'pending', CASE WHEN l.lease > 0 THEN 1 ELSE 0 END, t,
		CASE WHEN l.lease > 0 THEN t + l.lease * interval '1 microsecond' END,
		CASE WHEN l.lease > 0 THEN $16::bigint END, t
	FROM unnest($11::bigint[], $12::text[], $13::bigint[], $14::int[]) AS d(i, dest, lease, cap)
		JOIN cl ON cl.i = d.i, COALESCE($15::timestamptz, now()) AS t,
		` + leaseTestSQL + `
	RETURNING id, event_ref, destination, attempts
)
SELECT cl.i, rc.id, jb.id, jb.destination, jb.attempts FROM cl JOIN rc ON rc.event_ref = cl.ref
	LEFT JOIN jb ON jb.event_ref = cl.ref`

// batchArgs are batchSQL's arguments for ms.
func batchArgs(ms []member, s *Store) []any {
	n := len(ms)
	sources, ids, types := make([]string, n), make([]string, n), make([]string, n)
	ats, sums, bodies := make([]time.Time, n), make([][]byte, n), make([][]byte, n)
	remotes, headers := make([]string, n), make([]string, n)
	origins, checks := make([]*string, n), make([]bool, n)
	var jm []int64
	var jd []string
	var jl []int64
	var jc []int32
	backfill := "backfill"
	for i := range ms {
		rc := ms[i].c.rc
		r, ev := rc.r, &rc.r.Events[0]
		sources[i], ids[i], types[i], ats[i], sums[i] = r.Source, ev.ID, ev.Type, rc.at, ev.BodySHA256[:]
		remotes[i], headers[i], checks[i] = r.RemoteAddr, rc.headers, r.BodyReplayCheck
		_, bodies[i] = receiptKind(true, false, false, r.Body) // never NULL (pruned)
		if r.Backfill {
			origins[i] = &backfill
		}
		for k, d := range ev.Destinations {
			jm, jd = append(jm, int64(i+1)), append(jd, d)
			jl, jc = append(jl, ms[i].leases[k]), append(jc, ms[i].caps[k])
		}
	}
	return []any{sources, ids, types, ats, sums, remotes, headers, bodies, origins, checks,
		jm, jd, jl, jc, s.now(), s.holder()}
}

// readBatch reads batchSQL's rows (after the SET): each claimed member's
// receipt and the jobs leased to its slots.
func readBatch(br pgx.BatchResults, ms []member) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("record events: plan mode: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("record events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int64
		var receipt int64
		var job *int64
		var dest *string
		var attempts *int
		if err := rows.Scan(&i, &receipt, &job, &dest, &attempts); err != nil {
			return fmt.Errorf("record events: %w", err)
		}
		if i < 1 || int(i) > len(ms) {
			return fmt.Errorf("record events: member %d of %d", i, len(ms))
		}
		m := &ms[i-1]
		rc := m.c.rc
		m.c.recorded, m.isNew, rc.res.ReceiptID = true, true, receipt
		if job != nil {
			rc.freshJob(&rc.r.Events[0], rc.handed[m.first:], *job, *dest, *attempts)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("record events: %w", err)
	}
	return nil
}

// repeatSQL records repeats of claimed events, as the general path's
// claim and receipt do, in the batch's transaction after batchSQL: a
// statement of its own, whose snapshot sees the claims batchSQL met (ON
// CONFLICT waited for them to commit). $1-$8 one element per repeat:
// source, event id, the event's body hash, received at, remote address,
// headers, the request's body and its hash. A copy is "same" (its bytes
// are the claim's: no body kept), "divergent", or "unknown" (retention
// emptied the claim's hash, or the claim came from a backfill, whose JSON
// may differ from the webhook's bytes: kept, not flagged). The claims are
// read one index probe per repeat (LATERAL ... LIMIT 1): as a join, the
// generic plan, estimating a small events table, hashed a scan of all of it.
const repeatSQL = `WITH m AS MATERIALIZED (
	SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::timestamptz[], $5::text[], $6::text[], $7::bytea[], $8::bytea[])
		WITH ORDINALITY AS m(source, event_id, sum, at, remote, headers, body, body_sum, i)
), e AS MATERIALIZED (
	SELECT m.*, ev.id AS ref, CASE
		WHEN COALESCE(length(ev.body_sha256), 0) = 0 THEN 'unknown'
		WHEN ev.body_sha256 = m.sum THEN 'same'
		WHEN EXISTS (SELECT 1 FROM receipts r WHERE r.event_ref = ev.id AND r.kind = 'accepted' AND r.origin = 'backfill') THEN 'unknown'
		ELSE 'divergent' END AS copy
	FROM m, LATERAL (SELECT id, body_sha256 FROM events WHERE source = m.source AND event_id = m.event_id LIMIT 1) ev
), rc AS (
	INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
	SELECT source, ref, CASE copy WHEN 'divergent' THEN 'divergent' ELSE 'duplicate' END, at, remote, headers,
		CASE copy WHEN 'same' THEN NULL ELSE body END, CASE copy WHEN 'same' THEN '\x'::bytea ELSE body_sum END
	FROM e ORDER BY i
	RETURNING id, event_ref
)
SELECT e.i, rc.id, e.copy = 'divergent' FROM e JOIN rc ON rc.event_ref = e.ref`

// recordRepeats records, with repeatSQL, the members batchSQL did not
// claim because their id was claimed: a repeat. A member with the body
// replay check (its body key may be another id's) or from a backfill is
// left to the general path, as is one whose claim is not found (pruned
// meanwhile). Members are one per id (commit), so a receipt's event names
// its member.
func (b *batching) recordRepeats(ctx context.Context, tx pgx.Tx, ms []member) error {
	var idx []int
	for i := range ms {
		if r := ms[i].c.rc.r; !ms[i].c.recorded && !r.BodyReplayCheck && !r.Backfill {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	n := len(idx)
	sources, ids, ats := make([]string, n), make([]string, n), make([]time.Time, n)
	sums, bodies, bodySums := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	remotes, headers := make([]string, n), make([]string, n)
	for k, i := range idx {
		rc := ms[i].c.rc
		r, ev := rc.r, &rc.r.Events[0]
		sources[k], ids[k], sums[k], ats[k] = r.Source, ev.ID, ev.BodySHA256[:], rc.at
		remotes[k], headers[k], bodySums[k] = r.RemoteAddr, rc.headers, r.BodySHA256[:]
		if bodies[k] = r.Body; bodies[k] == nil {
			bodies[k] = []byte{} // kept empty, not NULL (pruned)
		}
	}
	rows, err := tx.Query(ctx, repeatSQL, sources, ids, sums, ats, remotes, headers, bodies, bodySums)
	if err != nil {
		return fmt.Errorf("record repeats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, receipt int64
		var divergent bool
		if err := rows.Scan(&k, &receipt, &divergent); err != nil {
			return fmt.Errorf("record repeats: %w", err)
		}
		if k < 1 || int(k) > n {
			return fmt.Errorf("record repeats: repeat %d of %d", k, n)
		}
		c := ms[idx[k-1]].c
		c.recorded = true
		b.repeats.Add(1)
		c.rc.res = hookwarden.RecordResult{Outcome: hookwarden.Duplicate, ReceiptID: receipt,
			Events: []hookwarden.EventResult{{Outcome: hookwarden.Duplicate, Divergent: divergent}}}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("record repeats: %w", err)
	}
	return nil
}
