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
// (a request uses the sources it started with), and each destination has its
// own worker pool, so an unchanged destination keeps its pool and a changed
// one hands over: the old pool stops leasing and drains its in-flight
// attempts, and only then the new pool starts, so a destination never has
// more than its concurrency in flight.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/worker"
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
	if g.dbPath != "" {
		next.Database.Path = g.dbPath
	}
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
	// Nothing can fail from here on.
	if pair != nil {
		a.certs.cert.Store(pair)
	}
	res.kept, res.replaced, res.added, res.removed = a.Workers.apply(dests, fingerprints(&merged))
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
	diff("limits.max_body_bytes", cur.Limits.MaxBodyBytes, next.Limits.MaxBodyBytes)
	diff("limits.max_inflight_bytes", cur.Limits.MaxInflightBytes, next.Limits.MaxInflightBytes)
	diff("limits.max_connections", cur.Limits.MaxConnections, next.Limits.MaxConnections)
	diff("limits.commit_timeout", cur.Limits.CommitTimeout, next.Limits.CommitTimeout)
	diff("redact_headers", cur.RedactHeaders, next.RedactHeaders)
	diff("log.level", cur.Log.Level, next.Log.Level)
	diff("log.format", cur.Log.Format, next.Log.Format)
	diff("tls.cert", cur.TLS.Cert, next.TLS.Cert)
	diff("tls.key", cur.TLS.Key, next.TLS.Key)
	if !slices.Equal(cur.TrustedProxies, next.TrustedProxies) {
		keys = append(keys, "trusted_proxies")
	}
	return keys
}

// destFingerprint is what makes a destination "the same" across a reload:
// its settings (minus the type filter, which is the receiver's business)
// and its resolved signing secret (a file: secret may change behind the
// same reference).
type destFingerprint struct {
	cfg    config.Destination
	secret string
}

func fingerprints(cfg *config.Config) map[string]destFingerprint {
	fps := map[string]destFingerprint{}
	for _, s := range cfg.Sources {
		for _, d := range s.Destinations {
			fp := destFingerprint{cfg: d}
			fp.cfg.Types = nil
			if d.SigningSecret != "" {
				// Already resolved once by buildPipeline; an error here means the
				// file changed in between, which only makes the fingerprint differ.
				fp.secret, _ = d.SigningSecret.Resolve()
			}
			fps[d.FullName(s.Name)] = fp
		}
	}
	return fps
}

// workerSet runs one worker.Pool per destination so that a reload can
// replace one destination without touching the in-flight work of the others.
type workerSet struct {
	q    worker.Queue
	opts worker.Options
	log  *slog.Logger
	ctx  context.Context // parent of every pool: not cancelled by the serve context

	active atomic.Pointer[map[string]*destWorker] // read on every receipt (Notify)
	all    sync.WaitGroup                         // every pool goroutine, draining ones included
}

// destWorker is one destination's pool.
type destWorker struct {
	fp     destFingerprint
	pool   *worker.Pool
	cancel context.CancelFunc
	after  <-chan struct{} // the predecessor's done: start only when it drained
	done   chan struct{}   // closed when this pool (and every predecessor) stopped
	since  time.Time       // when it was created
	runAt  atomic.Int64    // unix nanos when Run was called; 0 while waiting
}

// handoffLimit is how long a replaced destination's successor may wait for
// the old pool to drain before Healthy complains: the pool's drain timeout
// plus room to record the last attempts.
const handoffLimit = worker.DefaultDrainTimeout + 30*time.Second

func newWorkerSet(q worker.Queue, opts worker.Options, log *slog.Logger) *workerSet {
	ws := &workerSet{q: q, opts: opts, log: log, ctx: context.Background()}
	empty := map[string]*destWorker{}
	ws.active.Store(&empty)
	return ws
}

// Start runs a pool for each destination. ctx is the parent of the pools;
// Stop, not ctx, stops them.
func (ws *workerSet) Start(ctx context.Context, dests []worker.Destination, fps map[string]destFingerprint) {
	ws.ctx = context.WithoutCancel(ctx)
	m := make(map[string]*destWorker, len(dests))
	for _, d := range dests {
		m[d.Name] = ws.start(d, fps[d.Name], nil)
	}
	ws.active.Store(&m)
}

