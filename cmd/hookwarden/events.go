package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden"
)

func newEventsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List and inspect recorded events (read-only; works on a copy with --db)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("events: want a subcommand: list or show")
		},
	}
	cmd.AddCommand(newEventsListCmd(g), newEventsShowCmd(g))
	return cmd
}

func newEventsListCmd(g *globals) *cobra.Command {
	var f hookwarden.EventFilter
	var status, since string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List events, newest first",
		Long: `List events, newest first. An event's status comes from its jobs: dead if any
destination dead-lettered it, pending if any delivery is still to do, delivered
otherwise. --status quarantined lists authenticated requests that carried no
event id instead (one line per distinct body, with a repeat count).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if f.Status, err = hookwarden.ParseStatus(status); err != nil {
				return usageErrorf("--status: %v", err)
			}
			if f.Limit < 1 {
				return usageErrorf("--limit: want at least 1")
			}
			ctx := cmd.Context()
			s, _, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			if f.Since, err = sinceFlag(since, time.Now()); err != nil {
				return err
			}
			items, next, err := s.ListEvents(ctx, f)
			if err != nil {
				return err
			}
			table := printEvents
			if f.Status == hookwarden.StatusQuarantined {
				table = printQuarantined
			}
			return writePage(g, items, next, f.Limit, asJSON, table)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Source, "source", "", "only this source")
	fl.StringVar(&status, "status", "", "pending, delivered, dead or quarantined")
	fl.StringVar(&f.Type, "type", "", `only this event type, or a prefix ending in "*" ("invoice.*")`)
	fl.StringVar(&since, "since", "", "only events received in this last duration (90m, 7d)")
	fl.IntVar(&f.Limit, "limit", hookwarden.DefaultLimit, "at most this many")
	fl.Int64Var(&f.Cursor, "before", 0, "continue a listing: only rows older than this ref")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

func printEvents(w io.Writer, items []hookwarden.EventSummary) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no events")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "RECEIVED (UTC)\tSOURCE\tEVENT ID\tTYPE\tSTATUS\tDELIVERED\tRECEIPTS\tNOTE")
	for _, e := range items {
		var notes []string
		if e.Dead > 0 {
			notes = append(notes, plural(e.Dead, "dead letter", "dead letters"))
		}
		if e.Divergent {
			notes = append(notes, "divergent duplicate")
		}
		if e.Derived {
			notes = append(notes, "derived id")
		}
		if e.PayloadPruned {
			notes = append(notes, "payload pruned")
		}
		if e.Jobs == 0 {
			notes = append(notes, "no destination matched")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\n", fmtUTC(e.ClaimedAt), e.Source, oneLine(e.EventID, 48),
			oneLine(e.Type, 40), e.Status, e.Delivered, e.Jobs, e.Receipts, strings.Join(notes, ", "))
	}
	tw.Flush()
}

func printQuarantined(w io.Writer, items []hookwarden.EventSummary) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no quarantined requests")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "FIRST (UTC)\tLAST (UTC)\tSOURCE\tRECEIPT\tCOUNT\tREASON")
	for _, e := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", fmtUTC(e.ClaimedAt), fmtUTC(e.LastAt), e.Source, e.Receipt, e.Count,
			oneLine(e.Reason, 80))
	}
	tw.Flush()
	fmt.Fprintln(w, "\na held request is not an event yet: hookwarden quarantine show RECEIPT (then release or drop)")
}

func newEventsShowCmd(g *globals) *cobra.Command {
	var asJSON, bodyOnly bool
	cmd := &cobra.Command{
		Use:   "show SOURCE EVENT_ID",
		Short: "Show one event: raw body, headers, every receipt, every delivery attempt",
		Long: `Show one event: its raw body, the headers and time of every request that carried
it (the first and each duplicate), and every attempt to each destination.
--body writes only the raw body bytes, exactly as received, to stdout.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && bodyOnly {
				return usageErrorf("--json and --body: choose one")
			}
			ctx := cmd.Context()
			s, _, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			d, err := s.ShowEvent(ctx, args[0], args[1])
			if errors.Is(err, hookwarden.ErrNotFound) {
				// The quarantine list shows receipt ids, which look like event ids.
				if id, perr := strconv.ParseInt(args[1], 10, 64); perr == nil && id > 0 {
					if q, _ := s.QuarantinedReceipt(ctx, args[0], id); q {
						return fmt.Errorf("no event %q from source %q in %s; receipt %d is a quarantined request: "+
							"hookwarden quarantine show %d", args[1], args[0], s.Path(), id, id)
					}
				}
				return fmt.Errorf("no event %q from source %q in %s (a held request is not an event: hookwarden quarantine list)",
					args[1], args[0], s.Path())
			}
			if err != nil {
				return err
			}
			switch {
			case bodyOnly:
				if d.Body == nil {
					return fmt.Errorf("the payload of %s/%s was pruned at %s (retention.payloads)", d.Source, d.EventID, fmtUTC(d.PrunedAt))
				}
				_, err = rawWriter(g.stdout).Write(d.Body) // byte for byte, not escaped
				return err
			case asJSON:
				return writeJSONLine(g.stdout, d)
			}
			printEventDetail(g.stdout, d)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "the whole event as one JSON object (bodies base64)")
	cmd.Flags().BoolVar(&bodyOnly, "body", false, "write only the raw body, byte for byte")
	return cmd
}

