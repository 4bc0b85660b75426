package pgstore

// Group commit, measured and not kept: concurrent Records sharing one
// transaction and its COMMIT, as sqlitestore's writer does. This is the
// form BenchmarkRecordConcurrent measures against Record as built (one
// transaction per call); on the shared 2-core machine it did not pay
// (docs/performance.md): PostgreSQL already lets concurrent commits share a
// WAL flush, so grouping saves only BEGIN and COMMIT per call, and spends
// a SAVEPOINT and a RELEASE per call while serializing each group's
// statements on one connection. It is kept here, test-only, so that the
// measurement can be run again (on a machine with a slow disk or a distant
// server the balance may differ).
//
// It keeps every promise of Record per call, as a production form would
// have to:
//   - each call runs inside its own savepoint, so a call whose statements
//     fail is rolled back alone and then run again on its own transaction
//     (with Record's usual retries): it never fails the others;
//   - a group is formed only from calls already waiting (no call waits for
//     company), and a call alone runs on its own transaction; groupers
//     bound the transactions at once, so calls queue while they are busy,
//     and the next free one takes every call waiting;
//   - anything that fails before COMMIT leaves nothing committed, so every
//     member then runs alone; a failed COMMIT's outcome is unknown, so every
//     member gets errCommit (503), never a second try;
//   - the group's deadline is its members' earliest: no call waits longer
//     than its limits.commit_timeout;
//   - jobs handed to direct slots are handed over only once the COMMIT
//     returned, and given back by a member rolled back to its savepoint.

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookwarden/hookwarden"
)

const (
	// groupers is how many group transactions run at once (each holds one
	// pooled connection while it runs): the prototype's best of 1, 4 and 8
	// at 64 callers.
	groupers = 4
	// groupMax bounds a group: a bigger one holds its locks longer.
	groupMax = 64
)

// groupCall is one Record call handed to a grouper.
type groupCall struct {
	ctx   context.Context
	rc    *recording
	res   hookwarden.RecordResult
	err   error
	alone bool // run it on its own transaction: it was alone, or failed in the group before COMMIT
	done  chan struct{}
}

// grouping runs the groupers of one Store.
type grouping struct {
	s       *Store
	commits atomic.Int64    // COMMITs of groups and of calls alone
	members atomic.Int64    // calls they committed
	calls   chan *groupCall // unbuffered: a call is taken only by a running grouper
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

func newGrouping(s *Store) *grouping {
	g := &grouping{s: s, calls: make(chan *groupCall), stop: make(chan struct{})}
	for range groupers {
		g.wg.Go(g.loop)
	}
	return g
}

// close stops the groupers once the groups under way are committed.
func (g *grouping) close() {
	g.once.Do(func() { close(g.stop) })
	g.wg.Wait()
}

// record hands rc to a grouper and waits for its outcome; alone says the
// caller must run it on its own transaction instead (it failed in its
// group before COMMIT, or the store is closing). A call that cannot reach
// a grouper before its deadline fails (503).
func (g *grouping) record(ctx context.Context, rc *recording) (res hookwarden.RecordResult, err error, alone bool) {
	c := &groupCall{ctx: ctx, rc: rc, done: make(chan struct{})}
	select {
	case g.calls <- c:
	case <-g.stop:
		return res, nil, true
	case <-ctx.Done():
		return res, ctx.Err(), false
	}
	<-c.done // the group is bounded by ctx's deadline
	return c.res, c.err, c.alone
}

func (g *grouping) loop() {
	for {
		var first *groupCall
		select {
		case <-g.stop:
			return
		case first = <-g.calls:
		}
		group := []*groupCall{first}
	waiting:
		for len(group) < groupMax {
			select {
			case c := <-g.calls:
				group = append(group, c)
			default:
				break waiting
			}
		}
		if len(group) == 1 {
			// Nothing to share: its own transaction, no savepoint's round
			// trips. Run here, so that calls arriving meanwhile wait for a
			// grouper and form the next group.
			first.res, first.err = first.rc.alone(first.ctx)
			g.commits.Add(1)
			g.members.Add(1)
			close(first.done)
			continue
		}
		g.commit(group)
	}
}

// commit runs the group in one transaction, each member in a savepoint.
func (g *grouping) commit(group []*groupCall) {
	defer func() {
		for _, c := range group {
			close(c.done)
		}
	}()
	// The earliest deadline of the members (each has one: Record bounds
	// its call); members already out of time are answered at once.
	var deadline time.Time
	live := group[:0:0]
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
	if len(live) == 0 {
		return
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(g.s.opts.Timeout)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// Nothing committed: every member runs again alone (its slots given back).
	abandon := func() {
		for _, c := range live {
			handOver(c.rc.handed, false)
			c.rc.handed = c.rc.handed[:0]
			c.alone = true
		}
	}
	tx, err := g.s.pool.Begin(ctx)
	if err != nil {
		abandon()
		return
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // after Commit a no-op
	}()
	members := live[:0:0]
	for _, c := range live {
		sp, err := tx.Begin(ctx) // SAVEPOINT
		if err != nil {
			abandon()
			return
		}
		rc := c.rc
		rc.tx = sp
		rc.res = hookwarden.RecordResult{Events: make([]hookwarden.EventResult, len(rc.r.Events))}
		if err := rc.record(ctx); err != nil {
			// This member alone: back to its savepoint, run again by its caller.
			handOver(rc.handed, false)
			rc.handed = rc.handed[:0]
			c.alone = true
			if sp.Rollback(ctx) != nil {
				abandon()
				return
			}
			continue
		}
		if sp.Commit(ctx) != nil { // RELEASE SAVEPOINT
			abandon()
			return
		}
		members = append(members, c)
	}
	if len(members) == 0 {
		return
	}
	if testBeforeCommit != nil {
		testBeforeCommit(ctx, tx)
	}
	err = tx.Commit(ctx)
	g.commits.Add(1)
	g.members.Add(int64(len(members)))
	for _, c := range members {
		handOver(c.rc.handed, err == nil)
		clear(c.rc.handed) // drop the bodies
		c.rc.handed = c.rc.handed[:0]
		if err != nil {
			c.err = fmt.Errorf("%w: %w", errCommit, err)
		} else {
			c.res = c.rc.res
		}
	}
}

// Record is Store.Record through the groupers.
func (g *grouping) Record(ctx context.Context, r *hookwarden.Receipt) (hookwarden.RecordResult, error) {
	s := g.s
	ctx, cancel := s.bound(ctx)
	defer cancel()
	r = storable(r)
	rec := &recording{s: s, r: r, headers: encodeHeaders(r.Header), at: r.ReceivedAt.UTC(), now: s.now(), direct: true}
	res, err, alone := g.record(ctx, rec)
	if alone {
		res, err = rec.alone(ctx)
	}
	if err != nil {
		return hookwarden.RecordResult{}, fmt.Errorf("%w: record receipt: %w", hookwarden.ErrUnavailable, err)
	}
	return res, nil
}
