package main

import (
	"fmt"
	"io"

	"github.com/hookwarden/hookwarden"
)

// writeHolesJSON prints one line per sequence hole ("kind": "sequence_hole").
func writeHolesJSON(w io.Writer, rep hookwarden.GapReport) error {
	for _, h := range rep.SequenceHoles {
		if err := writeJSONLine(w, h); err != nil {
			return err
		}
	}
	return nil
}

// printHoles lists the sequence holes: events the platform numbered and
// never delivered.
func printHoles(w io.Writer, rep hookwarden.GapReport) {
	if len(rep.SequenceHoles) == 0 {
		return
	}
	fmt.Fprintln(w, "\nsequence holes (numbers the platform gave events that never arrived):")
	tw := newTable(w)
	fmt.Fprintln(tw, "SOURCE\tMISSING\tVALUES\tBETWEEN (UTC)\tSTATE")
	lost := false
	for _, h := range rep.SequenceHoles {
		vals := fmt.Sprint(h.FromSeq)
		if h.ToSeq != h.FromSeq {
			vals += fmt.Sprintf("-%d", h.ToSeq)
		}
		state := "may still arrive (within the retry horizon)"
		if h.State == hookwarden.HoleLost {
			state, lost = "lost", true
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s - %s\t%s\n", h.Source, h.Missing, vals, fmtUTC(h.Between.From), fmtUTC(h.Between.To), state)
	}
	tw.Flush()
	if lost {
		fmt.Fprintln(w, "a lost hole is events the platform will not send again: tell the users who wrote between those times")
	}
}
