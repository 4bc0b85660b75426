package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// BenchmarkReads: the operator's reads on a history of 100000 events (see
// seedHistory), one op one call. A page should cost about the same at any
// history size; Stats counts every row.
func BenchmarkReads(b *testing.B) {
	s := open(b, pgtest.Database(b), Options{Timeout: time.Minute})
	end := seedHistory(b, s, 100000)
	ctx := context.Background()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		fn   func() error
	}{
		{"ListEvents", func() error { _, _, err := s.ListEvents(ctx, hookwarden.EventFilter{}); return err }},
		{"ListEventsSource", func() error { _, _, err := s.ListEvents(ctx, hookwarden.EventFilter{Source: "rare"}); return err }},
		{"ListEventsLastHour", func() error {
			_, _, err := s.ListEvents(ctx, hookwarden.EventFilter{Since: end.Add(-time.Hour)})
			return err
		}},
		{"ListEventsDead", func() error {
			_, _, err := s.ListEvents(ctx, hookwarden.EventFilter{Status: hookwarden.StatusDead})
			return err
		}},
		{"ShowEvent", func() error { _, err := s.ShowEvent(ctx, "std", "e50002"); return err }},
		{"ListDead", func() error { _, _, err := s.ListDead(ctx, hookwarden.DeadFilter{Source: "std"}); return err }},
		{"RecentCounts", func() error {
			_, err := s.RecentCounts(ctx, []string{"std", "gh", "rare"}, end.Add(-time.Hour), end.Add(-24*time.Hour))
			return err
		}},
		{"LastAccepted", func() error { _, err := s.LastAccepted(ctx, []string{"std", "gh", "rare"}); return err }},
		{"Stats", func() error { _, err := s.Stats(ctx, nil, nil); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				must(c.fn())
			}
		})
	}
}
