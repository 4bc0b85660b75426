package main

// The backfill runner (docs/backfill.md), shared by `hookwarden backfill`,
// serve's automatic backfill, POST /api/backfill and the dashboard button.
// A run is prepared (checked, clipped to retention.claims, recorded as
// started, which refuses a second run of the source) and then executed:
// the provider's client (internal/backfill) lists or asks for redelivery,
// every listed event goes through the receiver's extraction and the
// store's claim (Record) like a live one, and the run's counts go to the
// store's run log, the metric and the audit log.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/backfill"
	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/receiver"
)

// backfillMargin widens an outage window on both sides for its backfill:
// an event created just before the last heartbeat may have been sent after
// it, and the provider's clock is not ours. Claims make the overlap free.
const backfillMargin = time.Minute

// backfillTouch is how often a run records its progress (far below
// hookwarden.BackfillStale, after which a silent run counts as abandoned).
const backfillTouch = 10 * time.Second

// maxAuditEvents caps the recovered events an audit entry links to.
const maxAuditEvents = 1000

var (
	// errNoBackfill: the source has no backfill: (exit 2).
	errNoBackfill = errors.New("has no backfill: configured")
	// errNothingToDo: the whole window is older than retention.claims.
	errNothingToDo = errors.New("the whole window is older than retention.claims")
)

// backfiller runs backfills against one store.
type backfiller struct {
	cfg     func() *config.Config
	store   hookwarden.Store
	rc      *receiver.Receiver // extraction and destinations of the configured sources
	log     *slog.Logger
	observe func(source, outcome string, n int) // the metric; nil in the command
	notify  func(destinations []string)         // wake the workers; nil in the command
	now     func() time.Time
}

// backfillJob is one prepared run.
type backfillJob struct {
	run     hookwarden.BackfillRun
	index   int // of the source in the configuration, for key paths
	src     config.Source
	refused *hookwarden.Span // the part older than retention.claims, not asked for
	audit   *hookwarden.AuditEntry
	// recovered are the events it recorded (up to maxAuditEvents), for the audit entry.
	recovered []hookwarden.EventKey
	// progress, if set, is told how much of the window (newest first) is done.
	progress func(done, total time.Duration)
}

// keyRefusedError is the provider's 401/403, naming the key's path.
type keyRefusedError struct {
	path string
	err  error
}

func (e *keyRefusedError) Error() string {
	return fmt.Sprintf("%s: %v (check the key and its scope, docs/backfill.md)", e.path, e.err)
}
func (e *keyRefusedError) Unwrap() error { return e.err }

// sourceIndex finds a configured source.
func sourceIndex(cfg *config.Config, name string) (int, bool) {
	for i := range cfg.Sources {
		if cfg.Sources[i].Name == name {
			return i, true
		}
	}
	return -1, false
}

