package main

// Configuration reload on SIGHUP.
//
// What reloads: sources (schemes, secrets, event id/type rules, filters),
// destinations (added, removed, changed), retention, and the certificate
// files of tls.cert/tls.key. What needs a restart: the listen addresses,
// database.path, admin.token, limits, log, the tls paths and
// trusted_proxies; a reload that changes one of them says so in the log and
// keeps the running value.
//
// A reload is all or nothing: the new file is read, validated and built into
// verifiers and deliverers before anything running is touched; any problem
// is logged with its key path and the running configuration stays.
//
// In-flight work is not disturbed: receiver sources are swapped atomically
// (a request uses the sources it started with), and the destinations go to
// worker.Pool.Apply, which keeps an unchanged destination's dispatcher and
// hands a changed one over: the old dispatcher stops leasing and drains its
// in-flight attempts, and only then the new one starts, so a destination
// never has more than its concurrency in flight.

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"syscall"

	"github.com/hookwarden/hookwarden/internal/config"
)

// watchReloads reloads the configuration on every SIGHUP until ctx ends.
// path is the file serve started from; "" (the demo) cannot be reloaded.
func watchReloads(ctx context.Context, hup <-chan os.Signal, g *globals, path string, app *App, sv *supervisor, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if path == "" {
				log.Warn("SIGHUP ignored: the built-in demo configuration cannot be reloaded")
				continue
			}
			sv.reloading()
			err := reloadFrom(g, path, app, log)
			sv.reloaded(app, err)
		}
	}
}

// reloadFrom reads path and applies it to app, logging the outcome: one line
// per problem, each naming its key path.
func reloadFrom(g *globals, path string, app *App, log *slog.Logger) error {
	log.Info("reloading configuration", "config", path)
	next, problems, err := loadConfigFile(path)
	if err != nil {
		log.Error("configuration reload rejected; the running configuration stays", "config", path, "err", err)
		return err
	}
	if errs := config.Errors(problems); len(errs) > 0 || next == nil {
		for _, p := range errs {
			log.Error("configuration reload rejected; the running configuration stays",
				"config", path, "key", p.Path, "problem", p.Message)
		}
		return &config.ValidationError{Problems: errs}
	}
	for _, p := range problems {
		log.Warn("configuration warning", "key", p.Path, "problem", p.Message)
	}
	g.applyDB(next)
	res, err := app.Reload(next)
	for _, k := range res.restart {
		log.Warn("configuration key changed but takes effect only after a restart; the running value stays", "key", k)
	}
	if err != nil {
		var pe *pathError
		key := ""
		if errors.As(err, &pe) {
			key = pe.path
		}
		log.Error("configuration reload rejected; the running configuration stays", "config", path, "key", key, "err", err)
		return err
	}
	log.Info("configuration reloaded", "sources", len(next.Sources), "destinations_kept", res.kept,
		"destinations_replaced", res.replaced, "destinations_added", res.added, "destinations_removed", len(res.removed))
	for _, d := range res.removed {
		log.Warn("destination removed: its pending jobs stay in the database and are delivered if it is configured again",
			"destination", d)
	}
	return nil
}

// pathError is a reload failure at a known key path.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// reloadResult says what a reload did.
type reloadResult struct {
	restart               []string // changed keys that need a restart
	kept, replaced, added int
	removed               []string
}

// Reload applies a validated configuration to the running app. Keys that
// need a restart keep their running values (and are listed in the result).
// On error nothing changed.
func (a *App) Reload(next *config.Config) (reloadResult, error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	res := reloadResult{restart: restartKeys(a.cfg, next)}

	merged := *a.cfg
	merged.Sources = next.Sources
	merged.Retention = next.Retention
	var pair *tls.Certificate
	if a.certs != nil {
		// The running paths: the files may have been renewed behind them.
		p, err := loadPair(merged.TLS)
		if err != nil {
			return res, &pathError{"tls.cert", err}
		}
		pair = p
	}
	sources, dests, closers, err := buildPipeline(&merged)
	if err != nil {
		for _, c := range closers {
			_ = c()
		}
		return res, err
	}
	// The pool owns the deliverers from here on, and changes nothing if it
	// fails (it is closing: serve is stopping).
	changes, err := a.Workers.Apply(dests)
	if err != nil {
		return res, err
	}
	res.kept, res.replaced, res.added, res.removed = changes.Kept, changes.Replaced, changes.Added, changes.Removed
	// The store applies the new flow policies at once. Only making the
	// waiting jobs of a destination no longer ordered due can fail; the
	// next start or reload does it again.
	if err := a.Store.SetFlow(context.Background(), merged.FlowPolicies()); err != nil {
		a.log.Error("reload: flow control applied, but the jobs waiting behind removed order_by keys are not released yet", "err", err)
	}
	// Nothing can fail from here on.
	if pair != nil {
		a.certs.cert.Store(pair)
	}
	a.Receiver.SetSources(sources)
	for _, s := range merged.Sources {
		a.Metrics.InitSource(s.Name)
		a.Metrics.SetRetentionMargin(s.Name, merged.RetentionMargin(&s))
		a.Metrics.SetExpectWithin(s.Name, s.ExpectWithin.D())
	}
	for _, d := range destinationNames(&merged) {
		a.Metrics.InitDestination(d)
	}
	a.Metrics.SetOutboxDestinations(destinationNames(&merged))
	a.cfg = &merged
	return res, nil
}

// restartKeys lists the keys that differ between the running and the new
// configuration but are bound at start: listeners, the database, the admin
// server, the receiver's limits and proxies, logging.
func restartKeys(cur, next *config.Config) []string {
	var keys []string
	diff := func(key string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			keys = append(keys, key)
		}
	}
	diff("listen", cur.Listen, next.Listen)
	diff("admin.listen", cur.Admin.Listen, next.Admin.Listen)
	diff("admin.token", cur.Admin.Token, next.Admin.Token)
	diff("database.path", cur.Database.Path, next.Database.Path)
	diff("database.url", cur.Database.URL, next.Database.URL)
	diff("limits.max_body_bytes", cur.Limits.MaxBodyBytes, next.Limits.MaxBodyBytes)
	diff("limits.max_inflight_bytes", cur.Limits.MaxInflightBytes, next.Limits.MaxInflightBytes)
	diff("limits.max_inflight_bytes_per_client", cur.Limits.MaxInflightBytesPerClient, next.Limits.MaxInflightBytesPerClient)
	diff("limits.min_body_bytes_per_second", cur.Limits.MinBodyBytesPerSecond, next.Limits.MinBodyBytesPerSecond)
	diff("limits.slow_body_grace", cur.Limits.SlowBodyGrace, next.Limits.SlowBodyGrace)
	diff("limits.max_connections", cur.Limits.MaxConnections, next.Limits.MaxConnections)
	diff("limits.commit_timeout", cur.Limits.CommitTimeout, next.Limits.CommitTimeout)
	diff("redact_headers", cur.RedactHeaders, next.RedactHeaders)
	diff("instance_name", cur.InstanceName, next.InstanceName)
	diff("log.level", cur.Log.Level, next.Log.Level)
	diff("log.format", cur.Log.Format, next.Log.Format)
	diff("tls.cert", cur.TLS.Cert, next.TLS.Cert)
	diff("tls.key", cur.TLS.Key, next.TLS.Key)
	if !slices.Equal(cur.TrustedProxies, next.TrustedProxies) {
		keys = append(keys, "trusted_proxies")
	}
	return keys
}

// notifyHUP routes SIGHUP to a channel (its default action would end the
// process). stop restores the default.
func notifyHUP() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}
