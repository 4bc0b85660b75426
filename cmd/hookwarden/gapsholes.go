package main

import (
	"fmt"
	"io"
	"time"

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

// printLate says, per outage window and source with an event_time, what
// the platform's retries brought from inside the window.
func printLate(w io.Writer, rep hookwarden.GapReport) {
	head := false
	for _, o := range rep.Outages {
		for _, r := range o.Sources {
			if r.RecoveredByRetries == nil {
				continue
			}
			if !head {
				fmt.Fprintln(w, "\nlate arrivals (events timed inside a window that arrived after it):")
				head = true
			}
			n := *r.RecoveredByRetries
			switch {
			case n == 0:
				fmt.Fprintf(w, "  %s, %s: no event from inside this window has arrived: for a platform that retries, tell the affected users\n",
					fmtUTC(o.Start), r.Source)
			default:
				fmt.Fprintf(w, "  %s, %s: %s from inside this window arrived later (platform retries), the last at %s (lag up to %s); none since\n",
					fmtUTC(o.Start), r.Source, plural(int(n), "event", "events"), fmtUTC(*r.LastLateArrival), fmtDur(time.Duration(*r.MaxLag*float64(time.Second))))
			}
		}
	}
}