// prepare checks the request and, unless it is a dry run, records the run
// as started (hookwarden.ErrBackfillRunning, ErrBackfillDone refuse it).
func (b *backfiller) prepare(ctx context.Context, source string, from, to time.Time, dryRun, auto bool,
	audit *hookwarden.AuditEntry) (*backfillJob, error) {
	cfg := b.cfg()
	i, ok := sourceIndex(cfg, source)
	if !ok {
		return nil, fmt.Errorf("source %q: %w", source, hookwarden.ErrNotFound)
	}
	src := cfg.Sources[i]
	if src.Backfill == nil {
		return nil, fmt.Errorf("sources[%d] (%s) %w", i, source, errNoBackfill)
	}
	if from.IsZero() || to.IsZero() || !from.Before(to) {
		return nil, fmt.Errorf("backfill window %s to %s: want from before to", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	job := &backfillJob{index: i, src: src, audit: audit}
	// Older ids may have been forgotten: a listed event would be taken for new.
	if oldest := b.now().Add(-cfg.Retention.Claims.D()); from.Before(oldest) {
		if !to.After(oldest) {
			return nil, fmt.Errorf("%s to %s: %w (%s)", from.Format(time.RFC3339), to.Format(time.RFC3339), errNothingToDo, cfg.Retention.Claims)
		}
		job.refused = &hookwarden.Span{From: from, To: oldest}
		from = oldest
	}
	job.run = hookwarden.BackfillRun{Source: source, From: from.UTC(), To: to.UTC(), Auto: auto, DryRun: dryRun,
		Method: config.BackfillMethod(src.Scheme)}
	if audit != nil {
		job.run.Origin, job.run.Actor = audit.Origin, audit.Actor
	}
	if _, _, err := b.client(job); err != nil {
		return nil, err
	}
	if dryRun {
		return job, nil
	}
	id, err := b.store.StartBackfill(ctx, job.run)
	switch {
	case errors.Is(err, hookwarden.ErrBackfillRunning), errors.Is(err, hookwarden.ErrBackfillDone):
		return nil, err
	case err != nil:
		return nil, &runNotRecordedError{err}
	}
	job.run.ID = id
	return job, nil
}

// runNotRecordedError: the store could not record the run's start (a
// runtime failure, not the caller's mistake).
type runNotRecordedError struct{ err error }

func (e *runNotRecordedError) Error() string { return e.err.Error() }
func (e *runNotRecordedError) Unwrap() error { return e.err }

// client builds the provider's client of the job's source.
func (b *backfiller) client(job *backfillJob) (backfill.Lister, backfill.Redeliverer, error) {
	bc := job.src.Backfill
	path := fmt.Sprintf("sources[%d].backfill", job.index)
	key, err := bc.APIKey.Resolve()
	if err != nil {
		return nil, nil, fmt.Errorf("%s.api_key: %w", path, err)
	}
	o := backfill.Options{APIBase: bc.APIBase, APIKey: key, DryRun: job.run.DryRun}
	var l backfill.Lister
	var r backfill.Redeliverer
	switch job.src.Scheme {
	case "stripe":
		l, err = backfill.NewStripe(backfill.StripeConfig{Options: o, Types: bc.Types, APIVersion: bc.APIVersion})
	case "paddle":
		l, err = backfill.NewPaddle(backfill.PaddleConfig{Options: o, Types: bc.Types})
	case "github":
		r, err = backfill.NewGitHub(backfill.GitHubConfig{Options: o, Hook: bc.Hook})
	case "standard":
		r, err = backfill.NewSvix(backfill.SvixConfig{Options: o, App: bc.App, Endpoint: bc.Endpoint})
	default:
		return nil, nil, fmt.Errorf("sources[%d] (%s): scheme %s %w", job.index, job.src.Name, job.src.Scheme, errNoBackfill)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, r, nil
}

// execute runs a prepared job to its end and records the result. The error
// is the run's (also in run.Error); the run is recorded either way.
func (b *backfiller) execute(ctx context.Context, job *backfillJob) (hookwarden.BackfillRun, error) {
	l, r, err := b.client(job)
	if err == nil {
		if l != nil {
			err = b.list(ctx, job, l)
		} else {
			err = b.redeliver(ctx, job, r)
		}
	}
	run := &job.run
	// The client scrubs its own errors; this covers every other path to the
	// stored and printed error (a page's cursor, a wrapped message).
	if key, kerr := job.src.Backfill.APIKey.Resolve(); kerr == nil {
		err = backfill.Scrub(err, key)
	}
	if errors.Is(err, backfill.ErrKeyRefused) {
		err = &keyRefusedError{path: fmt.Sprintf("sources[%d].backfill.api_key", job.index), err: err}
	}
	if err != nil {
		run.Error = err.Error()
	}
	if job.refused != nil {
		msg := fmt.Sprintf("%s to %s is older than retention.claims: not backfilled (those ids may have been forgotten)",
			job.refused.From.UTC().Format(time.RFC3339), job.refused.To.UTC().Format(time.RFC3339))
		if run.Error != "" {
			msg = run.Error + "; " + msg
		}
		run.Error = msg
	}
	run.FinishedAt = b.now()
	if b.observe != nil {
		b.observe(run.Source, "failed", run.Failed)
	}
	if !run.DryRun {
		// The result is written even if ctx ended (serve stopping).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if uerr := b.store.UpdateBackfill(fctx, *run); uerr != nil {
			b.log.Error("backfill result not recorded", "source", run.Source, "run", run.ID, "err", uerr)
		}
		if job.audit != nil {
			b.auditRun(fctx, job)
		}
	}
	b.log.Info("backfill finished", "source", run.Source, "run", run.ID, "from", run.From, "to", run.To, "auto", run.Auto,
		"dry_run", run.DryRun, "recovered", run.Recovered, "requested", run.Requested, "failed", run.Failed, "error", run.Error)
	return *run, err
}

func (b *backfiller) auditRun(ctx context.Context, job *backfillJob) {
	e := *job.audit
	e.Action = "backfill"
	e.Args = auditArgs(map[string]any{"source": job.run.Source, "from": job.run.From, "to": job.run.To, "run": job.run.ID})
	e.Result = auditArgs(map[string]any{"listed": job.run.Listed, "already_claimed": job.run.AlreadyClaimed,
		"recovered": job.run.Recovered, "requested": job.run.Requested, "failed": job.run.Failed,
		"beyond_history": job.run.BeyondHistory, "error": job.run.Error})
	e.Events = job.recovered
	if _, err := b.store.Audit(ctx, e); err != nil {
		b.log.Error("backfill audit entry not recorded", "source", job.run.Source, "run", job.run.ID, "err", err)
	}
}

// toucher records a run's progress now and then.
type toucher struct {
	b    *backfiller
	job  *backfillJob
	last time.Time
}

func (t *toucher) maybe(ctx context.Context) {
	if t.job.run.DryRun || time.Since(t.last) < backfillTouch {
		return
	}
	t.last = time.Now()
	if err := t.b.store.UpdateBackfill(ctx, t.job.run); err != nil {
		t.b.log.Warn("backfill progress not recorded", "source", t.job.run.Source, "err", err)
	}
}

// list walks a Stripe or Paddle window and records each event not claimed.
func (b *backfiller) list(ctx context.Context, job *backfillJob, l backfill.Lister) error {
	run := &job.run
	remote := "backfill " + apiHost(job.src.Backfill.APIBase, job.src.Scheme)
	header := http.Header{"Content-Type": {"application/json"}}
	if run.ID != 0 {
		header.Set("Hookwarden-Backfill-Run", strconv.FormatInt(run.ID, 10))
	}
	listed, claimed, failed := 0, 0, 0
	t := &toucher{b: b, job: job, last: time.Now()}
	rep, err := l.List(ctx, run.From, run.To, func(e backfill.Event) error {
		if job.progress != nil && !e.Created.IsZero() {
			job.progress(run.To.Sub(e.Created), run.To.Sub(run.From))
		}
		rec, err := b.rc.Recovered(run.Source, header, e.Body, remote)
		if errors.Is(err, receiver.ErrNoEventID) {
			failed++
			b.log.Warn("backfilled event has no event id where the source looks for it", "source", run.Source,
				"provider_id", e.ID, "err", err)
			return nil
		}
		if err != nil {
			return err
		}
		listed++
		id := rec.Events[0].ID
		have, err := b.store.Claimed(ctx, run.Source, []string{id})
		if err != nil {
			return err
		}
		switch {
		case have[id]:
			claimed++
			b.count(run.Source, "already_claimed")
		case run.DryRun:
			run.Recovered++ // would be
		default:
			res, err := b.store.Record(ctx, rec)
			if err != nil {
				return fmt.Errorf("record %s: %w", id, err)
			}
			if res.Outcome == hookwarden.Accepted {
				run.Recovered++
				b.count(run.Source, "recovered")
				if len(job.recovered) < maxAuditEvents {
					job.recovered = append(job.recovered, hookwarden.EventKey{Source: run.Source, EventID: id})
				}
				if b.notify != nil && res.Events[0].Jobs > 0 {
					b.notify(rec.Events[0].Destinations)
				}
			} else {
				claimed++ // a live copy got there first
				b.count(run.Source, "already_claimed")
			}
		}
		run.Listed, run.AlreadyClaimed = ptr(listed), ptr(claimed) // so far
		t.maybe(ctx)
		return nil
	})
	run.Listed, run.AlreadyClaimed = ptr(rep.Listed), ptr(claimed)
	run.Failed = rep.Failed + failed
	if len(rep.FailedBy) > 0 {
		b.log.Warn("backfilled events not recorded", "source", run.Source, "run", run.ID, "reasons", rep.FailedBy)
	}
	if rep.BeyondHistory != nil {
		run.BeyondHistory = &hookwarden.Span{From: rep.BeyondHistory.From, To: rep.BeyondHistory.To}
	}
	return err
}

// redeliver asks GitHub or Svix to send the window again.
func (b *backfiller) redeliver(ctx context.Context, job *backfillJob, r backfill.Redeliverer) error {
	run := &job.run
	t := &toucher{b: b, job: job, last: time.Now()}
	rep, err := r.Redeliver(ctx, run.From, run.To, func(id string) (bool, error) {
		have, err := b.store.Claimed(ctx, run.Source, []string{id})
		t.maybe(ctx)
		return have[id], err
	})
	run.Requested, run.Failed = rep.Requested, rep.Failed
	if len(rep.FailedBy) > 0 {
		b.log.Warn("redeliveries refused", "source", run.Source, "run", run.ID, "reasons", rep.FailedBy)
	}
	if !rep.CountsUnknown {
		run.Listed, run.AlreadyClaimed = ptr(rep.Listed), ptr(rep.AlreadyClaimed)
	}
	if b.observe != nil && !run.DryRun {
		b.observe(run.Source, "requested", rep.Requested)
		b.observe(run.Source, "already_claimed", rep.AlreadyClaimed)
	}
	if rep.BeyondHistory != nil {
		run.BeyondHistory = &hookwarden.Span{From: rep.BeyondHistory.From, To: rep.BeyondHistory.To}
	}
	return err
}

func (b *backfiller) count(source, outcome string) {
	if b.observe != nil {
		b.observe(source, outcome, 1)
	}
}

func ptr(n int) *int { return &n }

// apiHost names the API a recovered receipt came from, as its remote address.
func apiHost(base, scheme string) string {
	if base != "" {
		if u, err := url.Parse(base); err == nil && u.Host != "" {
			return u.Host
		}
	}
	switch scheme {
	case "stripe":
		return "api.stripe.com"
	case "paddle":
		return "api.paddle.com"
	}
	return scheme
}

// outageWindow is the window a backfill of an outage asks for: the outage
// widened by backfillMargin on both sides, in whole seconds (the providers'
// resolution). It depends on the outage alone, so every instance that finds
// the window names it alike (the key of its one automatic run); an open
// window runs to now.
func outageWindow(o hookwarden.Outage, now time.Time) (time.Time, time.Time) {
	end := o.End
	if o.Open || end.IsZero() {
		end = now
	}
	from := o.Start.Add(-backfillMargin).UTC().Truncate(time.Second)
	to := end.Add(backfillMargin).UTC().Truncate(time.Second).Add(time.Second)
	return from, to
}
