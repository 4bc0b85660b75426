package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
)

// runAckServer is the ack-only baseline: the same server timeouts as the
// receiver, reads the body (capped), verifies the Standard Webhooks
// signature with the same verifier, answers 200 and stores nothing. It is
// what a receiver would cost if recording were free.
func runAckServer(args []string) error {
	fs := flag.NewFlagSet("ack-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	v, err := signature.New(signature.Params{Scheme: "standard", Secrets: []string{os.Getenv("HOOKBENCH_SECRET")}})
	if err != nil {
		return err
	}
	const maxBody = 1 << 20
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/hooks/{source}", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength > maxBody || r.ContentLength < 0 {
			ackAnswer(w, http.StatusRequestEntityTooLarge, "too_large")
			return
		}
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(http.MaxBytesReader(w, r.Body, maxBody), body); err != nil {
			ackAnswer(w, http.StatusBadRequest, "bad_request")
			return
		}
		if err := v.Verify(&signature.Request{Header: r.Header, Body: body, URL: r.URL.RequestURI(), Now: time.Now()}); err != nil {
			ackAnswer(w, http.StatusUnauthorized, "unauthorized")
			return
		}
		ackAnswer(w, http.StatusOK, "accepted")
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := receiver.NewServer(*addr, mux)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func ackAnswer(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, `{"status":"`+status+`"}`+"\n")
}
