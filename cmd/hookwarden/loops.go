package main

// The loops of serve: what runs in the background of a running App, each on
// its own clock, and what it does on each tick. App.Open starts the
// heartbeat, the outbox refresh and the prune loop on a context Stop cancels;
// the supervisor (notify.go) runs the watchdog once systemd is told READY.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/sdnotify"
)

// heartbeatEvery is how often a running serve records that it is alive; an
// outage window is known to within this.
const heartbeatEvery = 2 * time.Second

// outboxRefresh is how stale the outbox gauges may be: counting a deep backlog
// happens on this timer, never inside a scrape.
const outboxRefresh = 2 * time.Second

const (
	// pruneFirst is when serve first applies retention after it starts, out
	// of the way of start-up; pruneEvery is how often after that.
	pruneFirst = time.Minute
	pruneEvery = time.Hour
)

// heartbeat records liveness so `gaps` can find outage windows.
func (a *App) heartbeat(ctx context.Context) {
	a.every(ctx, heartbeatEvery, func() {
		if err := a.Store.Heartbeat(ctx, a.runID); err != nil && ctx.Err() == nil {
			a.log.Warn("heartbeat not recorded", "err", err)
		}
		if a.countInstances != nil {
			a.countInstances(ctx)
		}
	})
}

// every runs f each period until ctx ends; it is one of the App's
// goroutines (a.wg), started with a.wg.Add(1).
func (a *App) every(ctx context.Context, period time.Duration, f func()) {
	defer a.wg.Done()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// claimWarmer reads a store's claim index into the page cache
// (sqlitestore.Store.WarmClaims) or the server's buffers
// (pgstore.Store.WarmClaims); n is what it read: the claims on SQLite, the
// index's pages on PostgreSQL.
type claimWarmer interface {
	WarmClaims(ctx context.Context) (int64, error)
}

// warmUpDecider is a store that may know its claim index needs no read at
// start: sqlitestore.Store (not with the claims filter the file kept) and
// pgstore.Store (not once another serve started since the database server
// did); store.go checks both are.
type warmUpDecider interface {
	WarmUpNeeded() (bool, string)
}

// warmUpNeeded says whether store's claim index is read at start, and if
// not, why; a store that cannot tell is read.
func warmUpNeeded(store any) (bool, string) {
	if c, ok := store.(warmUpDecider); ok {
		return c.WarmUpNeeded()
	}
	return true, ""
}

// warmClaims reads the claim index once at start, beside the traffic: after
// a reboot, claims with random ids would each wait on a read from the disk
// until it is cached.
func (a *App) warmClaims(ctx context.Context, w claimWarmer) {
	defer a.wg.Done()
	t := time.Now()
	n, err := w.WarmClaims(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("claim index not warmed", "err", err)
		}
		return
	}
	a.log.Info("claim index read into the page cache", "read", n, "seconds", time.Since(t).Seconds())
}

// plannerStatsEvery: how often serve compares the planner's estimates of
// the queue with the counters (a read of the counters and two plans).
const plannerStatsEvery = 10 * time.Second

// plannerStatsLoop keeps the planner's picture of the queue current, so
// that a backlog that grew since the last ANALYZE is not planned as empty.
func (a *App) plannerStatsLoop(ctx context.Context, k plannerStatsKeeper) {
	a.every(ctx, plannerStatsEvery, func() {
		start := time.Now()
		analyzed, stats, err := k.KeepPlannerStats(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				a.log.Warn("planner statistics not checked", "err", err)
			}
		case analyzed:
			args := []any{"took", time.Since(start).Round(time.Millisecond)}
			for _, st := range stats {
				args = append(args, st.State, st.Count, st.State+"_estimated", st.Estimated)
			}
			a.log.Info("jobs analyzed: the planner's estimates were far from the counts", args...)
		}
	})
}

// outboxLoop refreshes the outbox gauges' snapshot every outboxRefresh.
func (a *App) outboxLoop(ctx context.Context) {
	defer a.wg.Done()
	a.Metrics.RunOutbox(ctx, outboxRefresh)
}

// pruneLoop applies retention inside serve: once shortly after start, then
// every pruneEvery, in small batches through the writer.
func (a *App) pruneLoop(ctx context.Context) {
	defer a.wg.Done()
	t := time.NewTimer(pruneFirst)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.pruneOnce(ctx)
		t.Reset(pruneEvery)
	}
}

// pruneOnce is one pass of the running configuration's retention; a failure
// is logged and left to the next pass.
func (a *App) pruneOnce(ctx context.Context) {
	cfg := a.currentConfig()
	ret := retention(cfg)
	start := time.Now()
	res, err := a.Store.Prune(ctx, hookwarden.PruneOptions{Retention: ret})
	if err != nil {
		if ctx.Err() == nil {
			a.log.Error("retention failed; it is tried again next hour", "err", err)
		}
		return
	}
	if res.EventsDeleted > 0 || res.PayloadsPruned > 0 || res.QuarantineDeleted > 0 {
		a.log.Info("retention applied", "payloads_pruned", res.PayloadsPruned, "payload_bytes", res.PayloadBytes,
			"events_deleted", res.EventsDeleted, "quarantine_deleted", res.QuarantineDeleted, "took", time.Since(start).Round(time.Millisecond))
	}
	if res.HeldDead > 0 || res.HeldQuarantined > 0 {
		a.log.Warn("kept past retention.payloads on purpose: dead letters and quarantined requests need a human",
			"events_with_dead_letters", res.HeldDead, "pending_events", res.HeldPending, "quarantined", res.HeldQuarantined)
	}
}

// watchdog pings every period while check passes. check gets the period as
// its deadline: a check that cannot finish in time is a failed check.
func (s *supervisor) watchdog(ctx context.Context, check func(context.Context) error) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	healthy := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, s.every)
		err := check(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			s.send(sdnotify.Watchdog)
			if !healthy {
				s.log.Info("healthy again: watchdog pings resumed")
				healthy = true
			}
		default:
			// Logged every period: the journal shows how long it lasted
			// before systemd's "Watchdog timeout" line.
			s.log.Error("unhealthy: watchdog ping withheld; systemd restarts the process if this lasts", "err", err)
			healthy = false
		}
	}
}

// watchdogCheck proves the writer is alive by committing an empty
// transaction through it (a wedged writer never answers, and the deadline
// fails the check), then asks ready(): the last write succeeded and every
// destination's dispatcher is turning.
func (a *App) watchdogCheck(ctx context.Context) error {
	if err := a.Store.Ping(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("database writer: no commit within the watchdog period: %w", err)
		}
		return fmt.Errorf("database writer: %w", err)
	}
	return a.ready(ctx)
}
