package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/hookwarden/hookwarden"

	"github.com/spf13/cobra"
)

func newStatsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Counts per source and destination: accepted, duplicates, refused in the last 24 h by reason, pending, delivered, dead, oldest pending age",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			s, cfg, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			var dests []string
			if cfg != nil {
				dests = destinationNames(cfg)
			}
			st, err := s.Stats(ctx, sourceNames(cfg), dests)
			if err != nil {
				return err
			}
			if asJSON {
				return writeStatsJSON(g.stdout, st)
			}
			printStats(g.stdout, st)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `one JSON object per line ("kind": "source" or "destination")`)
	return cmd
}

func writeStatsJSON(w io.Writer, st hookwarden.Stats) error {
	for _, s := range st.Sources {
		if err := writeJSONLine(w, struct {
			Kind string `json:"kind"`
			hookwarden.SourceStats
		}{"source", s}); err != nil {
			return err
		}
	}
	for _, d := range st.Destinations {
		if err := writeJSONLine(w, struct {
			Kind string `json:"kind"`
			hookwarden.OutboxStat
		}{"destination", d}); err != nil {
			return err
		}
	}
	return nil
}

func printStats(w io.Writer, st hookwarden.Stats) {
	tw := newTable(w)
	fmt.Fprintln(tw, "SOURCE\tACCEPTED\tDUPLICATES\tDIVERGENT\tQUARANTINED\tLAST REQUEST (UTC)\tREFUSED (24 H)")
	for _, s := range st.Sources {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Source, s.Accepted, s.Duplicates, s.Divergent, s.Quarantined,
			fmtUTC(s.LastReceivedAt), fmtRefused(s.Refused))
	}
	if len(st.Sources) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "DESTINATION\tPENDING\tDELIVERED\tDEAD\tOLDEST PENDING")
	for _, d := range st.Destinations {
		oldest := "-"
		if d.Pending > 0 {
			oldest = fmtDur(d.OldestPendingAge)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", d.Destination, d.Pending, d.Delivered, d.Dead, oldest)
	}
	if len(st.Destinations) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	tw.Flush()
}

// fmtRefused is a source's refusals by reason, "mismatch 3, stale 1", or
// "-" when none.
func fmtRefused(r hookwarden.Refusals) string {
	var parts []string
	r.Each(func(reason string, n int) { parts = append(parts, fmt.Sprintf("%s %d", reason, n)) })
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
