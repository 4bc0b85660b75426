package hookwarden

// Backfill runs (hookwarden backfill, POST /api/backfill, auto) and the
// recovery of each gap window (docs/backfill.md).

import (
	"context"
	"errors"
	"slices"
	"time"
)

// BackfillLog keeps the backfill runs with their window, so that gaps can
// say of every window whether it was recovered, and so that an automatic
// backfill of a window runs once, on one instance.
type BackfillLog interface {
	// StartBackfill records a run starting and returns its id. It fails
	// with ErrBackfillRunning while another run of the source is running
	// (not finished, touched within BackfillStale), and, for an Auto run,
	// with ErrBackfillDone when an automatic run of the same source and
	// window was recorded before (by this instance or another).
	StartBackfill(ctx context.Context, run BackfillRun) (int64, error)
	// UpdateBackfill writes the run's counts so far (or, with Finished
	// set, its result) and touches it, so it is not taken for abandoned.
	UpdateBackfill(ctx context.Context, run BackfillRun) error
	// BackfillRuns lists the runs of the given sources (all when empty)
	// whose window ends at or after since, oldest first.
	BackfillRuns(ctx context.Context, sources []string, since time.Time) ([]BackfillRun, error)
	// Claimed reports which of the event ids of source are claimed.
	Claimed(ctx context.Context, source string, eventIDs []string) (map[string]bool, error)
}

// BackfillStale is how long a run not finished may go untouched before it
// counts as abandoned (its process died): a new run of the source may then
// start. Runners touch their run every few seconds while events come
// (UpdateBackfill); the longest silence of a live run is one request's
// retries (a 2-minute Retry-After, a 60-second timeout, backoff), well
// below this.
const BackfillStale = 5 * time.Minute

var (
	// ErrBackfillRunning: a run of the source is running (409).
	ErrBackfillRunning = errors.New("a backfill of this source is running")
	// ErrBackfillDone: this window was backfilled automatically before.
	ErrBackfillDone = errors.New("window already backfilled automatically")
)

// BackfillRun is one backfill of one window of one source, as kept in the
// store (table backfill_runs).
type BackfillRun struct {
	ID     int64     `json:"id"`
	Source string    `json:"source"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	// Auto: started by serve for an outage window it found (auto: true);
	// else Origin and Actor say who asked (an AuditEntry's).
	Auto   bool   `json:"auto"`
	Origin string `json:"origin,omitempty"`
	Actor  string `json:"actor,omitempty"`
	DryRun bool   `json:"dry_run"`
	// Method is "list" (Stripe, Paddle: the events are recorded here) or
	// "redeliver" (GitHub, Svix: the provider sends them again).
	Method     string    `json:"method"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	BackfillCounts
}

// Finished reports whether the run ended (well or not).
func (r BackfillRun) Finished() bool { return !r.FinishedAt.IsZero() }

// BackfillCounts are what a run saw and did, as `backfill --json`, gaps and
// the API show them. Listed and AlreadyClaimed are nil when the provider
// does not say (Svix recover works in the background).
type BackfillCounts struct {
	Listed         *int `json:"listed"`
	AlreadyClaimed *int `json:"already_claimed"`
	Recovered      int  `json:"recovered"`
	Requested      int  `json:"requested"`
	Failed         int  `json:"failed"`
	// BeyondHistory is the part of the window the provider no longer keeps
	// (or that retention.claims refuses), nil when none.
	BeyondHistory *Span  `json:"beyond_history"`
	Error         string `json:"error"`
}

// Span is a window of time.
type Span struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Recovery values of a gap window's source (SourceRecovery.Recovery).
const (
	// RecoveryRecovered: a backfill listed the window and recorded what was missing.
	RecoveryRecovered = "recovered"
	// RecoveryRequested: a backfill asked the provider to send the window again.
	RecoveryRequested = "requested"
	// RecoveryRecoverable: the source has backfill: and the window is
	// within the provider's history; no complete run covers it yet.
	RecoveryRecoverable = "recoverable"
	// RecoveryRetried: within the provider's retry horizon: its retries cover it.
	RecoveryRetried = "retried_by_provider"
	// RecoveryLost: beyond the retry horizon and beyond recovery ("lost for good").
	RecoveryLost = "lost"
)

// SourceRecovery is what became of one source's events in a gap window.
type SourceRecovery struct {
	Source   string `json:"source"`
	Recovery string `json:"recovery"`
	// Backfill is the last run over the window (nil: none).
	Backfill *BackfillRun `json:"backfill"`
	// For a source with an event_time (late.go): how many events from
	// inside the window arrived after it, the last of them and the longest
	// lag in seconds (nil without event_time; the last two nil when none).
	RecoveredByRetries *int64     `json:"recovered_by_retries,omitempty"`
	LastLateArrival    *time.Time `json:"last_late_arrival,omitempty"`
	MaxLag             *float64   `json:"max_lag,omitempty"`
}

