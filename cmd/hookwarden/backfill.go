package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/receiver"
)

func newBackfillCmd(g *globals) *cobra.Command {
	var since, fromS, toS string
	var dryRun, asJSON, status bool
	cmd := &cobra.Command{
		Use:   "backfill SOURCE [--since DUR | --from RFC3339 --to RFC3339] [--dry-run] | backfill SOURCE --status",
		Short: "Recover what an outage missed from the provider's API (Stripe, Paddle, GitHub, Svix)",
		Long: `Ask the provider of SOURCE (its backfill: settings) for the events of a window
and recover the ones not claimed here (docs/backfill.md):

  stripe, paddle   list the window's events and record each one not claimed as a
                   receipt of kind backfill: its jobs deliver it to the app with the
                   same Idempotency-Key as a live copy
  github           ask GitHub to redeliver each delivery of the window not claimed;
                   the redelivery arrives signed through the receiver (serve must run)
  standard (Svix)  ask Svix to resend the window's failed messages (counts unknown)

With no window flag, every outage window of the source that is still recoverable
(gaps). The part of a window older than retention.claims is refused: those ids may
have been forgotten. Running it twice recovers nothing the second time.

Exit 0 when every page was read; 1 when a page failed or part of a window is
beyond the provider's history; 2 when the provider refuses the key (the message
names sources[N].backfill.api_key) or the source has no backfill:. With --db, the
file must be owned by a running serve, or --write must be given.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			source := args[0]
			if cfg, err := g.config(); err != nil {
				return err
			} else if status {
				return backfillStatus(cmd.Context(), g, cfg, source, asJSON)
			} else if i, ok := sourceIndex(cfg, source); ok && cfg.Sources[i].Backfill != nil && config.BackfillMethod(cfg.Sources[i].Scheme) == "" {
				return usageErrorf("backfill: sources[%d] (%s): scheme %s keeps no history to recover from; "+
					"backfill %s --status shows what it still holds", i, source, cfg.Sources[i].Scheme, source)
			}
			now := time.Now()
			windows, err := windowFlags(since, fromS, toS, now)
			if err != nil {
				return err
			}
			if _, err := g.config(); err != nil { // a valid configuration, or exit 2
				return err
			}
			ctx := cmd.Context()
			s, cfg, target, err := g.openWriteStore(ctx, "backfill")
			if err != nil {
				return err
			}
			defer s.Close()
			i, ok := sourceIndex(cfg, source)
			if !ok {
				return usageErrorf("backfill: no source %q in the configuration", source)
			}
			if cfg.Sources[i].Backfill == nil {
				return usageErrorf("backfill: sources[%d] (%s) %v", i, source, errNoBackfill)
			}
			if windows == nil {
				if windows, err = recoverableWindows(ctx, s, cfg, source, now); err != nil {
					return err
				}
				if len(windows) == 0 {
					fmt.Fprintf(g.stderr, "no recoverable outage window of %s: nothing to backfill (see gaps)\n", source)
					return nil
				}
			}
			if !target.Served && config.BackfillMethod(cfg.Sources[i].Scheme) == "redeliver" && !dryRun {
				fmt.Fprintf(g.stderr, "warning: no serve owns %s: the redeliveries %s sends arrive at %s only while one runs\n",
					target.Path, cfg.Sources[i].Scheme, cfg.Listen)
			}
			b, closeB, err := newCommandBackfiller(cfg, s, g)
			if err != nil {
				return err
			}
			defer closeB()
			return runBackfills(ctx, g, b, source, windows, dryRun, asJSON)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&since, "since", "", "the window from this long ago to now (90m, 2d)")
	fl.StringVar(&fromS, "from", "", "start of the window (RFC 3339, with --to)")
	fl.StringVar(&toS, "to", "", "end of the window (RFC 3339, with --from)")
	fl.BoolVar(&dryRun, "dry-run", false, "list and count what would be recovered or requested; change nothing")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per window")
	fl.BoolVar(&status, "status", false, "show what the platform itself reports as not delivered (telegram: getWebhookInfo); recover nothing")
	return cmd
}

// windowFlags reads --since or --from/--to; nil: no window flag.
func windowFlags(since, fromS, toS string, now time.Time) ([]hookwarden.Span, error) {
	switch {
	case since != "" && (fromS != "" || toS != ""):
		return nil, usageErrorf("backfill: --since or --from/--to, not both")
	case since != "":
		from, err := sinceFlag(since, now)
		if err != nil {
			return nil, err
		}
		return []hookwarden.Span{{From: from, To: now}}, nil
	case fromS != "" || toS != "":
		if fromS == "" || toS == "" {
			return nil, usageErrorf("backfill: --from and --to go together")
		}
		from, err := time.Parse(time.RFC3339, fromS)
		if err != nil {
			return nil, usageErrorf("backfill: --from: want RFC 3339 (2026-05-01T10:00:00Z): %v", err)
		}
		to, err := time.Parse(time.RFC3339, toS)
		if err != nil {
			return nil, usageErrorf("backfill: --to: want RFC 3339 (2026-05-01T12:00:00Z): %v", err)
		}
		if !from.Before(to) {
			return nil, usageErrorf("backfill: --from %s is not before --to %s", fromS, toS)
		}
		return []hookwarden.Span{{From: from, To: to}}, nil
	}
	return nil, nil
}

// recoverableWindows are the outage windows gaps calls recoverable for the source.
func recoverableWindows(ctx context.Context, s hookwarden.Store, cfg *config.Config, source string, now time.Time) ([]hookwarden.Span, error) {
	rep, err := hookwarden.GapsWithRecovery(ctx, s, hookwarden.GapOptions{MinClean: defaultMinClean, Stale: gapStale,
		Sources: sourcePolicies(cfg)})
	if err != nil {
		return nil, err
	}
	var out []hookwarden.Span
	for _, o := range rep.Outages {
		for _, r := range o.Sources {
			if r.Source == source && r.Recovery == hookwarden.RecoveryRecoverable {
				from, to := outageWindow(o, now)
				out = append(out, hookwarden.Span{From: from, To: to})
			}
		}
	}
	return out, nil
}

// newCommandBackfiller is the runner of the command: the configured
// sources' extraction, no metrics, no workers to wake (serve polls).
func newCommandBackfiller(cfg *config.Config, s hookwarden.Store, g *globals) (*backfiller, func(), error) {
	sources, _, closers, err := buildPipeline(cfg)
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rc := receiver.New(sources, receiver.Options{Recorder: s, RedactHeaders: cfg.RedactHeaders, Logger: log})
	return &backfiller{cfg: func() *config.Config { return cfg }, store: s, rc: rc, log: log, now: time.Now}, closeAll, nil
}

// backfillLine is one window's result as `backfill --json` prints it.
type backfillLine struct {
	Source string    `json:"source"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	DryRun bool      `json:"dry_run"`
	hookwarden.BackfillCounts
	Error *string `json:"error"`
}

// runBackfills runs each window in turn and maps the results to the exit code.
func runBackfills(ctx context.Context, g *globals, b *backfiller, source string, windows []hookwarden.Span, dryRun, asJSON bool) error {
	var failed, refused error
	for _, w := range windows {
		job, err := b.prepare(ctx, source, w.From, w.To, dryRun, false, cliAudit())
		if err != nil {
			var nr *runNotRecordedError
			switch {
			case errors.As(err, &nr):
				return fmt.Errorf("backfill %s: %w", source, err)
			case errors.Is(err, errNothingToDo):
				fmt.Fprintf(g.stderr, "backfill %s: %v: skipped\n", source, err)
				failed = err
				continue
			case errors.Is(err, hookwarden.ErrBackfillRunning):
				return fmt.Errorf("backfill %s: %w (serve, the API or another command): try again when it ends", source, err)
			}
			return &usageError{err}
		}
		bar := newProgress(g.stderr, "backfill "+source)
		if bar.tty {
			job.progress = func(done, total time.Duration) {
				bar.update(int64(done/time.Second), int64(total/time.Second), "s of the window")
			}
		}
		run, err := b.execute(ctx, job)
		bar.finish()
		var kr *keyRefusedError
		switch {
		case errors.As(err, &kr):
			refused = err
		case err != nil || run.BeyondHistory != nil || job.refused != nil:
			failed = errors.New("backfill: not every part of the window was read (see above)")
		}
		if asJSON {
			line := backfillLine{Source: run.Source, From: run.From, To: run.To, DryRun: run.DryRun, BackfillCounts: run.BackfillCounts}
			if run.Error != "" {
				line.Error = &run.Error
			}
			if err := writeJSONLine(g.stdout, line); err != nil {
				return err
			}
		} else {
			printBackfill(g, run)
		}
		if refused != nil {
			break // the next window would be refused too
		}
	}
	if refused != nil {
		return &usageError{refused}
	}
	return failed
}

func printBackfill(g *globals, run hookwarden.BackfillRun) {
	verb := ""
	if run.DryRun {
		verb = " (dry run: nothing changed)"
	}
	fmt.Fprintf(g.stdout, "%s %s to %s%s:\n", run.Source, fmtUTC(run.From), fmtUTC(run.To), verb)
	count := func(p *int) string {
		if p == nil {
			return "unknown"
		}
		return fmt.Sprint(*p)
	}
	// A dry run changed nothing: it says what a run would do.
	recovered, requested := "recovered", "redeliveries requested"
	if run.DryRun {
		recovered, requested = "would recover", "would request redeliveries"
	}
	if run.Method == "list" {
		fmt.Fprintf(g.stdout, "  listed %s, already claimed %s, %s %d, failed %d\n",
			count(run.Listed), count(run.AlreadyClaimed), recovered, run.Recovered, run.Failed)
	} else {
		fmt.Fprintf(g.stdout, "  listed %s, already claimed %s, %s %d, failed %d\n",
			count(run.Listed), count(run.AlreadyClaimed), requested, run.Requested, run.Failed)
	}
	if b := run.BeyondHistory; b != nil {
		fmt.Fprintf(g.stdout, "  beyond the provider's history: %s to %s (lost for good unless the provider still retries)\n",
			fmtUTC(b.From), fmtUTC(b.To))
	}
	if run.Error != "" {
		fmt.Fprintf(g.stderr, "  error: %s\n", run.Error)
	}
}
