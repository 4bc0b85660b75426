package main

import (
	"fmt"
	"github.com/hookwarden/hookwarden"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/internal/config"
)

// gapStale is how old the last run's heartbeat may be before gaps calls that
// run dead: a few missed heartbeats, never one late tick.
const gapStale = 5 * heartbeatEvery

// defaultMinClean hides windows after a clean stop shorter than this: a
// restart is not an outage.
const defaultMinClean = 5 * time.Second

// sourcePolicies is what gaps needs of the configured sources.
func sourcePolicies(cfg *config.Config) []hookwarden.SourcePolicy {
	if cfg == nil {
		return nil
	}
	var ps []hookwarden.SourcePolicy
	for _, s := range cfg.Sources {
		p := hookwarden.SourcePolicy{Name: s.Name, RetryHorizon: s.RetryHorizon.D(), ExpectWithin: s.ExpectWithin.D(),
			Sequence: s.SequenceSpec() != "", KeepClaims: cfg.Retention.Claims.D()}
		if et, _ := s.EventTimeSpec(); et != "" {
			p.EventTime = true
		}
		if s.Backfill != nil {
			p.Backfill = hookwarden.BackfillPolicy{Method: config.BackfillMethod(s.Scheme), History: config.BackfillHistory(s.Scheme)}
		}
		ps = append(ps, p)
	}
	return ps
}