func (ws *workerSet) start(d worker.Destination, fp destFingerprint, after <-chan struct{}) *destWorker {
	ctx, cancel := context.WithCancel(ws.ctx)
	dw := &destWorker{fp: fp, pool: worker.New(ws.q, []worker.Destination{d}, ws.opts), cancel: cancel,
		after: after, done: make(chan struct{}), since: time.Now()}
	ws.all.Add(1)
	go func() {
		defer ws.all.Done()
		defer close(dw.done)
		defer closeDeliverer(d.Deliverer)
		if after != nil {
			select {
			case <-after:
			case <-ctx.Done():
				// Cancelled before it ran; still wait so that done keeps
				// meaning "nothing of this destination is in flight".
				<-after
				return
			}
		}
		dw.runAt.Store(time.Now().UnixNano())
		if err := dw.pool.Run(ctx); err != nil {
			ws.log.Error("workers stopped", "destination", d.Name, "err", err)
		}
	}()
	return dw
}

// apply switches to a new set of destinations: unchanged ones keep their
// pool (the freshly built deliverer is closed unused), changed ones get a
// successor that starts once the old pool drained, new ones start at once,
// and missing ones are drained and stopped.
func (ws *workerSet) apply(dests []worker.Destination, fps map[string]destFingerprint) (kept, replaced, added int, removed []string) {
	cur := *ws.active.Load()
	next := make(map[string]*destWorker, len(dests))
	for _, d := range dests {
		fp := fps[d.Name]
		old := cur[d.Name]
		switch {
		case old != nil && reflect.DeepEqual(old.fp, fp):
			next[d.Name] = old
			closeDeliverer(d.Deliverer)
			kept++
		case old != nil:
			old.cancel()
			next[d.Name] = ws.start(d, fp, old.done)
			replaced++
		default:
			next[d.Name] = ws.start(d, fp, nil)
			added++
		}
	}
	for name, old := range cur {
		if next[name] == nil {
			old.cancel()
			removed = append(removed, name)
		}
	}
	slices.Sort(removed)
	ws.active.Store(&next)
	return kept, replaced, added, removed
}

// Notify wakes the named destinations' workers (receiver.Options.Notify).
func (ws *workerSet) Notify(destinations ...string) {
	m := *ws.active.Load()
	if len(destinations) == 0 {
		for _, dw := range m {
			dw.pool.Notify()
		}
		return
	}
	for _, name := range destinations {
		if dw := m[name]; dw != nil {
			dw.pool.Notify(name)
		}
	}
}

// NotifyCreated wakes the named destinations' workers after new jobs were
// committed (receiver.Options.Notify); jobs handed over through Reserve need
// no wake-up (worker.Pool.NotifyCreated).
func (ws *workerSet) NotifyCreated(destinations ...string) {
	m := *ws.active.Load()
	for _, name := range destinations {
		if dw := m[name]; dw != nil {
			dw.pool.NotifyCreated(name)
		}
	}
}

// Reserve is hookwarden.Direct: a slot of the destination's active pool.
// The slot belongs to that pool, so a reload between Reserve and Start
// cannot move the job to another.
func (ws *workerSet) Reserve(destination string) (hookwarden.Slot, bool) {
	if dw := (*ws.active.Load())[destination]; dw != nil {
		return dw.pool.Reserve(destination)
	}
	return nil, false
}

// Healthy is the workers' half of /readyz and of the watchdog: every active
// destination's pool is healthy, or is a successor waiting (not too long)
// for its predecessor to drain.
func (ws *workerSet) Healthy() error {
	var errs []error
	for name, dw := range *ws.active.Load() {
		runAt := dw.runAt.Load()
		if runAt == 0 {
			select {
			case <-dw.done:
				errs = append(errs, fmt.Errorf("worker %s: %w", name, worker.ErrNotRunning))
			default:
				if age := time.Since(dw.since); age > handoffLimit {
					errs = append(errs, fmt.Errorf("worker %s: still waiting after %s for the replaced workers to drain",
						name, age.Round(time.Second)))
				}
			}
			continue
		}
		err := dw.pool.Healthy()
		// Run was just called and has not marked itself running yet.
		if errors.Is(err, worker.ErrNotRunning) && time.Since(time.Unix(0, runAt)) < time.Second {
			select {
			case <-dw.done:
			default:
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop stops every pool, replaced ones still draining included, and waits:
// each lets its in-flight attempts finish up to the pool's drain timeout.
func (ws *workerSet) Stop() {
	for _, dw := range *ws.active.Load() {
		dw.cancel()
	}
	ws.all.Wait()
}

// closeDeliverer releases what a deliverer holds (idle HTTP connections).
func closeDeliverer(d worker.Deliverer) {
	if c, ok := d.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// notifyHUP routes SIGHUP to a channel (its default action would end the
// process). stop restores the default.
func notifyHUP() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch, func() { signal.Stop(ch) }
}
