package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// TestMain lets the test binary stand in for hookwarden serve
// (HOOKBENCH_FAKE_SERVE): it binds the admin address of its configuration
// as serve does, or fails as serve does when the port is taken.
func TestMain(m *testing.M) {
	if os.Getenv("HOOKBENCH_FAKE_SERVE") != "" {
		fakeServe()
		return
	}
	goleak.VerifyTestMain(m)
}

var adminListen = regexp.MustCompile(`(?m)^admin:\n  listen: "([^"]+)"`)

func fakeServe() {
	cfg := os.Args[len(os.Args)-1]
	b, err := os.ReadFile(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookwarden:", err)
		os.Exit(2)
	}
	// Each start leaves a line, so the test can count them.
	f, _ := os.OpenFile(filepath.Join(filepath.Dir(cfg), "starts"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	fmt.Fprintln(f, "start")
	f.Close()
	if os.Getenv("HOOKBENCH_FAKE_FAIL") != "" {
		fmt.Fprintln(os.Stderr, "hookwarden: database.path: permission denied")
		os.Exit(1)
	}
	m := adminListen.FindSubmatch(b)
	if m == nil {
		fmt.Fprintln(os.Stderr, "hookwarden: no admin listen in", cfg)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", string(m[1]))
	if err != nil {
		fmt.Fprintf(os.Stderr, "hookwarden: admin listen: %v\n", err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	<-stop
	os.Exit(0)
}

// takenPorts holds a loopback port and makes freePort hand it out as the
// admin address (every second call) for the first n starts, then free
// ports. It returns the held address.
func takenPorts(t *testing.T, n int) string {
	t.Helper()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	taken := held.Addr().String()
	real := freePort
	calls := 0
	freePort = func() (string, error) {
		calls++
		if calls%2 == 0 && calls/2 <= n {
			return taken, nil
		}
		return real()
	}
	t.Cleanup(func() { freePort = real })
	return taken
}

func fakeOptions(t *testing.T) hwOptions {
	t.Helper()
	t.Setenv("HOOKBENCH_FAKE_SERVE", "1")
	return hwOptions{bin: os.Args[0], dir: t.TempDir(), secret: "s", sinkURL: "http://127.0.0.1:1/"}
}

func starts(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "starts"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "start")
}

// A port taken between freePort and serve's bind costs a start, not the run.
func TestStartHookwardenRetriesATakenPort(t *testing.T) {
	o := fakeOptions(t)
	taken := takenPorts(t, 1)

	s, err := startHookwarden(context.Background(), o)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer s.stop()
	if s.adminAddr == taken {
		t.Fatalf("serve runs on the taken port %s", s.adminAddr)
	}
	if n := starts(t, o.dir); n != 2 {
		t.Fatalf("%d starts, want 2 (one refused, one on new ports)", n)
	}
	if !strings.Contains(tail(s.logPath), "address already in use") {
		t.Fatalf("the refused start is not in the log: %s", tail(s.logPath))
	}
}

// A port taken at every try still ends the start, after startAttempts.
func TestStartHookwardenGivesUp(t *testing.T) {
	o := fakeOptions(t)
	takenPorts(t, startAttempts)

	_, err := startHookwarden(context.Background(), o)
	var taken *portTakenError
	if !errors.As(err, &taken) {
		t.Fatalf("start: %v, want a port taken", err)
	}
	if n := starts(t, o.dir); n != startAttempts {
		t.Fatalf("%d starts, want %d", n, startAttempts)
	}
}

// Any other exit before ready is not retried: it is the run's error.
func TestStartHookwardenOtherExitNotRetried(t *testing.T) {
	o := fakeOptions(t)
	t.Setenv("HOOKBENCH_FAKE_FAIL", "1")
	_, err := startHookwarden(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("start: %v, want serve's own error", err)
	}
	var taken *portTakenError
	if errors.As(err, &taken) {
		t.Fatalf("start: %v, taken for a port taken", err)
	}
	if n := starts(t, o.dir); n != 1 {
		t.Fatalf("%d starts, want 1", n)
	}
}
