package main

// The systemd side of serve (Type=notify, WatchdogSec=): READY=1 once the
// database is open and both listeners are bound, RELOADING=1/READY=1 around a
// SIGHUP reload, STOPPING=1 when the drain begins, and WATCHDOG=1 pings that
// are sent only while the process is really healthy (a ping from a timer would prove nothing): the
// writer commits a transaction within the ping period, the last write
// succeeded, and every destination's workers are turning (ready()). A wedged
// writer or dispatcher withholds the ping and systemd restarts the process.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/internal/sdnotify"
)

// supervisor talks to systemd for one serve run. Without $NOTIFY_SOCKET
// every method is a no-op.
type supervisor struct {
	n     *sdnotify.Notifier
	log   *slog.Logger
	every time.Duration // ping period: half of WATCHDOG_USEC; 0 = no watchdog

	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newSupervisor(log *slog.Logger) *supervisor {
	s := &supervisor{n: sdnotify.FromEnv(), log: log}
	wd, ok, err := sdnotify.WatchdogInterval()
	if err != nil {
		log.Warn("systemd watchdog disabled", "err", err)
	}
	if ok && s.n.Enabled() {
		s.every = wd / 2
	}
	return s
}

func (s *supervisor) send(states ...string) {
	if err := s.n.Notify(states...); err != nil {
		s.log.Warn("systemd notification not sent", "err", err)
	}
}

// starting keeps the watchdog quiet while Start opens and migrates the
// database, which on a large file can outlast WatchdogSec. It pings
// unconditionally, but only until READY: start-up is bounded by systemd's
// own TimeoutStartSec, not by the watchdog. The returned func stops it.
func (s *supervisor) starting() (done func()) {
	s.send(sdnotify.Status("starting: opening the database"))
	if s.every == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.send(sdnotify.Watchdog)
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// ready tells systemd that start-up is done and starts the health-gated
// watchdog pings.
func (s *supervisor) ready(app *App) {
	s.send(sdnotify.Ready, sdnotify.Status(servingStatus(app)))
	if s.every == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.wg.Go(func() { s.watchdog(ctx, app.watchdogCheck) })
	s.log.Info("systemd watchdog on", "ping_every", s.every)
}

func (s *supervisor) reloading() {
	s.send(sdnotify.Reloading, sdnotify.Status("reloading the configuration"))
}

// reloaded ends a reload; a rejected one leaves the service running as it
// was, and the status line says so until the next reload.
func (s *supervisor) reloaded(app *App, err error) {
	status := servingStatus(app)
	if err != nil {
		status = "last reload rejected (see the log); " + status
	}
	s.send(sdnotify.Ready, sdnotify.Status(status))
}

// stopping stops the pings and tells systemd the drain has begun; systemd
// then stops watching the watchdog and waits up to TimeoutStopSec.
func (s *supervisor) stopping() {
	if s.stop != nil {
		s.stop()
		s.wg.Wait()
	}
	s.send(sdnotify.Stopping, sdnotify.Status("stopping: draining deliveries"))
}

func servingStatus(app *App) string {
	return fmt.Sprintf("serving webhooks on %s, admin on %s", app.HookAddr(), app.AdminAddr())
}
