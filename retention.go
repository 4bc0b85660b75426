package hookwarden

// Retention (docs/reference.md, "Configuration"): the tiers, a pruning pass's options and result.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Retention is the tiers of the retention keys. A zero or negative duration
// disables its tier (keep forever).
type Retention struct {
	// Payloads: the raw requests of finished events. An event claimed, and
	// delivered to every destination, longer ago than this is folded into
	// its claim: its receipts (bodies and headers), jobs and attempts are
	// deleted and a summary stays on the events row (receipt count, last
	// received, jobs, attempts, delivered at, pruned at). The claim stays, so
	// a late duplicate is still a duplicate, and the counts of stats survive
	// in pruned_totals.
	Payloads time.Duration
	// Claims: the event ids, the dedup memory. An event goes with whatever
	// is left of its receipts, jobs and attempts when it was claimed, and
	// every job was delivered, longer ago than this. The body keys (the
	// body-replay check) go with this tier, by the time they were claimed.
	Claims time.Duration
	// Quarantine: held requests nobody released go when their last copy
	// came longer ago than this; released ones this long after release.
	Quarantine time.Duration
	// ClaimsBySource are the sources' own claims retentions
	// (retention_claims), in place of Claims for their events: shorter
	// (Telegram's 7 days) or longer. Zero or negative: kept forever.
	ClaimsBySource map[string]time.Duration
}

// PruneOptions tune Prune.
type PruneOptions struct {
	Retention
	// DryRun counts what would go and changes nothing.
	DryRun bool
	// BatchSize is how many events or receipts one write transaction handles
	// (default 200): pruning never holds the writer for long.
	BatchSize int
	// Pause is waited between batches (default 5ms), so ingest always gets
	// the writer in between.
	Pause time.Duration
	// Audit, if set, records this pass as an operator action (the CLI's
	// prune; serve's hourly pass is not one). A pass is many short
	// transactions, so the entry is written before the first and given its
	// result after the last: an entry without a result is a pass that was
	// interrupted. A dry run writes none.
	Audit *AuditEntry
}

// PruneResult says what retention removed (or, with DryRun, would remove) and
// what it kept on purpose.
type PruneResult struct {
	DryRun        bool      `json:"dry_run"`
	PayloadCutoff time.Time `json:"payload_cutoff,omitzero"`
	ClaimCutoff   time.Time `json:"claim_cutoff,omitzero"`
	// claimCutoffs are the cutoffs of the sources with their own claims
	// retention (Retention.ClaimsBySource; zero: kept forever); ClaimCutoff
	// is every other source's. A pointer keeps the result comparable.
	claimCutoffs *map[string]time.Time

	// PayloadsPruned counts the events the payload tier folded into their
	// claim; PayloadBytes the request bodies deleted with them.
	PayloadsPruned int   `json:"payloads_pruned"`
	PayloadBytes   int64 `json:"payload_bytes"`
	// Receipts (late duplicates of pruned events included), jobs and
	// attempts the payload tier deleted (not in a dry run).
	PayloadReceipts int `json:"payload_receipts_deleted,omitempty"`
	PayloadJobs     int `json:"payload_jobs_deleted,omitempty"`
	PayloadAttempts int `json:"payload_attempts_deleted,omitempty"`

	EventsDeleted int `json:"events_deleted"` // claims removed
	// Receipts, jobs and attempts deleted with those claims (not in a dry run).
	ReceiptsDeleted int `json:"receipts_deleted"`
	JobsDeleted     int `json:"jobs_deleted"`
	AttemptsDeleted int `json:"attempts_deleted"`
	// BodyKeysDeleted counts body keys gone with the claims tier.
	BodyKeysDeleted int `json:"body_keys_deleted"`

	QuarantineCutoff time.Time `json:"quarantine_cutoff,omitzero"`
	// QuarantineDeleted counts held requests removed by retention.quarantine.
	QuarantineDeleted int `json:"quarantine_deleted"`
	// TokensDeleted counts expired one-time tokens (Mailgun) removed.
	TokensDeleted int `json:"tokens_deleted"`

	// Held past retention.payloads and never pruned automatically: events
	// with a dead letter, events still pending, quarantined requests (until
	// retention.quarantine). They need a human (replay, quarantine release).
	HeldDead        int `json:"held_dead"`
	HeldPending     int `json:"held_pending"`
	HeldQuarantined int `json:"held_quarantined"`

	// AuditID is the audit log entry of the pass (0: none written).
	AuditID int64 `json:"audit_id,omitempty"`
}

// ClaimWalkCutoff is the latest of the claims cutoffs: the claims tier
// walks the events claimed before it, and deletes each by its source's
// cutoff (ClaimCutoffFor). Zero: no claim goes.
func (r *PruneResult) ClaimWalkCutoff() time.Time {
	at := r.ClaimCutoff
	for _, c := range r.ClaimCutoffs() {
		if c.After(at) {
			at = c
		}
	}
	return at
}

