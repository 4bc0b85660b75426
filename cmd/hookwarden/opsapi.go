package main

import (
	"context"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/admin"
)

// apiOptions wires the admin JSON API to the running app. The configuration
// is read per request, so a reload is seen at once.
func (a *App) apiOptions() admin.APIOptions {
	return admin.APIOptions{
		Store:        a.Store,
		Sources:      func() []hookwarden.SourcePolicy { return sourcePolicies(a.currentConfig()) },
		Destinations: func() []string { return destinationNames(a.currentConfig()) },
		Rates:        func() map[string]string { return destinationRates(a.currentConfig()) },
		Stale:        gapStale,
		MinClean:     defaultMinClean,
		Notify:       func(d ...string) { a.Workers.Notify(d...) },
		Backfill: func(ctx context.Context, source string, from, to time.Time, audit *hookwarden.AuditEntry) (int64, error) {
			return a.startBackfill(ctx, source, from, to, audit, false)
		},
		Logger: a.log,
	}
}
