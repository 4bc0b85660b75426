package main

import (
	"fmt"
	"github.com/hookwarden/hookwarden"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func newDeadCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "Dead letters: deliveries the app refused or that ran out of attempts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("dead: want a subcommand: list")
		},
	}
	cmd.AddCommand(newDeadListCmd(g))
	return cmd
}

func newDeadListCmd(g *globals) *cobra.Command {
	var f hookwarden.DeadFilter
	var since string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, newest first: event, destination, attempts, last error, times dead-lettered",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Limit < 1 {
				return usageErrorf("--limit: want at least 1")
			}
			var err error
			if f.Since, err = sinceFlag(since, time.Now()); err != nil {
				return err
			}
			ctx := cmd.Context()
			s, _, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			items, next, err := s.ListDead(ctx, f)
			if err != nil {
				return err
			}
			return writePage(g, items, next, f.Limit, asJSON, printDead)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Source, "source", "", "only this source")
	fl.StringVar(&f.Destination, "destination", "", `only this destination ("source/name")`)
	fl.StringVar(&since, "since", "", "only dead-lettered in this last duration (90m, 7d)")
	fl.IntVar(&f.Limit, "limit", hookwarden.DefaultLimit, "at most this many")
	fl.Int64Var(&f.Cursor, "before", 0, "continue a listing: only jobs older than this job id")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

func printDead(w io.Writer, items []hookwarden.DeadLetter) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "DEAD SINCE (UTC)\tJOB\tSOURCE\tEVENT ID\tTYPE\tDESTINATION\tATTEMPTS\tTIMES DEAD\tLAST ERROR")
	for _, d := range items {
		times := fmt.Sprint(d.DeadCount)
		if d.DeadCount >= hookwarden.ForceAfter {
			times += " (replay needs --force)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", fmtUTC(d.DeadAt), d.JobID, d.Source, oneLine(d.EventID, 48),
			oneLine(d.Type, 32), d.Destination, d.Attempts, times, oneLine(d.LastError, 80))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nreplay after the fix: hookwarden replay SOURCE EVENT_ID...  or  hookwarden replay --dead [--source S] [--destination D]\n")
}
