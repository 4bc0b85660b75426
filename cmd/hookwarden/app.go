package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookwarden/hookwarden/internal/admin"
	"github.com/hookwarden/hookwarden/internal/batch"
	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/filter"
	"github.com/hookwarden/hookwarden/internal/metrics"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/worker"
)

// App is a running `hookwarden serve`: store, receiver, workers and admin
// server. Open and Stop are separate so tests can boot it on :0.
type App struct {
	cfg *config.Config
	log *slog.Logger

	Store    hookwarden.Store
	Metrics  *metrics.Metrics
	Receiver *receiver.Receiver
	// Workers delivers to every destination; a reload (reload.go) applies
	// the new destinations to it, which replaces a changed one without
	// disturbing the others. It owns the deliverers.
	Workers *worker.Pool

	hookSrv, adminSrv *http.Server
	hookLn, adminLn   net.Listener
	runID             int64
	unlock            func() error  // gives up the store's owner lock, held from Open to the end of closeAll
	certs             *certReloader // nil without tls.cert/tls.key
	reloadMu          sync.Mutex    // one Reload at a time

	// Socket activation (listeners.go): the sockets systemd passed, the
	// receiver's connections while it hands over, and the stop in progress.
	passed       passedSockets
	hookHandover *handoverListener
	adminPassed  bool
	stopping     atomic.Bool
	// avail counts the receiver's answers per source and minute; its
	// minutes with a 503 go to the store (availability.go).
	avail *availability

	// countInstances refreshes hookwarden_instances_up (nil: the store is
	// one process's).
	countInstances func(context.Context)

	// backfill runs serve's backfills (backfillserve.go): automatic ones,
	// and those the API and the dashboard start, on bg.
	backfill *backfiller
	bg       context.Context
	stopBG   context.CancelFunc
	wg       sync.WaitGroup
}

// NewApp prepares an App for a validated configuration.
func NewApp(cfg *config.Config, log *slog.Logger) *App {
	return &App{cfg: cfg, log: log}
}