func newGapsCmd(g *globals) *cobra.Command {
	var since string
	var asJSON bool
	var minClean time.Duration
	cmd := &cobra.Command{
		Use:   "gaps",
		Short: "Outage windows of the receiver and silences of sources, flagged beyond the provider's retry horizon",
		Long: `List every window in which no serve process was running on the database (from the
run history: each run's start, heartbeats every 2s, and clean stop), every minute
in which most of a source's requests were answered 503 (kind "unavailable": the
in-flight budget full, the store failing; serve records them every 10s), and every
silence longer than a source's expect_within. A window longer than a source's
retry_horizon is flagged: events that provider sent in it may be lost for good.
Each window says, per source, what became of its events: recovered (a backfill
recorded what was missing), requested (redeliveries asked for), recoverable (the
source has backfill: and the provider still keeps the window: run backfill),
retried_by_provider (within its retry horizon) or lost for good.

A window after a crash starts at the run's last heartbeat (up to 2s before it
died) and is always listed; a window after a clean stop shorter than --min is a
restart and is not. With --db and no configuration, only outages are listed,
unflagged (the horizons are in the configuration).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opt := hookwarden.GapOptions{MinClean: minClean, Stale: gapStale}
			var err error
			if opt.Since, err = sinceFlag(since, time.Now()); err != nil {
				return err
			}
			ctx := cmd.Context()
			s, cfg, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			opt.Sources = sourcePolicies(cfg)
			rep, err := hookwarden.GapsWithRecovery(ctx, s, opt)
			if err != nil {
				return err
			}
			if asJSON {
				return writeGapsJSON(g.stdout, rep)
			}
			printGaps(g.stdout, rep, cfg != nil)
			return nil
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only windows that ended in this last duration (7d, 12h)")
	cmd.Flags().DurationVar(&minClean, "min", defaultMinClean, "hide windows after a clean stop shorter than this")
	cmd.Flags().BoolVar(&asJSON, "json", false, `one JSON object per line ("kind": "outage", "silence" or "sequence_hole")`)
	return cmd
}

func writeGapsJSON(w io.Writer, rep hookwarden.GapReport) error {
	for _, o := range rep.Outages {
		if err := writeJSONLine(w, struct {
			Kind string `json:"kind"`
			hookwarden.Outage
		}{o.Kind, o}); err != nil {
			return err
		}
	}
	for _, s := range rep.Silences {
		if err := writeJSONLine(w, struct {
			Kind string `json:"kind"`
			hookwarden.Silence
		}{"silence", s}); err != nil {
			return err
		}
	}
	return writeHolesJSON(w, rep)
}

func printGaps(w io.Writer, rep hookwarden.GapReport, haveConfig bool) {
	if rep.Runs == 0 {
		fmt.Fprintln(w, "no serve run recorded in this file")
		return
	}
	lost := false
	// One instance's restart while others served (PostgreSQL) missed
	// nothing: it is listed apart, never as an outage window.
	var restarts []hookwarden.Outage
	outages := rep.Outages[:0:0]
	for _, o := range rep.Outages {
		if o.Kind == "restart" {
			restarts = append(restarts, o)
		} else {
			outages = append(outages, o)
		}
	}
	rep.Outages = outages
	// The local time column only when the zone is not UTC itself.
	local := !localIsUTC()
	if len(rep.Outages) == 0 {
		fmt.Fprintf(w, "no outage windows in %s\n", plural(rep.Runs, "recorded run", "recorded runs"))
	} else {
		fmt.Fprintf(w, "outage windows (receiver not running, or answering a source 503), from %s:\n", plural(rep.Runs, "recorded run", "recorded runs"))
		tw := newTable(w)
		fmt.Fprintln(tw, "START (UTC)\tEND (UTC)\tLENGTH\tENDED BY\t"+localCol(local, "LOCAL TIME\t")+"BEYOND RETRY HORIZON OF")
		for _, o := range rep.Outages {
			end, endLocal := fmtUTC(o.End), fmtLocal(o.End)
			if o.Open {
				end, endLocal = "now (open)", "now"
			}
			kind := "clean stop"
			if o.Crash {
				kind = "crash"
			}
			if o.Kind == "unavailable" {
				kind = "503 to " + o.Source // serve ran, but answered most of its requests 503
			}
			beyond := "-"
			switch {
			case !haveConfig:
				beyond = "? (no configuration)"
			case len(o.BeyondRetryHorizon) > 0:
				beyond = strings.Join(o.BeyondRetryHorizon, ", ")
				lost = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s%s\n", fmtUTC(o.Start), end, fmtDur(o.Length), kind,
				localCol(local, fmtLocal(o.Start)+" - "+endLocal+"\t"), beyond)
		}
		tw.Flush()
		printRecovery(w, rep)
		printLate(w, rep)
		if rep.Outages[len(rep.Outages)-1].Open {
			fmt.Fprintln(w, "the last window is open: no serve has run on this file since (or this file is a copy)")
		}
	}
	if len(restarts) > 0 {
		fmt.Fprintln(w, "\ninstance restarts (other instances served meanwhile: nothing missed):")
		tw := newTable(w)
		fmt.Fprintln(tw, "START (UTC)\tEND (UTC)\tLENGTH\tKIND")
		for _, o := range restarts {
			fmt.Fprintf(tw, "%s\t%s\t%s\trestart\n", fmtUTC(o.Start), fmtUTC(o.End), fmtDur(o.Length))
		}
		tw.Flush()
	}
	if len(rep.Silences) > 0 {
		fmt.Fprintln(w, "\nsilences (no request for longer than the source's expect_within):")
		tw := newTable(w)
		fmt.Fprintln(tw, "SOURCE\tFROM (UTC)\tTO (UTC)\tLENGTH\tEXPECT WITHIN\t"+localCol(local, "LOCAL TIME\t")+"BEYOND RETRY HORIZON\tRECOVERY")
		for _, s := range rep.Silences {
			end, endLocal := fmtUTC(s.End), fmtLocal(s.End)
			if s.Open {
				end, endLocal = "now (open)", "now"
			}
			beyond := "no"
			if s.BeyondRetryHorizon {
				beyond, lost = "yes", true
			}
			rec := "-"
			if s.Recovery != "" {
				rec = recoveryText(s.Recovery)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s%s\t%s\n", s.Source, fmtUTC(s.Start), end, fmtDur(s.Length),
				fmtDur(s.ExpectWithin), localCol(local, fmtLocal(s.Start)+" - "+endLocal+"\t"), beyond, rec)
		}
		tw.Flush()
	}
	printHoles(w, rep)
	if lost {
		fmt.Fprintln(w, "\nbeyond the retry horizon: events sent in that window may be lost for good unless recovered: "+
			"run backfill where recoverable, and tell the users of what is lost for good")
	}
}

// recoveryText is a recovery as the text output says it.
func recoveryText(r string) string {
	switch r {
	case hookwarden.RecoveryLost:
		return "lost for good"
	case hookwarden.RecoveryRetried:
		return "retried by provider"
	}
	return r
}

// backfillText sums up a window's last backfill.
func backfillText(run *hookwarden.BackfillRun) string {
	if run == nil {
		return "-"
	}
	s := fmtUTC(run.StartedAt)
	if run.Auto {
		s += " (auto)"
	}
	switch {
	case !run.Finished():
		return s + ": running or abandoned"
	case run.Method == "list":
		s += fmt.Sprintf(": recovered %d", run.Recovered)
	default:
		s += fmt.Sprintf(": requested %d", run.Requested)
	}
	if run.AlreadyClaimed != nil {
		s += fmt.Sprintf(", already claimed %d", *run.AlreadyClaimed)
	}
	if run.Failed > 0 {
		s += fmt.Sprintf(", failed %d", run.Failed)
	}
	if run.BeyondHistory != nil {
		s += ", part beyond history"
	}
	if run.Error != "" {
		s += ", error"
	}
	return s
}

// printRecovery lists each outage's recovery per source.
func printRecovery(w io.Writer, rep hookwarden.GapReport) {
	some := false
	for _, o := range rep.Outages {
		some = some || len(o.Sources) > 0
	}
	if !some {
		return
	}
	fmt.Fprintln(w, "\nrecovery, per window and source:")
	tw := newTable(w)
	fmt.Fprintln(tw, "WINDOW START (UTC)\tSOURCE\tRECOVERY\tLAST BACKFILL")
	for _, o := range rep.Outages {
		for _, r := range o.Sources {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", fmtUTC(o.Start), r.Source, recoveryText(r.Recovery), backfillText(r.Backfill))
		}
	}
	tw.Flush()
	// The hint only while something is left to do.
	for _, o := range rep.Outages {
		for _, r := range o.Sources {
			if r.Recovery == hookwarden.RecoveryRecoverable {
				fmt.Fprintln(w, "(recoverable: run `hookwarden backfill SOURCE`; docs/backfill.md says what lost for good means)")
				return
			}
		}
	}
}

// localCol is s when the local time column is shown, else "".
func localCol(show bool, s string) string {
	if !show {
		return ""
	}
	return s
}