func printEventDetail(w io.Writer, d *hookwarden.EventDetail) {
	tw := newTable(w)
	fmt.Fprintf(tw, "event\t%s/%s\n", d.Source, d.EventID)
	if d.Derived {
		// SPEC 11: the platform gave no id; only identical bytes are duplicates.
		fmt.Fprintf(tw, "id\tderived: the SHA-256 of the event's own bytes (the platform gives this event no id)\n")
	}
	fmt.Fprintf(tw, "type\t%s\n", d.Type)
	fmt.Fprintf(tw, "status\t%s (%d delivered, %d pending, %d dead of %s)\n", d.Status, d.Delivered, d.Pending, d.Dead,
		plural(d.Jobs, "job", "jobs"))
	if localIsUTC() {
		fmt.Fprintf(tw, "claimed\t%s\n", fmtUTC(d.ClaimedAt))
	} else {
		fmt.Fprintf(tw, "claimed\t%s  (%s)\n", fmtUTC(d.ClaimedAt), fmtLocal(d.ClaimedAt))
	}
	fmt.Fprintf(tw, "idempotency key\t%s\n", hookwarden.IdempotencyKey(d.Source, d.EventID))
	if d.SummaryOnly {
		fmt.Fprintf(tw, "payload\tpruned at %s by retention.payloads: the payload, headers, receipts and attempt log were removed;\n",
			fmtUTC(d.PrunedAt))
		fmt.Fprintf(tw, "\tthe claim is kept (duplicates are still recognised) with this summary:\n")
		fmt.Fprintf(tw, "receipts\t%d, the last at %s\n", d.Receipts, fmtUTC(d.LastReceivedAt))
		delivered := "-"
		if !d.DeliveredAt.IsZero() {
			delivered = fmtUTC(d.DeliveredAt)
		}
		fmt.Fprintf(tw, "delivered\t%s to %s, %s\n", delivered, plural(d.Jobs, "destination", "destinations"),
			plural(d.Attempts, "attempt", "attempts"))
		tw.Flush()
		if len(d.ReceiptLog) == 0 {
			return
		}
		fmt.Fprintln(w, "\nrequests received since (not yet folded into the summary):")
		printReceipts(w, d)
		return
	}
	fmt.Fprintf(tw, "sha256\t%s\n", d.BodySHA256)
	if d.Body == nil {
		fmt.Fprintf(tw, "payload\tpruned at %s by retention.payloads (the claim is kept: duplicates are still recognised)\n",
			fmtUTC(d.PrunedAt))
	} else {
		fmt.Fprintf(tw, "payload\t%s, %s\n", fmtBytes(int64(len(d.Body))), orDash(d.ContentType))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nreceipts (%d)\n", len(d.ReceiptLog))
	printReceipts(w, d)
	printJobs(w, d)
}

func printReceipts(w io.Writer, d *hookwarden.EventDetail) {
	for _, r := range d.ReceiptLog {
		kind := r.Kind
		if r.Batch {
			kind += " (in a batch)"
		}
		if r.Origin == "backfill" && r.Kind != "backfill" {
			kind += " (from a backfill)" // a live copy had claimed it first
		}
		size := "same bytes as the first"
		switch {
		case !r.PrunedAt.IsZero():
			size = "body pruned " + fmtUTC(r.PrunedAt)
		case r.Body != nil:
			size = fmtBytes(int64(len(r.Body)))
		}
		fmt.Fprintf(w, "  #%d  %s  %s  from %s  %s  sha256 %.16s\n", r.ID, kind, fmtUTC(r.ReceivedAt), r.RemoteAddr, size, r.BodySHA256)
		printHeaders(w, r.Header, "      ")
		if r.Kind == "divergent" && r.Body != nil {
			fmt.Fprintln(w, "      body (differs from the first):")
			printBody(w, r.Body, "      ")
		}
	}

}

func printJobs(w io.Writer, d *hookwarden.EventDetail) {
	fmt.Fprintf(w, "\njobs (%d)\n", len(d.JobLog))
	for _, j := range d.JobLog {
		line := fmt.Sprintf("  #%d  %s  %s  attempts %d", j.ID, j.Destination, j.State, j.Attempts)
		if j.DeadCount > 0 {
			line += fmt.Sprintf("  dead-lettered %s", plural(j.DeadCount, "time", "times"))
		}
		switch {
		case !j.FinishedAt.IsZero():
			line += "  finished " + fmtUTC(j.FinishedAt)
		case !j.LeasedUntil.IsZero():
			line += "  in flight"
		default:
			line += "  next " + fmtUTC(j.NextAt)
		}
		if !j.ReplayedAt.IsZero() {
			line += "  replayed " + fmtUTC(j.ReplayedAt)
		}
		fmt.Fprintln(w, line)
		if j.LastError != "" && j.State != "delivered" {
			fmt.Fprintf(w, "      last error: %s\n", oneLine(j.LastError, 200))
		}
		tw := newTable(w)
		for _, a := range j.Log {
			result := ""
			if a.StatusCode != 0 {
				result = fmt.Sprintf("HTTP %d", a.StatusCode)
			}
			if a.ExitCode != nil {
				result = fmt.Sprintf("exit %d", *a.ExitCode)
			}
			extra := ""
			if a.Error != "" {
				extra = "error: " + oneLine(a.Error, 120)
			}
			fmt.Fprintf(tw, "      %d\t%s\t%s\t%s\t%s\t%s\n", a.Number, fmtUTC(a.StartedAt),
				fmtDur(time.Duration(a.DurationMS*float64(time.Millisecond))), orDash(result), a.Verdict, extra)
		}
		tw.Flush()
		// What the app answered, as stored: often the only clue to why it
		// refused an event.
		for _, a := range j.Log {
			if a.Response == "" {
				continue
			}
			resp, cut := capText([]byte(a.Response), responseShown)
			note := fmtBytes(int64(len(a.Response)))
			if cut {
				note += ", the first " + fmtBytes(int64(len(resp)))
			}
			fmt.Fprintf(w, "      response to attempt %d (%s):\n", a.Number, note)
			printBody(w, resp, "        ")
		}
	}
	printAudit(w, d.Audit)

	if d.Body != nil {
		fmt.Fprintf(w, "\nbody (%s):\n", fmtBytes(int64(len(d.Body))))
		printBody(w, d.Body, "")
	}
}

// printHeaders prints headers one a line, sorted by name.
func printHeaders(w io.Writer, h http.Header, indent string) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range h[k] {
			fmt.Fprintf(w, "%s%s: %s\n", indent, k, v)
		}
	}
}