// Open opens the database, binds both listeners and starts every goroutine.
// When it returns nil the receiver is accepting.
func (a *App) Open(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			a.closeAll()
		}
	}()
	dests := destinationNames(a.cfg)
	a.Metrics = metrics.New(a.log)
	bind := func() error {
		if a.hookLn != nil {
			return nil
		}
		return a.listen() // listeners.go: bound, or passed by systemd
	}
	// A new SQLite database: the ports first, so that a port in use leaves
	// no file and no directory behind. An existing one is locked first, so
	// that a second serve is told which process owns it.
	if newSQLite(a.cfg) {
		if err := bind(); err != nil {
			return err
		}
	}
	if a.Store, a.unlock, err = openServeStore(ctx, a.cfg, a.log, a.Metrics.Commit); err != nil {
		return err
	}
	if count, ok := liveInstances(a.Store); ok {
		up := prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookwarden_instances_up",
			Help: "serve processes sharing this store with a fresh heartbeat (PostgreSQL), refreshed with each heartbeat."})
		a.Metrics.Registry.MustRegister(up)
		a.countInstances = func(ctx context.Context) {
			if n, err := count(ctx, gapStale); err == nil {
				up.Set(float64(n))
			}
		}
	}
	if count, ok := claimsInMemory(a.Store); ok {
		a.Metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hookwarden_claims_in_memory",
			Help: "Claims serve holds in memory (SQLite: the newest claims, about 83 bytes each), read again at each start."},
			func() float64 { return float64(count()) }))
	}
	a.Metrics.RegisterOutbox(a.Store, dests)
	var srcNames []string
	for _, s := range a.cfg.Sources {
		srcNames = append(srcNames, s.Name)
	}
	// Seed the absence clock from the file, so a restart does not reset it.
	last, err := a.Store.LastAccepted(ctx, srcNames)
	if err != nil {
		return err
	}
	for _, s := range a.cfg.Sources {
		a.Metrics.InitSource(s.Name)
		a.Metrics.SetRetentionMargin(s.Name, a.cfg.RetentionMargin(&s))
		a.Metrics.SetExpectWithin(s.Name, s.ExpectWithin.D())
		a.Metrics.SetLastAccepted(s.Name, last[s.Name])
		if s.Backfill != nil {
			a.Metrics.InitBackfill(s.Name)
		}
	}
	for _, d := range dests {
		a.Metrics.InitDestination(d)
	}
	// Flow control (pause, rate, order_by) is kept by the store; it needs
	// the policies before the first lease and the first receipt.
	if err := a.Store.SetFlow(ctx, a.cfg.FlowPolicies()); err != nil {
		return err
	}
	if n, err := a.Store.ReleaseLeases(ctx); err != nil {
		return err
	} else if n > 0 {
		a.log.Info("jobs in flight at the last stop are due again", "jobs", n)
	}

	sources, wdests, closers, err := buildPipeline(a.cfg)
	if err != nil {
		for _, c := range closers {
			_ = c()
		}
		return err
	}
	a.Workers = worker.New(a.Store, nil, worker.Options{Logger: a.log, OnAttempt: a.Metrics.Attempt})
	if _, err := a.Workers.Apply(wdests); err != nil { // the pool owns the deliverers from here on
		return err
	}
	a.Metrics.RegisterReady(a.ready)
	proxies, err := config.ParseTrustedProxies(a.cfg.TrustedProxies)
	if err != nil {
		return err
	}
	tokens, _ := a.Store.(receiver.TokenReader) // both stores: a known Mailgun replay is refused before the filters
	a.avail = newAvailability(a.Metrics)
	a.Receiver = receiver.New(sources, receiver.Options{
		Recorder:             loggedRecorder{a.Store, a.log},
		Tokens:               tokens,
		MaxBodyBytes:         a.cfg.Limits.MaxBodyBytes,
		MaxInflightBytes:     a.cfg.Limits.MaxInflightBytes,
		MaxInflightPerClient: a.cfg.Limits.MaxInflightBytesPerClient,
		MinBodyRate:          a.cfg.Limits.MinBodyBytesPerSecond,
		SlowBodyGrace:        a.cfg.Limits.SlowBodyGrace.D(),
		CommitTimeout:        a.cfg.Limits.CommitTimeout.D(),
		RedactHeaders:        a.cfg.RedactHeaders,
		Notify:               func(d []string) { a.Workers.NotifyCreated(d...) },
		Observer:             a.avail,
		Logger:               a.log,
		TrustedProxies:       proxies,
	})
	a.backfill = a.newServeBackfiller()
	a.Metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hookwarden_receiver_inflight_bytes",
		Help: "Request body bytes held in memory now, of limits.max_inflight_bytes."},
		func() float64 { return float64(a.Receiver.InflightBytes()) }))

	token := ""
	if a.cfg.Admin.Token != "" {
		if token, err = a.cfg.Admin.Token.Resolve(); err != nil {
			return err
		}
	}
	adm := admin.New(admin.Options{
		Token:          token,
		Ready:          a.ready,
		Metrics:        promhttp.HandlerFor(a.Metrics.Registry, promhttp.HandlerOpts{}),
		Logger:         a.log,
		TrustedProxies: proxies, // the client that wrong tokens count against
	})
	admin.NewAPI(a.apiOptions()).Register(adm.Router()) // opsapi.go: /api/*
	// dashboard.go: GET /, the login form and the Replay button.
	dash, err := a.newDashboard(adm, token != "")
	if err != nil {
		return err
	}
	dash.Register(adm.Router())

	if err := bind(); err != nil {
		return err
	}
	// A run is recorded only once both listeners are bound: a serve that
	// never listened was no run, and `gaps` must not show it as one.
	if a.runID, err = a.Store.StartRun(ctx, versionString()); err != nil {
		return err
	}
	if a.countInstances != nil {
		a.countInstances(ctx)
	}
	a.hookSrv = receiver.NewServer(a.cfg.Listen, a.Receiver)
	a.adminSrv = admin.NewServer(a.cfg.Admin.Listen, dash.Front(adm))
	a.closeWhileStopping()

	if err := a.Workers.Open(ctx); err != nil {
		return err
	}
	// New jobs go straight to a free delivery slot (committed leased), so
	// the usual delivery costs no lease write and no event read.
	a.Store.SetDirect(a.Workers)
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	a.bg, a.stopBG = bg, stopBG
	a.serve(a.hookSrv, a.hookLn, "receiver")
	a.serve(a.adminSrv, a.adminLn, "admin")
	a.wg.Add(1)
	go a.heartbeat(bg)
	a.wg.Add(1)
	go a.availabilityLoop(bg)
	a.wg.Add(1)
	go a.outboxLoop(bg)
	a.wg.Add(1)
	go a.pruneLoop(bg) // loops.go: retention, hourly, in small batches
	a.wg.Add(1)
	go a.autoBackfill(bg) // backfillserve.go: outage windows found at start
	if w, ok := a.Store.(claimWarmer); ok {
		if need, why := warmUpNeeded(a.Store); need {
			a.wg.Add(1)
			go a.warmClaims(bg, w)
		} else {
			a.log.Info("claim index not read at start", "reason", why)
		}
	}
	if k, ok := a.Store.(plannerStatsKeeper); ok {
		a.wg.Add(1)
		go a.plannerStatsLoop(bg, k)
	}
	a.log.Info("hookwarden serving", "receiver", a.hookLn.Addr().String(), "admin", a.adminLn.Addr().String(),
		"database", a.Store.Path(), "sources", len(sources), "destinations", len(wdests), "version", versionString())
	return nil
}

