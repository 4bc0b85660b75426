package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/internal/signature"
)

// demoConfig is what `make run` (serve --demo) serves: one Standard Webhooks
// source delivering to a small built-in app that prints what it receives.
//
//go:embed demo.yaml
var demoConfig []byte

const (
	demoSecretEnv  = "HOOKWARDEN_DEMO_SECRET"
	demoSinkAddr   = "127.0.0.1:8082"
	demoSecretFile = "demo.secret"
)

// demoSecret returns the demo source's secret, generated on first use and
// kept next to the database so restarts and `sign --demo` agree. Only serve
// creates it (create): `sign --demo` signing with a fresh secret would
// only get 401 from the running demo.
func demoSecret(dbPath string, create bool) (string, error) {
	path := filepath.Join(filepath.Dir(dbPath), demoSecretFile)
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		return string(b), nil
	}
	if !create {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return "", usageErrorf("sign --demo: no demo secret at %s: run this from the directory where `make run` "+
			"(serve --demo) runs, or pass the demo's database with --db DIR/hookwarden.db", path)
	}
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
		return "", fmt.Errorf("write demo secret: %w", err)
	}
	return secret, nil
}

// demoConfigLoaded returns the demo configuration with its secret in place;
// create makes the secret when there is none yet (serve only).
func demoConfigLoaded(g *globals, create bool) (*config.Config, string, error) {
	dbPath := config.DefaultDatabasePath
	if g.dbPath != "" {
		dbPath = g.dbPath
	}
	secret, err := demoSecret(dbPath, create)
	if err != nil {
		return nil, "", err
	}
	os.Setenv(demoSecretEnv, secret)
	cfg, problems, err := loadConfig(demoConfig, "built-in demo configuration")
	if err != nil {
		return nil, "", err
	}
	if errs := config.Errors(problems); len(errs) > 0 {
		return nil, "", &config.ValidationError{Problems: errs}
	}
	cfg.Database.Path = dbPath
	return cfg, secret, nil
}

func startDemo(ctx context.Context, g *globals) (*config.Config, *demoSink, error) {
	cfg, secret, err := demoConfigLoaded(g, true)
	if err != nil {
		return nil, nil, err
	}
	sink, err := newDemoSink(demoSinkAddr, secret, g.stdout)
	if err != nil {
		return nil, nil, fmt.Errorf("demo app on %s: %w", demoSinkAddr, err)
	}
	return cfg, sink, nil
}

func printDemoBanner(w io.Writer, app *App, sink *demoSink) {
	demoBanner(w, app.HookAddr(), app.AdminAddr(), app.Store.Path(), sink.addr)
}

// demoBanner says what runs where, and the commands to try, with the
// database named by --db: read commands run from another directory, or
// without the demo's configuration, find nothing otherwise.
func demoBanner(w io.Writer, hook, adminAddr, db, sinkAddr string) {
	fmt.Fprintf(w, `
Hookwarden demo is running.
  receiver   http://%s/hooks/demo    (Standard Webhooks, secret in %s)
  dashboard  http://%s/   (also /metrics, /api/stats, /healthz)
  database   %s
  demo app   http://%s/events  (prints every delivery below)

Send a signed event from another terminal, in this directory:
  ./bin/hookwarden sign --demo --send http://%s/hooks/demo
Send it twice (same id) and it is acknowledged as a duplicate, delivered once.
Look at what was recorded:
  ./bin/hookwarden events list --db %s
Stop with Ctrl-C.

`, hook, filepath.Join(filepath.Dir(db), demoSecretFile), adminAddr, db, sinkAddr, hook, db)
}

// demoSink is the demo's "your app": it verifies Hookwarden's Standard
// Webhooks signature and prints each delivery.
type demoSink struct {
	addr string
	srv  *http.Server
	mu   sync.Mutex
	out  io.Writer
}

func newDemoSink(addr, secret string, out io.Writer) (*demoSink, error) {
	v, err := signature.New(signature.Params{Scheme: "standard", Secrets: []string{secret}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &demoSink{addr: ln.Addr().String(), out: out}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		verdict := "signature ok"
		if err := v.Verify(&signature.Request{Header: r.Header, Body: body}); err != nil {
			verdict = "SIGNATURE INVALID: " + err.Error()
		}
		s.mu.Lock()
		fmt.Fprintf(s.out, "demo app <- %s  type=%s attempt=%s  Idempotency-Key=%s  (%s)\n    %s\n",
			r.Header.Get("Hookwarden-Event-Id"), r.Header.Get("Hookwarden-Event-Type"), r.Header.Get("Hookwarden-Attempt"),
			r.Header.Get("Idempotency-Key"), verdict, body)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(out, "demo app stopped:", err)
		}
	}()
	return s, nil
}

func (s *demoSink) Close() error { return s.srv.Close() }
