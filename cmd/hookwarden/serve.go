package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookwarden/hookwarden/internal/config"
)

// stopTimeout bounds the HTTP part of a graceful stop; the workers' own drain
// timeout comes after it, inside systemd's default 90 s.
const stopTimeout = 20 * time.Second

// serveGCPercent is serve's GOGC unless the environment sets one. Each
// request allocates its body and a few small objects, all garbage at once;
// halving the collections cut server CPU per request by about 5 % (85-87 to
// 80-85 µs) and the p99 ratio at 64 connections from 1.56-1.58 to 1.23-1.51
// in alternating cells (docs/performance.md), for about 5 MiB more heap.
const serveGCPercent = 200

func setGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
	}
}

func newServeCmd(g *globals) *cobra.Command {
	var demo bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the receiver, the delivery workers and the admin server until SIGTERM/SIGINT",
		Long: `Run the receiver (listen, default 127.0.0.1:8080; tls: for native HTTPS), the
delivery workers and the admin server (admin.listen, default 127.0.0.1:8081:
/healthz, /readyz, /metrics, the API and the dashboard) until SIGTERM or SIGINT,
which drain the deliveries under way.

The configuration is --config FILE, else $HOOKWARDEN_CONFIG, ./config.yaml or
/etc/hookwarden/config.yaml; HOOKWARDEN_* variables override its keys. Run
"hookwarden check" first: it reports every problem serve would stop on.

SIGHUP (systemctl reload) reloads sources, secrets, filters and destinations
without dropping a request; listen addresses, the database, admin, limits, log,
tls paths and trusted_proxies need a restart. One serve per SQLite file; any
number on one PostgreSQL database. --demo runs a self-contained demo (make run).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			hup, stopHUP := notifyHUP() // before anything slow: SIGHUP must never kill serve
			defer stopHUP()
			// listeners.go: before anything could start a child, which must
			// not inherit LISTEN_*.
			passed, note, err := takePassedSockets()
			if err != nil {
				return &usageError{err} // the socket unit is wrong: a restart cannot fix it
			}
			setGCPercent()
			var cfg *config.Config
			var sink *demoSink
			cfgPath := "" // what SIGHUP reloads; the demo has none
			if demo {
				if cfg, sink, err = startDemo(ctx, g); err != nil {
					return err
				}
				defer sink.Close()
			} else if cfg, err = g.config(); err != nil {
				return err
			} else {
				cfgPath, _ = findConfig(g.configPath)
			}
			log := newLogger(cfg.Log, g.stderr)
			if note != "" {
				log.Warn(note)
			}
			app := NewApp(cfg, log)
			app.UsePassedSockets(passed)
			sv := newSupervisor(log)
			started := sv.starting()
			err = app.Open(ctx)
			started()
			if err != nil {
				return err
			}
			if demo {
				printDemoBanner(g.stdout, app, sink)
			}
			sv.ready(app)
			watchReloads(ctx, hup, g, cfgPath, app, sv, log) // until SIGTERM/SIGINT
			sv.stopping()
			log.Info("stopping: draining requests and deliveries", "socket_activation", app.hookHandover != nil)
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			defer cancel()
			if err := app.Stop(stopCtx); err != nil {
				return fmt.Errorf("stop: %w", err)
			}
			log.Info("stopped cleanly")
			return nil
		},
	}
	cmd.Flags().BoolVar(&demo, "demo", false, "serve a built-in demo configuration, as make run does")
	return cmd
}

// config loads, validates and returns the configuration, applying --db.
// Warnings are logged to stderr; errors make it a usage error (exit 2).
func (g *globals) config() (*config.Config, error) {
	path, err := findConfig(g.configPath)
	if err != nil {
		return nil, err
	}
	cfg, problems, err := loadConfigFile(path)
	if err != nil {
		return nil, err
	}
	if errs := config.Errors(problems); len(errs) > 0 || cfg == nil {
		return nil, &usageError{&config.ValidationError{Problems: problems}}
	}
	for _, p := range problems {
		fmt.Fprintln(g.stderr, "hookwarden:", p)
	}
	g.applyDB(cfg)
	return cfg, nil
}

// applyDB applies --db: the SQLite file it names replaces database.path
// and database.url alike.
func (g *globals) applyDB(cfg *config.Config) {
	if g.dbPath != "" {
		cfg.Database.Path = g.dbPath
		cfg.Database.URL = ""
	}
}

// newLogger logs JSON under systemd or when not on a terminal, text otherwise.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationSeconds}
	format := c.Format
	if format == "" {
		format = "json"
		if f, ok := osFile(w); ok && isTerminal(f) && os.Getenv("JOURNAL_STREAM") == "" {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationSeconds logs durations as seconds (a float), as slog users and
// log processors expect; slog's JSON handler would write nanoseconds and
// its text handler "1m30s".
func durationSeconds(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.Float64Value(a.Value.Duration().Seconds())
	}
	return a
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