func (a *App) serve(srv *http.Server, ln net.Listener, name string) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		err := srv.Serve(ln)
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !(a.stopping.Load() && isClosedListener(err)) {
			a.log.Error("listener failed", "server", name, "err", err)
		}
	}()
}

// ready is /readyz: not draining, the last write succeeded and the workers
// are turning.
func (a *App) ready(context.Context) error {
	if a.stopping.Load() || a.Receiver != nil && a.Receiver.Draining() {
		return errors.New("draining: shutting down, refusing new webhooks")
	}
	if err := a.Store.Healthy(); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if err := a.Workers.Healthy(); err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	return nil
}

// HookAddr and AdminAddr are the bound addresses (useful with :0).
func (a *App) HookAddr() string  { return a.hookLn.Addr().String() }
func (a *App) AdminAddr() string { return a.adminLn.Addr().String() }

// Stop shuts down in order: refuse new webhooks (503), or with systemd's
// sockets hand over to the next process (handOver: no 503), and finish the
// ones in flight, let running deliveries finish (up to the pool's drain timeout),
// record the clean stop, close the database. ctx bounds the HTTP part.
func (a *App) Stop(ctx context.Context) error {
	if !a.handOver(ctx) { // listeners.go: with systemd's sockets, a grace, no 503
		a.Receiver.Drain()
	}
	var errs []error
	if err := a.hookSrv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("receiver shutdown: %w", err))
	}
	a.Workers.Close()
	a.stopBG()
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The receiver is shut: every answer is counted, the current minute's too.
	if err := a.avail.flush(final, a.Store, true); err != nil {
		errs = append(errs, err)
	}
	if err := a.Store.StopRun(final, a.runID); err != nil {
		errs = append(errs, err)
	}
	if err := a.adminSrv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("admin shutdown: %w", err))
	}
	a.wg.Wait()
	a.closeAll()
	return errors.Join(errs...)
}

func (a *App) closeAll() {
	if a.Workers != nil {
		a.Workers.Close() // after Stop: returns at once
	}
	if a.hookLn != nil && a.hookSrv == nil {
		a.hookLn.Close()
	}
	if a.adminLn != nil && a.adminSrv == nil {
		a.adminLn.Close()
	}
	if a.Store != nil {
		if err := a.Store.Close(); err != nil {
			a.log.Error("close database", "err", err)
		}
	}
	if a.unlock != nil {
		_ = a.unlock() // after the store: the file is free once it is closed
	}
}

func destinationNames(cfg *config.Config) []string {
	var names []string
	for _, s := range cfg.Sources {
		for _, d := range s.Destinations {
			names = append(names, d.FullName(s.Name))
		}
	}
	return names
}

