package main

import (
	"context"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"

	"github.com/hookwarden/hookwarden/internal/admin"
)

// newDashboard builds the admin dashboard on the running app: it reads the
// configuration per request (so a reload shows at once), the counts of
// refused requests from the metrics, and replays through the store.
func (a *App) newDashboard(adm *admin.Admin, tokenSet bool) (*admin.Dashboard, error) {
	o := admin.DashboardOptions{Store: a.Store, Authorized: adm.Authorized, TokenSet: tokenSet, Sessions: adm}
	o.Sources = func() []admin.DashboardSource {
		cfg := a.currentConfig()
		out := make([]admin.DashboardSource, len(cfg.Sources))
		for i, s := range cfg.Sources {
			out[i] = admin.DashboardSource{Name: s.Name, ExpectWithin: s.ExpectWithin.D(), RetryHorizon: s.RetryHorizon.D(),
				RetentionMargin: cfg.RetentionMargin(&s)}
			if s.Backfill != nil {
				out[i].Backfill = hookwarden.BackfillPolicy{Method: config.BackfillMethod(s.Scheme), History: config.BackfillHistory(s.Scheme)}
			}
		}
		return out
	}
	o.Destinations = func() []string { return destinationNames(a.currentConfig()) }
	o.Refused = func(source string, d time.Duration) (int, int) {
		return a.Metrics.Recent(source, d, "unauthorized", "too_large", "bad_request", "too_slow", "method_not_allowed"),
			a.Metrics.Recent(source, d, "unavailable")
	}
	o.CountingSince = a.Metrics.Started()
	o.Notify = func(d ...string) { a.Workers.Notify(d...) }
	o.Backfill = func(ctx context.Context, source string, from, to time.Time, audit *hookwarden.AuditEntry) (int64, error) {
		return a.startBackfill(ctx, source, from, to, audit, true)
	}
	o.Stale, o.MinClean = gapStale, defaultMinClean // as `gaps` and /api/gaps
	o.Version = versionString()
	o.Logger = a.log
	return admin.NewDashboard(o)
}