// ClaimCutoffs are the cutoffs of the sources with their own claims
// retention (zero: kept forever); every other source's is ClaimCutoff.
func (r *PruneResult) ClaimCutoffs() map[string]time.Time {
	if r.claimCutoffs == nil {
		return nil
	}
	return *r.claimCutoffs
}

// PruneTier is one tier of a store's prune pass: it applies opt (defaults
// filled in) to what res's cutoffs say and adds what it did to res.
type PruneTier func(ctx context.Context, opt PruneOptions, res *PruneResult) error

// PruneSteps are a store's parts of a prune pass, run by PrunePass.
type PruneSteps struct {
	// Audit writes the pass's entry before its first batch.
	Audit                                          func(ctx context.Context, e AuditEntry) (int64, error)
	Claims, BodyKeys, Hourly, Quarantine, Payloads PruneTier
	Tokens                                         func(ctx context.Context, opt PruneOptions, now time.Time, res *PruneResult) error
	CountHeld                                      func(ctx context.Context, res *PruneResult) error
	// Minutes deletes the counts per minute from before its cutoff (now less
	// MinuteCountsKeep), on every pass that is not a dry run, whatever the
	// retention: they serve the recent windows only.
	Minutes func(ctx context.Context, before time.Time) error
	// Tidy, if set, runs after the tiers on a pass that is not a dry run:
	// the store's own housekeeping (pgstore folds the count rows of server
	// processes that are gone).
	Tidy func(ctx context.Context) error
	// AuditResult gives the entry (id) the pass's result after its last batch.
	AuditResult func(ctx context.Context, id int64, res PruneResult) error
}

// PrunePass is a prune pass at now (the store's clock), the same in every
// store: the cutoffs of opt, the audit entry first (none in a dry run),
// then the claims tier with the body keys and hourly counts it leaves
// behind, held requests, one-time tokens, then payloads and what they must
// keep (held), and the entry's result last.
func PrunePass(ctx context.Context, opt PruneOptions, now time.Time, st PruneSteps) (PruneResult, error) {
	res := PruneResult{DryRun: opt.DryRun}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 200
	}
	if opt.Pause <= 0 {
		opt.Pause = 5 * time.Millisecond
	}
	if opt.Claims > 0 {
		res.ClaimCutoff = now.Add(-opt.Claims).UTC()
	}
	if len(opt.ClaimsBySource) > 0 {
		cuts := make(map[string]time.Time, len(opt.ClaimsBySource))
		for src, d := range opt.ClaimsBySource {
			if d > 0 {
				cuts[src] = now.Add(-d).UTC()
			} else {
				cuts[src] = time.Time{} // forever: the zero cutoff deletes nothing
			}
		}
		res.claimCutoffs = &cuts
	}
	if opt.Payloads > 0 {
		res.PayloadCutoff = now.Add(-opt.Payloads).UTC()
	}
	if opt.Quarantine > 0 {
		res.QuarantineCutoff = now.Add(-opt.Quarantine).UTC()
	}
	if opt.Audit != nil && !opt.DryRun {
		e := *opt.Audit
		if e.Action == "" {
			e.Action = "prune"
		}
		if e.Args == nil {
			e.Args, _ = json.Marshal(map[string]string{"payloads": opt.Payloads.String(), "claims": opt.Claims.String()})
		}
		id, err := st.Audit(ctx, e)
		if err != nil {
			return res, err
		}
		res.AuditID = id
	}
	var tiers []PruneTier
	if !res.ClaimCutoff.IsZero() {
		tiers = append(tiers, st.Claims, st.BodyKeys, st.Hourly)
	} else if !res.ClaimWalkCutoff().IsZero() {
		tiers = append(tiers, st.Claims) // only some sources' claims go
	}
	if !res.QuarantineCutoff.IsZero() {
		tiers = append(tiers, st.Quarantine)
	}
	tiers = append(tiers, func(ctx context.Context, opt PruneOptions, res *PruneResult) error {
		return st.Tokens(ctx, opt, now, res)
	})
	if !res.PayloadCutoff.IsZero() {
		tiers = append(tiers, st.Payloads, func(ctx context.Context, _ PruneOptions, res *PruneResult) error {
			return st.CountHeld(ctx, res)
		})
	}
	for _, tier := range tiers {
		if err := tier(ctx, opt, &res); err != nil {
			return res, err
		}
	}
	if st.Minutes != nil && !opt.DryRun {
		if err := st.Minutes(ctx, now.Add(-MinuteCountsKeep)); err != nil {
			return res, fmt.Errorf("prune the counts per minute: %w", err)
		}
	}
	if st.Tidy != nil && !opt.DryRun {
		if err := st.Tidy(ctx); err != nil {
			return res, err
		}
	}
	if res.AuditID != 0 {
		if err := st.AuditResult(ctx, res.AuditID, res); err != nil {
			return res, fmt.Errorf("prune: %w", err)
		}
	}
	return res, nil
}