// buildPipeline turns the configuration into receiver sources and worker
// destinations. It is also the validation of a reloaded configuration: it
// fails on anything that cannot run.
func buildPipeline(cfg *config.Config) ([]receiver.Source, []worker.Destination, []func() error, error) {
	var sources []receiver.Source
	var dests []worker.Destination
	var closers []func() error
	for i, s := range cfg.Sources {
		path := fmt.Sprintf("sources[%d]", i)
		params, err := s.SignatureParams()
		if err != nil {
			return nil, nil, closers, fmt.Errorf("%s.secrets: %w", path, err)
		}
		v, err := signature.New(params)
		if err != nil {
			return nil, nil, closers, fmt.Errorf("%s: %w", path, err)
		}
		idx, err := extract.Parse(s.EventID)
		if err != nil {
			return nil, nil, closers, fmt.Errorf("%s.event_id: %w", path, err)
		}
		typ, err := extract.Parse(s.EventType)
		if err != nil {
			return nil, nil, closers, fmt.Errorf("%s.event_type: %w", path, err)
		}
		preset, _ := signature.PresetFor(s.Scheme)
		rs := receiver.Source{Name: s.Name, Scheme: s.Scheme, Verifier: v,
			EventID: idx, EventType: typ, Batch: preset.Batch, BodyReplayCheck: s.BodyReplayCheck(),
			Split: batch.For(s.Scheme), Secrets: params.Secrets, DeferredType: s.Discord.DeferredType}
		if s.VerifyToken != "" {
			if rs.VerifyToken, err = s.VerifyToken.Resolve(); err != nil {
				return nil, nil, closers, fmt.Errorf("%s.verify_token: %w", path, err)
			}
		}
		if rs.Marks, err = receiverMarks(&s, path); err != nil {
			return nil, nil, closers, err
		}
		for j, d := range s.Destinations {
			full := d.FullName(s.Name)
			dp := fmt.Sprintf("%s.destinations[%d]", path, j)
			rd := receiver.Destination{FullName: full, Match: d.MatchType}
			if d.Filter != "" {
				if rd.Filter, err = filter.Compile(d.Filter); err != nil {
					return nil, nil, closers, fmt.Errorf("%s.filter: %w", dp, err)
				}
			}
			if d.OrderBy != "" {
				if rd.OrderBy, err = extract.Parse(d.OrderBy); err != nil {
					return nil, nil, closers, fmt.Errorf("%s.order_by: %w", dp, err)
				}
			}
			rs.Destinations = append(rs.Destinations, rd)
			var del worker.Deliverer
			if d.URL != "" {
				secret := ""
				if d.SigningSecret != "" {
					if secret, err = d.SigningSecret.Resolve(); err != nil {
						return nil, nil, closers, fmt.Errorf("%s.signing_secret: %w", dp, err)
					}
				}
				h, err := worker.NewHTTP(worker.HTTPConfig{URL: d.URL, Timeout: d.Timeout.D(), SigningSecret: secret,
					SignAs: d.SignAs, UserAgent: "hookwarden/" + versionString(), Concurrency: d.Concurrency})
				if err != nil {
					return nil, nil, closers, fmt.Errorf("%s: %w", dp, err)
				}
				closers = append(closers, h.Close)
				del = h
			} else {
				c, err := worker.NewCommand(worker.CommandConfig{Argv: d.Command, Env: d.Env, Workdir: d.Workdir, Timeout: d.Timeout.D()})
				if err != nil {
					return nil, nil, closers, fmt.Errorf("%s: %w", dp, err)
				}
				del = c
			}
			dests = append(dests, worker.Destination{Name: full, Deliverer: del, Concurrency: d.Concurrency,
				MaxAttempts: d.MaxAttempts, Timeout: d.Timeout.D(), Ordered: d.OrderBy != "",
				Backoff: worker.Backoff{Initial: d.Backoff.Initial.D(), Max: d.Backoff.Max.D()}})
		}
		sources = append(sources, rs)
	}
	return sources, dests, closers, nil
}
