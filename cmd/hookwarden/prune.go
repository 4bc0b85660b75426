package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
)

// retentionOf turns the configuration into the store's retention, refusing
// a claims retention the dedup promise cannot live with.
func retentionOf(cfg *config.Config) (hookwarden.Retention, error) {
	var bad []string
	for _, p := range cfg.Validate() {
		if !p.Warning && strings.HasPrefix(p.Path, "retention") {
			bad = append(bad, p.String())
		}
	}
	if len(bad) > 0 {
		return hookwarden.Retention{}, usageErrorf("refusing to prune:\n  %s", strings.Join(bad, "\n  "))
	}
	return retention(cfg), nil
}

// retention is the configuration's retention tiers.
func retention(cfg *config.Config) hookwarden.Retention {
	r := hookwarden.Retention{Payloads: cfg.Retention.Payloads.D(), Claims: cfg.Retention.Claims.D(),
		Quarantine: cfg.Retention.Quarantine.D()}
	for i := range cfg.Sources {
		if s := &cfg.Sources[i]; s.RetentionClaims > 0 {
			if r.ClaimsBySource == nil {
				r.ClaimsBySource = map[string]time.Duration{}
			}
			r.ClaimsBySource[s.Name] = s.RetentionClaims.D()
		}
	}
	return r
}

func newPruneCmd(g *globals) *cobra.Command {
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "prune [--dry-run]",
		Short: "Apply retention now: payloads of finished events, then old claims (--dry-run prints what would go)",
		Long: `Apply the two retention tiers now (serve also does it every hour):

  retention.payloads  events whose every delivery finished longer ago than
                      this are folded into their claim: the raw requests
                      (bodies and headers), jobs and attempt log go, a
                      summary stays (receipts, attempts, delivered at); the
                      claim stays, so a late duplicate is still answered
                      "duplicate", and stats keep counting what went
  retention.claims    events claimed and finished longer ago than this, with
                      their receipts, jobs and attempts (the dedup memory),
                      and the body keys of the body-replay check
  retention.quarantine  held requests nobody released whose last copy came
                      longer ago than this (released ones: after release)

Expired one-time tokens (Mailgun) always go. Dead letters and pending events are
never pruned: they are counted and listed as kept. Works in small batches; safe
while serve runs. With --db, the file must be owned by a running serve or --write
given (a forensic copy is never changed by accident); each pass is kept in the
audit log. --dry-run changes nothing and needs neither.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			cfg, err := g.optionalConfig()
			if err != nil {
				return err
			}
			if cfg == nil {
				return usageErrorf("prune needs the configuration (retention and the sources' horizons): pass --config with --db")
			}
			ret, err := retentionOf(cfg)
			if err != nil {
				return err
			}
			var s hookwarden.Store
			if dryRun { // changes nothing: no guard, and a read-only open
				s, _, err = g.openStore(ctx, true)
			} else {
				s, _, _, err = g.openWriteStore(ctx, "prune")
			}
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := s.Prune(ctx, hookwarden.PruneOptions{Retention: ret, DryRun: dryRun, Audit: cliAudit()})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSONLine(g.stdout, res)
			}
			printPrune(g, cfg, res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would go; change nothing")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return cmd
}

func printPrune(g *globals, cfg *config.Config, res hookwarden.PruneResult) {
	verb := "pruned"
	deleted := "deleted"
	if res.DryRun {
		verb, deleted = "would prune", "would delete"
	}
	w := g.stdout
	if res.ClaimCutoff.IsZero() && res.ClaimWalkCutoff().IsZero() {
		fmt.Fprintln(w, "claims: retention.claims is off; nothing deleted")
	} else if res.ClaimCutoff.IsZero() {
		fmt.Fprintf(w, "claims:   %s %s of the sources with their own retention_claims (retention.claims is off)\n",
			deleted, plural(res.EventsDeleted, "event", "events"))
	} else {
		fmt.Fprintf(w, "claims:   %s %s claimed and finished before %s (retention.claims %s)",
			deleted, plural(res.EventsDeleted, "event", "events"), fmtUTC(res.ClaimCutoff), cfg.Retention.Claims)
		if !res.DryRun && res.EventsDeleted > 0 {
			fmt.Fprintf(w, ", with %s, %s and %s", plural(res.ReceiptsDeleted, "receipt", "receipts"),
				plural(res.JobsDeleted, "job", "jobs"), plural(res.AttemptsDeleted, "attempt", "attempts"))
		}
		fmt.Fprintln(w)
	}
	for _, s := range cfg.Sources {
		if s.RetentionClaims > 0 {
			fmt.Fprintf(w, "          source %s: claims before %s (its retention_claims %s)\n", s.Name,
				fmtUTC(res.ClaimCutoffs()[s.Name]), s.RetentionClaims)
		}
	}
	if !res.QuarantineCutoff.IsZero() {
		fmt.Fprintf(w, "quarantine: %s %s held since before %s (retention.quarantine %s)\n", deleted,
			plural(res.QuarantineDeleted, "request", "requests"), fmtUTC(res.QuarantineCutoff), cfg.Retention.Quarantine)
	}
	if res.PayloadCutoff.IsZero() {
		fmt.Fprintln(w, "payloads: retention.payloads is off; nothing pruned")
		return
	}
	fmt.Fprintf(w, "payloads: %s %s finished before %s (retention.payloads %s): %s of bodies",
		verb, plural(res.PayloadsPruned, "event", "events"), fmtUTC(res.PayloadCutoff), cfg.Retention.Payloads, fmtBytes(res.PayloadBytes))
	if !res.DryRun && res.PayloadReceipts+res.PayloadJobs > 0 {
		fmt.Fprintf(w, "; %s, %s and %s folded into their claims", plural(res.PayloadReceipts, "receipt", "receipts"),
			plural(res.PayloadJobs, "job", "jobs"), plural(res.PayloadAttempts, "attempt", "attempts"))
	}
	fmt.Fprintln(w)
	if res.HeldDead+res.HeldPending+res.HeldQuarantined > 0 {
		fmt.Fprintf(w, "kept on purpose, older than retention.payloads: %s with dead letters, %s still pending, %s\n"+
			"  (resolve them: hookwarden dead list / replay; hookwarden quarantine list / release)\n",
			plural(res.HeldDead, "event", "events"), plural(res.HeldPending, "event", "events"),
			plural(res.HeldQuarantined, "quarantined request", "quarantined requests"))
	}
}

// currentConfig is the running configuration; Reload swaps it under reloadMu.
func (a *App) currentConfig() *config.Config {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	return a.cfg
}
