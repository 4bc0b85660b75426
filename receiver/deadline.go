package receiver

import (
	"context"
	"sync/atomic"
	"time"
)

// commitDeadlines hands out the context that bounds a request's wait for
// its commit (limits.commit_timeout). A context.WithTimeout per request
// costs four allocations and a timer on the ack path; instead requests
// arriving within one grain (a tenth of the timeout) share one context
// whose deadline is the latest of theirs, so each waits between the timeout
// and 1.1 times it. The client leaving does not end the wait early: the
// commit runs anyway, and the wait is bounded.
type commitDeadlines struct {
	d, grain time.Duration
	cur      atomic.Pointer[sharedDeadline]
}

type sharedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc // released by the timer; kept for vet
	until  time.Time
}

func newCommitDeadlines(d time.Duration) *commitDeadlines {
	return &commitDeadlines{d: d, grain: d / 10}
}

// get returns a context that ends no sooner than the timeout from now.
func (c *commitDeadlines) get() context.Context {
	now := time.Now()
	want := now.Add(c.d)
	if s := c.cur.Load(); s != nil && !s.until.Before(want) {
		return s.ctx
	}
	until := want.Add(c.grain)
	ctx, cancel := context.WithDeadline(context.Background(), until)
	c.cur.Store(&sharedDeadline{ctx: ctx, cancel: cancel, until: until})
	return ctx
}
