package hookwarden

// Replay: what an operator selects to deliver again, and what the store did.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ForceAfter is how many times a job may be dead-lettered before a replay
// needs Force: an event the app refused three times is likely poison, and
// replaying it again by habit only adds noise.
const ForceAfter = 3

// DefaultReplayBatch is how many jobs one replay transaction resets. Small
// enough that the writer is never held for long: ingest keeps its latency.
const DefaultReplayBatch = 500

// ReplaySelector says which jobs to replay: the jobs of the named events, or
// (Dead) every dead letter matching the filters, or the jobs by id.
type ReplaySelector struct {
	Source   string
	EventIDs []string // with Source: these events' jobs (dead, delivered, or pending and idle)
	Dead     bool     // every dead letter matching Source, Destination and Since
	JobIDs   []int64  // these jobs (the dashboard's replay button)
	// Destination keeps only jobs of that destination ("source/name").
	Destination string
	// Since keeps only dead letters that died at or after it (Dead only).
	Since time.Time
}

// ReplayOptions tune a replay.
type ReplayOptions struct {
	// Force replays jobs dead-lettered ForceAfter times or more.
	Force bool
	// BatchSize is the number of jobs per write transaction (default DefaultReplayBatch).
	BatchSize int
	// Pause is waited between batches so that a huge replay leaves room to
	// ingest; default 5ms.
	Pause time.Duration
	// Progress, if set, is called after each batch with the jobs handled so
	// far and the total.
	Progress func(done, total int)
	// Audit, if set, is the operator action to record (Origin, Actor; Action
	// and Args are filled in when empty). It is written in the transaction
	// of the first batch that resets a job, linked to the events replayed,
	// and its result kept current by every later batch. A replay that
	// resets nothing changes nothing and writes no entry.
	Audit *AuditEntry
}

// Skip reasons of a replay.
const (
	SkipNeedsForce = "needs_force"    // dead-lettered ForceAfter times or more
	SkipPruned     = "payload_pruned" // retention removed the body: nothing to deliver
	SkipInFlight   = "in_flight"      // an attempt holds the job's lease
	SkipNotFound   = "not_found"      // no such event or job
	SkipNoJobs     = "no_jobs"        // the event has no job (of that destination): nothing to deliver
)

// ReplaySkip is a job (or event) a replay left alone, and why.
type ReplaySkip struct {
	JobID       int64     `json:"job_id,omitempty"`
	Source      string    `json:"source"`
	EventID     string    `json:"event_id"`
	Destination string    `json:"destination,omitempty"`
	Reason      string    `json:"reason"`
	DeadCount   int       `json:"dead_count,omitempty"`
	PrunedAt    time.Time `json:"pruned_at,omitzero"`
}