// BackfillPolicy is what recovery needs of a source's backfill: settings.
type BackfillPolicy struct {
	// Method: "list" or "redeliver" ("" when the source has no backfill:).
	Method string
	// History is how far back the provider keeps (0: unknown, no limit known).
	History time.Duration
}

// GapLog is what gaps with recovery reads.
type GapLog interface {
	Gaps(ctx context.Context, opt GapOptions) (GapReport, error)
	BackfillRuns(ctx context.Context, sources []string, since time.Time) ([]BackfillRun, error)
}

// GapsWithRecovery is Gaps with every window's recovery per source.
func GapsWithRecovery(ctx context.Context, s GapLog, opt GapOptions) (GapReport, error) {
	rep, err := s.Gaps(ctx, opt)
	if err != nil {
		return rep, err
	}
	if err := AddSequenceHoles(ctx, s, &rep, opt); err != nil {
		return rep, err
	}
	if len(opt.Sources) == 0 {
		return rep, nil
	}
	var since time.Time
	for _, o := range rep.Outages {
		if since.IsZero() || o.Start.Before(since) {
			since = o.Start
		}
	}
	for _, si := range rep.Silences {
		if since.IsZero() || si.Start.Before(since) {
			since = si.Start
		}
	}
	if since.IsZero() {
		return rep, nil
	}
	names := make([]string, 0, len(opt.Sources))
	for _, p := range opt.Sources {
		names = append(names, p.Name)
	}
	runs, err := s.BackfillRuns(ctx, names, since)
	if err != nil {
		return rep, err
	}
	AnnotateRecovery(&rep, opt.Sources, runs)
	return rep, AddLateArrivals(ctx, s, &rep, opt)
}

// AnnotateRecovery fills each outage's Sources (one entry per source; none
// for a restart, which missed nothing) and each silence's.
func AnnotateRecovery(rep *GapReport, sources []SourcePolicy, runs []BackfillRun) {
	for i := range rep.Outages {
		o := &rep.Outages[i]
		if o.Kind == "restart" {
			continue
		}
		end := o.End
		if o.Open || end.IsZero() {
			end = rep.Now
		}
		o.Sources = make([]SourceRecovery, 0, len(sources))
		for _, p := range sources {
			if o.Kind == "unavailable" && p.Name != o.Source {
				continue // the others were served
			}
			beyond := slices.Contains(o.BeyondRetryHorizon, p.Name)
			o.Sources = append(o.Sources, Recover(p, o.Start, end, beyond, rep.Now, runs))
		}
	}
	byName := map[string]SourcePolicy{}
	for _, p := range sources {
		byName[p.Name] = p
	}
	for i := range rep.Silences {
		si := &rep.Silences[i]
		p, ok := byName[si.Source]
		if !ok {
			continue
		}
		end := si.End
		if si.Open || end.IsZero() {
			end = rep.Now
		}
		r := Recover(p, si.Start, end, si.BeyondRetryHorizon, rep.Now, runs)
		si.Recovery, si.Backfill = r.Recovery, r.Backfill
	}
}

// Recover says what became of source p's events in the window [from, to]:
// recovered or requested when a complete run (not a dry run, no error,
// nothing beyond history) covers it, else recoverable when the source has
// backfill: and the window reaches into the provider's history, else
// retried_by_provider within the retry horizon (beyond: it is not), else
// lost. Backfill is the last run that overlaps the window.
func Recover(p SourcePolicy, from, to time.Time, beyond bool, now time.Time, runs []BackfillRun) SourceRecovery {
	r := SourceRecovery{Source: p.Name}
	covered := ""
	for i := range runs {
		run := &runs[i]
		if run.Source != p.Name || run.From.After(to) || run.To.Before(from) {
			continue
		}
		rc := *run
		r.Backfill = &rc
		if run.Finished() && !run.DryRun && run.Error == "" && run.BeyondHistory == nil &&
			!run.From.After(from) && !run.To.Before(to) {
			covered = RecoveryRecovered
			if run.Method == "redeliver" {
				covered = RecoveryRequested
			}
		}
	}
	switch {
	case covered != "":
		r.Recovery = covered
	case p.Backfill.Method != "" && (p.Backfill.History <= 0 || !to.Before(now.Add(-p.Backfill.History))):
		r.Recovery = RecoveryRecoverable
	case !beyond:
		r.Recovery = RecoveryRetried
	default:
		r.Recovery = RecoveryLost
	}
	return r
}
