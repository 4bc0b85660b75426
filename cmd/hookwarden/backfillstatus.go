package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden/internal/backfill"
	"github.com/hookwarden/hookwarden/internal/config"
)

// backfillStatus prints the platform's own view of what it has not
// delivered to the source (SPEC 12): for telegram, getWebhookInfo. Read
// here, by the command, never on the receive path; one bounded request.
func backfillStatus(ctx context.Context, g *globals, cfg *config.Config, source string, asJSON bool) error {
	i, ok := sourceIndex(cfg, source)
	if !ok {
		return usageErrorf("backfill --status: no source %q in the configuration", source)
	}
	s := &cfg.Sources[i]
	if s.Scheme != "telegram" {
		return usageErrorf("backfill --status: sources[%d] (%s): scheme %s reports no status of its own (telegram does)", i, source, s.Scheme)
	}
	if s.Backfill == nil || s.Backfill.APIKey == "" {
		return usageErrorf("backfill --status: sources[%d].backfill.api_key: the bot token is needed to read getWebhookInfo", i)
	}
	token, err := s.Backfill.APIKey.Resolve()
	if err != nil {
		return usageErrorf("sources[%d].backfill.api_key: %v", i, err)
	}
	st, err := backfill.TelegramWebhookInfo(ctx, backfill.Options{APIBase: s.Backfill.APIBase, APIKey: token, MaxTime: 30 * time.Second})
	if errors.Is(err, backfill.ErrKeyRefused) {
		return usageErrorf("%v", &keyRefusedError{path: fmt.Sprintf("sources[%d].backfill.api_key", i), err: err})
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSONLine(g.stdout, struct {
			Source string `json:"source"`
			backfill.TelegramStatus
		}{source, st})
	}
	fmt.Fprintf(g.stdout, "telegram's view of %s (getWebhookInfo):\n", source)
	tw := newTable(g.stdout)
	fmt.Fprintf(tw, "  webhook url\t%s\n", st.URL)
	fmt.Fprintf(tw, "  pending updates\t%d\n", st.PendingUpdateCount)
	if st.LastErrorDate.IsZero() {
		fmt.Fprintf(tw, "  last delivery error\tnone reported\n")
	} else {
		fmt.Fprintf(tw, "  last delivery error\t%s (%s ago): %s\n", fmtUTC(st.LastErrorDate), fmtDur(time.Since(st.LastErrorDate).Round(time.Second)),
			st.LastErrorMessage)
	}
	tw.Flush()
	if st.PendingUpdateCount > 0 {
		fmt.Fprintln(g.stdout, "Telegram still holds the pending updates and retries them (for up to 24 h): they arrive once the endpoint answers")
	}
	return nil
}
