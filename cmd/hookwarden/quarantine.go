package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/filter"
)

func newQuarantineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quarantine",
		Short: "Held requests: authenticated but carrying no event id, or a signed body replayed under a new id",
		Long: `Requests are held, never delivered, when they were authenticated but

  no_event_id     no event id was found where event_id looks
  body_replayed   the source's signature does not cover the event id (github,
                  shopify, twilio, hmac with a header id) and the same signed
                  body was already claimed under another id: a captured
                  request sent again with a fresh id

Each distinct body is held once; later copies only count as repeats. Held
requests nobody released go after retention.quarantine (default 30d).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("quarantine: want a subcommand: list, show, release or drop")
		},
	}
	cmd.AddCommand(newQuarantineListCmd(g), newQuarantineShowCmd(g), newQuarantineReleaseCmd(g), newQuarantineDropCmd(g))
	return cmd
}

func receiptArg(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageErrorf("RECEIPT_ID %q: want a positive integer (quarantine list shows them)", s)
	}
	return id, nil
}

func newQuarantineListCmd(g *globals) *cobra.Command {
	var f hookwarden.QuarantineFilter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List held requests, newest first (released ones too, until retention removes them)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Limit < 1 {
				return usageErrorf("--limit: want at least 1")
			}
			ctx := cmd.Context()
			s, _, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			items, next, err := s.ListQuarantine(ctx, f)
			if err != nil {
				return err
			}
			return writePage(g, items, next, f.Limit, asJSON, printHeld)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Source, "source", "", "only this source")
	fl.IntVar(&f.Limit, "limit", hookwarden.DefaultLimit, "at most this many")
	fl.Int64Var(&f.Cursor, "before", 0, "continue a listing: only receipts older than this receipt id")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per line")
	return cmd
}

func printHeld(w io.Writer, items []hookwarden.Held) {
	if len(items) == 0 {
		fmt.Fprintln(w, "no quarantined requests")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "RECEIVED (UTC)\tRECEIPT\tSOURCE\tREASON\tCANDIDATE ID\tORIGINAL ID\tREPEATS\tRELEASED (UTC)")
	for _, h := range items {
		released := "-"
		if h.ReleasedAt != nil {
			released = fmtUTC(*h.ReleasedAt) + " as " + oneLine(h.ReleasedEventID, 40)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", fmtUTC(h.ReceivedAt), h.ReceiptID, h.Source, h.Reason,
			orDash(oneLine(h.CandidateEventID, 40)), orDash(oneLine(h.OriginalEventID, 40)), h.Repeats, released)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nlook closer: hookwarden quarantine show RECEIPT_ID; then release RECEIPT_ID [--event-id ID] or drop RECEIPT_ID")
}

func newQuarantineShowCmd(g *globals) *cobra.Command {
	var asJSON, bodyOnly bool
	cmd := &cobra.Command{
		Use:   "show RECEIPT_ID",
		Short: "One held request: why it is held, its headers and its body",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := receiptArg(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, _, err := g.openStore(ctx, true)
			if err != nil {
				return err
			}
			defer s.Close()
			d, err := s.ShowQuarantined(ctx, id)
			if errors.Is(err, hookwarden.ErrNotFound) {
				return fmt.Errorf("no quarantined request %d in %s (quarantine list shows them)", id, s.Path())
			}
			if err != nil {
				return err
			}
			switch {
			case bodyOnly:
				_, err = rawWriter(g.stdout).Write(d.Body)
				return err
			case asJSON:
				return writeJSONLine(g.stdout, d)
			}
			printHeldDetail(g.stdout, d)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "the whole request as one JSON object (body base64)")
	cmd.Flags().BoolVar(&bodyOnly, "body", false, "write only the raw body, byte for byte")
	return cmd
}

func printHeldDetail(w io.Writer, d *hookwarden.HeldDetail) {
	tw := newTable(w)
	fmt.Fprintf(tw, "receipt\t%d\n", d.ReceiptID)
	fmt.Fprintf(tw, "source\t%s\n", d.Source)
	fmt.Fprintf(tw, "reason\t%s (%s)\n", d.Reason, oneLine(d.Detail, 120))
	fmt.Fprintf(tw, "candidate event id\t%s\n", orDash(d.CandidateEventID))
	fmt.Fprintf(tw, "original event id\t%s\n", orDash(d.OriginalEventID))
	fmt.Fprintf(tw, "received\t%s from %s\n", fmtUTC(d.ReceivedAt), d.RemoteAddr)
	fmt.Fprintf(tw, "repeats\t%d (last at %s)\n", d.Repeats, fmtUTC(d.LastAt))
	if d.ReleasedAt == nil {
		fmt.Fprintf(tw, "released\tno\n")
	} else {
		fmt.Fprintf(tw, "released\t%s as event %s\n", fmtUTC(*d.ReleasedAt), d.ReleasedEventID)
	}
	fmt.Fprintf(tw, "sha256\t%s\n", d.BodySHA256)
	tw.Flush()
	fmt.Fprintln(w, "\nheaders")
	printHeaders(w, d.Header, "  ")
	fmt.Fprintf(w, "\nbody (%s):\n", fmtBytes(int64(len(d.Body))))
	printBody(w, d.Body, "")
}

func newQuarantineReleaseCmd(g *globals) *cobra.Command {
	var eventID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "release RECEIPT_ID [--event-id ID]",
		Short: "Deliver a held request: claim its event id (skipping the body-replay check) and create its jobs",
		Long: `Release a held request to delivery. Its event id is claimed like any other:
the id it carried, or --event-id (required when it carried none). An id
already claimed is refused (exit 1) and the request stays held. On success the
event gets one job per destination that matches its type, and a running serve
delivers it within a second or two.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := receiptArg(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, cfg, target, err := g.openWriteStore(ctx, "quarantine release")
			if err != nil {
				return err
			}
			defer s.Close()
			if cfg == nil {
				return usageErrorf("quarantine release needs the configuration (the source's destinations): pass --config")
			}
			audit := cliAudit()
			audit.Args = auditArgs(map[string]any{"receipt_id": id, "event_id": eventID})
			res, err := releaseHeld(ctx, s, cfg, id, eventID, audit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSONLine(g.stdout, res)
			}
			fmt.Fprintf(g.stdout, "released request %d as %s/%s with %s; %s\n",
				id, res.Source, res.EventID, plural(res.Jobs, "job", "jobs"), target.deliveryNote())
			return nil
		},
	}
	cmd.Flags().StringVar(&eventID, "event-id", "", "claim under this id (required when the request carried none)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	return cmd
}

// releaseHeld releases one held request: its event type and destinations
// come from the source's configuration, as the receiver would have found
// them. An action of its own, so that it can be audited in one place.
func releaseHeld(ctx context.Context, s hookwarden.Store, cfg *config.Config, receiptID int64, eventID string,
	audit *hookwarden.AuditEntry) (hookwarden.Released, error) {
	d, err := s.ShowQuarantined(ctx, receiptID)
	if errors.Is(err, hookwarden.ErrNotFound) {
		return hookwarden.Released{}, fmt.Errorf("no quarantined request %d in %s (quarantine list shows them)", receiptID, s.Path())
	}
	if err != nil {
		return hookwarden.Released{}, err
	}
	if eventID == "" && d.CandidateEventID == "" {
		return hookwarden.Released{}, usageErrorf("request %d carried no event id: give one with --event-id", receiptID)
	}
	var src *config.Source
	for i := range cfg.Sources {
		if cfg.Sources[i].Name == d.Source {
			src = &cfg.Sources[i]
		}
	}
	if src == nil {
		return hookwarden.Released{}, fmt.Errorf("source %q of request %d is not in the configuration: its destinations are unknown", d.Source, receiptID)
	}
	rel := hookwarden.Release{ReceiptID: receiptID, EventID: eventID, Audit: audit}
	if ex, err := extract.Parse(src.EventType); err == nil {
		rel.EventType, _ = ex.Extract(d.Header, d.Body) // a missing type is allowed, as at the door
	}
	id := eventID
	if id == "" {
		id = d.CandidateEventID
	}
	fev := &filter.Event{Request: &filter.Request{Source: src.Name, Header: d.Header}, ID: id, Type: rel.EventType, Body: d.Body}
	for _, dst := range src.Destinations {
		if !dst.MatchType(rel.EventType) {
			continue
		}
		if dst.Filter != "" {
			// As at the door: false skips it, an error delivers.
			if f, err := filter.Compile(dst.Filter); err == nil {
				if ok, err := f.Match(fev); err == nil && !ok {
					continue
				}
			}
		}
		rel.Destinations = append(rel.Destinations, dst.FullName(src.Name))
	}
	res, err := s.ReleaseQuarantined(ctx, rel)
	if errors.Is(err, hookwarden.ErrAlreadyClaimed) {
		return res, fmt.Errorf("%w (events show %s ID shows the claim)", err, d.Source)
	}
	return res, err
}

func newQuarantineDropCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "drop RECEIPT_ID",
		Short: "Delete a held request for good (a released one's event keeps its own copy)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := receiptArg(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, _, _, err := g.openWriteStore(ctx, "quarantine drop")
			if err != nil {
				return err
			}
			defer s.Close()
			audit := cliAudit()
			audit.Args = auditArgs(map[string]any{"receipt_id": id})
			if err := dropHeld(ctx, s, id, audit); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "dropped quarantined request %d\n", id)
			return nil
		},
	}
}

// dropHeld deletes one held request; an action of its own, like releaseHeld.
func dropHeld(ctx context.Context, s hookwarden.Store, receiptID int64, audit *hookwarden.AuditEntry) error {
	err := s.DropQuarantined(ctx, receiptID, audit)
	if errors.Is(err, hookwarden.ErrNotFound) {
		return fmt.Errorf("no quarantined request %d in %s (quarantine list shows them)", receiptID, s.Path())
	}
	return err
}