// printBody prints text bodies as they are and names binary ones.
func printBody(w io.Writer, b []byte, indent string) {
	if !utf8.Valid(b) || bytes.ContainsRune(b, 0) {
		fmt.Fprintf(w, "%s(binary, %s: use --body > FILE)\n", indent, fmtBytes(int64(len(b))))
		return
	}
	s := string(b)
	if indent != "" {
		s = indent + strings.ReplaceAll(s, "\n", "\n"+indent)
	}
	fmt.Fprint(w, s)
	if !strings.HasSuffix(s, "\n") {
		fmt.Fprintln(w)
	}
}

// responseShown caps an app's response in the text of events show; --json
// has all that is stored.
const responseShown = 2 << 10

// capText cuts b to at most n bytes, at the start of a character.
func capText(b []byte, n int) ([]byte, bool) {
	if len(b) <= n {
		return b, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return b[:i], true
}

// printAudit lists the operator actions that changed the event.
func printAudit(w io.Writer, log []hookwarden.AuditEntry) {
	if len(log) == 0 {
		return
	}
	fmt.Fprintf(w, "\naudit (%d)\n", len(log))
	for _, e := range log {
		who := e.Origin
		if e.Actor != "" {
			who += " " + e.Actor
		}
		line := fmt.Sprintf("  #%d  %s  %s  by %s  %s", e.ID, fmtUTC(e.At), e.Action, who, string(e.Args))
		if len(e.Result) > 0 {
			line += "  -> " + string(e.Result)
		}
		fmt.Fprintln(w, line)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