func (k ReplaySkip) String() string {
	what := k.Source + "/" + k.EventID
	if k.Destination != "" {
		what += " -> " + k.Destination
	}
	switch k.Reason {
	case SkipNeedsForce:
		return fmt.Sprintf("%s: dead-lettered %d times; the app keeps refusing it: replay with --force if it is fixed", what, k.DeadCount)
	case SkipPruned:
		at := ""
		if !k.PrunedAt.IsZero() {
			at = " on " + k.PrunedAt.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s: its payload was pruned%s (retention.payloads); there is nothing left to deliver", what, at)
	case SkipInFlight:
		return what + ": an attempt is in flight; it finishes (or is retried) on its own"
	case SkipNotFound:
		if k.JobID != 0 && k.EventID == "" {
			return fmt.Sprintf("job %d: no such job", k.JobID)
		}
		return what + ": no such event"
	case SkipNoJobs:
		return what + ": it has no delivery job to replay (no destination matched it)"
	}
	return what + ": " + k.Reason
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	Selected int          `json:"selected"` // jobs the selector matched
	Replayed int          `json:"replayed"` // reset to pending, due now
	Skipped  []ReplaySkip `json:"skipped,omitempty"`
	// Destinations lists the destinations of replayed jobs (to wake workers).
	Destinations []string `json:"destinations,omitempty"`
	// AuditID is the audit log entry of the replay (0: none written).
	AuditID int64 `json:"audit_id,omitempty"`
}

// ReplayAuditArgs is how the audit log records a replay's arguments, the
// same in every store.
type ReplayAuditArgs struct {
	Source      string   `json:"source,omitempty"`
	EventIDs    []string `json:"event_ids,omitempty"`
	Dead        bool     `json:"dead,omitempty"`
	JobIDs      []int64  `json:"job_ids,omitempty"`
	Destination string   `json:"destination,omitempty"`
	Since       string   `json:"since,omitempty"` // UTC, microseconds
	Force       bool     `json:"force,omitempty"`
}

// ReplayAuditArgsOf is the audit log's record of a replay of sel.
func ReplayAuditArgsOf(sel ReplaySelector, force bool) json.RawMessage {
	a := ReplayAuditArgs{Source: sel.Source, EventIDs: sel.EventIDs, Dead: sel.Dead, JobIDs: sel.JobIDs,
		Destination: sel.Destination, Force: force}
	if !sel.Since.IsZero() {
		a.Since = sel.Since.UTC().Format("2006-01-02T15:04:05.000000Z")
	}
	b, _ := json.Marshal(a)
	return b
}

// ReplayAuditResult is what a replay's audit entry says it did so far: every
// batch that resets jobs brings it up to date in its own transaction.
type ReplayAuditResult struct {
	Selected int `json:"selected"`
	Replayed int `json:"replayed"`
	Skipped  int `json:"skipped"`
}

// ReplayBatch resets one batch of jobs (ids) in one transaction, checking
// every rule there, and writes or brings up to date the replay's audit
// entry (audit, nil for none; audit.ID is 0 until a batch wrote it and is
// set by the batch that does); sofar is the result before this batch. It
// returns the jobs it reset, those it left and the destinations touched.
type ReplayBatch func(ctx context.Context, ids []int64, force bool, audit *AuditEntry, sofar ReplayResult) (n int, skipped []ReplaySkip, dests []string, err error)

// ReplayInBatches replays the selected jobs (ids, as the store selected
// them for sel; res holds what the selection already skipped) in batches of
// opt.BatchSize, through batch, the same in every store: opt's defaults,
// the audit entry prepared once, a pause between batches, progress after
// each, and every destination touched listed once.
func ReplayInBatches(ctx context.Context, ids []int64, sel ReplaySelector, opt ReplayOptions, res ReplayResult, batch ReplayBatch) (ReplayResult, error) {
	res.Selected = len(ids)
	if opt.BatchSize <= 0 {
		opt.BatchSize = DefaultReplayBatch
	}
	if opt.Pause <= 0 {
		opt.Pause = 5 * time.Millisecond
	}
	var audit *AuditEntry
	if opt.Audit != nil {
		e := *opt.Audit
		if e.Action == "" {
			e.Action = "replay"
		}
		if e.Args == nil {
			e.Args = ReplayAuditArgsOf(sel, opt.Force)
		}
		if err := e.Check(); err != nil {
			return res, err
		}
		audit = &e
	}
	seen := map[string]bool{}
	for done := 0; done < len(ids); {
		if done > 0 {
			if err := Pause(ctx, opt.Pause); err != nil {
				return res, err
			}
		}
		part := ids[done:min(done+opt.BatchSize, len(ids))]
		n, skipped, touched, err := batch(ctx, part, opt.Force, audit, res)
		if err != nil {
			return res, fmt.Errorf("replay: %w", err)
		}
		res.Replayed += n
		res.Skipped = append(res.Skipped, skipped...)
		if audit != nil {
			res.AuditID = audit.ID
		}
		for _, d := range touched {
			if !seen[d] {
				seen[d] = true
				res.Destinations = append(res.Destinations, d)
			}
		}
		done += len(part)
		if opt.Progress != nil {
			opt.Progress(done, len(ids))
		}
	}
	return res, nil
}

// Pause waits d, or until ctx is done (its error then): the breath a batch
// loop (replay, prune, quarantine retention) takes between two batches so
// that ingest has the store between them.
func Pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
