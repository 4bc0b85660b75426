package main

// Backfill inside serve: the automatic backfill of the outage windows found
// at start (auto: true), and the runs started by POST /api/backfill and the
// dashboard's button. Each runs in the background, owned by the App's
// WaitGroup, on the context Stop cancels; the receiver never waits for one.

import (
	"context"
	"errors"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/admin"
)

// newServeBackfiller is the runner of serve: the running configuration and
// receiver (a reload is seen by the next run), the metric, the workers woken
// for each recovered event's destinations.
func (a *App) newServeBackfiller() *backfiller {
	return &backfiller{cfg: a.currentConfig, store: a.Store, rc: a.Receiver, log: a.log, observe: a.Metrics.Backfill,
		notify: func(d []string) { a.Workers.NotifyCreated(d...) }, now: time.Now}
}

// startBackfill prepares a run (409 while one of the source runs) and runs
// it in the background. The window is widened like an automatic one's when
// widen is set (the dashboard posts an outage's own bounds).
func (a *App) startBackfill(ctx context.Context, source string, from, to time.Time, audit *hookwarden.AuditEntry, widen bool) (int64, error) {
	if widen {
		from, to = outageWindow(hookwarden.Outage{Start: from, End: to}, time.Now())
	}
	job, err := a.backfill.prepare(ctx, source, from, to, false, false, audit)
	switch {
	case errors.Is(err, hookwarden.ErrBackfillRunning), errors.Is(err, hookwarden.ErrNotFound):
		return 0, err
	case errors.Is(err, errNoBackfill), errors.Is(err, errNothingToDo):
		return 0, admin.BadRequest(err)
	case err != nil:
		return 0, err
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		_, _ = a.backfill.execute(a.bg, job)
	}()
	return job.run.ID, nil
}

// autoBackfill backfills, one after the other, every outage window that a
// source with auto: true can still recover and that no automatic run took
// yet (on PostgreSQL, the first instance to record the run takes it).
func (a *App) autoBackfill(ctx context.Context) {
	defer a.wg.Done()
	cfg := a.currentConfig()
	auto := map[string]bool{}
	for _, s := range cfg.Sources {
		if s.Backfill != nil && s.Backfill.Auto {
			auto[s.Name] = true
		}
	}
	if len(auto) == 0 {
		return
	}
	rep, err := hookwarden.GapsWithRecovery(ctx, a.Store, hookwarden.GapOptions{MinClean: defaultMinClean, Stale: gapStale,
		Sources: sourcePolicies(cfg)})
	if err != nil {
		a.log.Warn("automatic backfill: cannot read the outage windows", "err", err)
		return
	}
	for _, o := range rep.Outages {
		for _, r := range o.Sources {
			if !auto[r.Source] || r.Recovery != hookwarden.RecoveryRecoverable {
				continue
			}
			from, to := outageWindow(o, time.Now())
			job, err := a.backfill.prepare(ctx, r.Source, from, to, false, true, nil)
			switch {
			case errors.Is(err, hookwarden.ErrBackfillDone):
				continue // another instance (or an earlier start) took it
			case err != nil:
				a.log.Warn("automatic backfill not started", "source", r.Source, "from", from, "to", to, "err", err)
				continue
			}
			a.log.Info("automatic backfill of an outage window", "source", r.Source, "from", from, "to", to, "run", job.run.ID)
			if _, err := a.backfill.execute(ctx, job); err != nil {
				a.log.Warn("automatic backfill failed", "source", r.Source, "run", job.run.ID, "err", err)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
}
