package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
)

// Issue 46 point 4: a captured Mailgun signature block sent with forged
// bodies is refused before any extraction or filter runs, by a read of the
// token the store recorded, on this receiver and on a new one on the same
// store (a restart, another instance). The filter here fails on every body,
// so each evaluation is counted: one for the real request, none for the
// forged ones. The exact resend of the real request is still a duplicate.
func TestKnownTokenRefusedBeforeFilters(t *testing.T) {
	store := openStore(t)
	mg := signature.Params{Scheme: "mailgun", Secrets: []string{"k"}}
	src := source(t, "mg", mg)
	src.Destinations = []receiver.Destination{{FullName: "mg/app", Filter: mustFilter(t, `body.nope == 1`)}}
	obs := &filterObserver{errors: map[string]int{}}
	newReceiver := func() *receiver.Receiver {
		return receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store, Observer: obs,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	rc := newReceiver()
	post := func(rc *receiver.Receiver, h http.Header, body string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/hooks/mg", strings.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	h, signed, err := signature.SignBody(mg, []byte(`{"event-data":{"id":"e-1","event":"delivered"}}`), time.Now(), "tok-1")
	if err != nil {
		t.Fatal(err)
	}
	if code, got := post(rc, h, string(signed)); code != 200 || got != `{"status":"accepted"}` {
		t.Fatalf("real request: %d %s", code, got)
	}
	if n := obs.count("mg/app"); n != 1 {
		t.Fatalf("filter evaluations counted for the real request: %d, want 1", n)
	}
	for i, r := range []*receiver.Receiver{rc, rc, newReceiver()} {
		forged := strings.Replace(string(signed), `"e-1"`, fmt.Sprintf(`"forged-%d","pad":"%s"`, i, strings.Repeat("x", 64<<10)), 1)
		if code, got := post(r, h, forged); code != 401 || got != `{"status":"unauthorized"}` {
			t.Fatalf("forged body %d: %d %s, want 401", i, code, got)
		}
	}
	if n := obs.count("mg/app"); n != 1 {
		t.Fatalf("filter evaluations after forged bodies: %d, want still 1 (none ran)", n)
	}
	if code, got := post(rc, h, string(signed)); code != 200 || got != `{"status":"duplicate"}` {
		t.Fatalf("exact resend: %d %s, want duplicate", code, got)
	}
}

// failingTokens is a store whose token read fails (a hung or lost
// database): the receiver goes on, and the commit decides.
type failingTokens struct{}

func (failingTokens) SeenToken(ctx context.Context, _ string, _ [32]byte, _ time.Time) ([32]byte, bool, error) {
	return [32]byte{}, false, errors.New("read failed")
}

// The early read only saves work: when it fails, a genuine request is
// still accepted and a forged one still refused, by the insert.
func TestTokenReadFailureLeavesItToTheCommit(t *testing.T) {
	store := openStore(t)
	mg := signature.Params{Scheme: "mailgun", Secrets: []string{"k"}}
	rc := receiver.New([]receiver.Source{source(t, "mg", mg)}, receiver.Options{Recorder: store, Tokens: failingTokens{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h, signed, err := signature.SignBody(mg, []byte(`{"event-data":{"id":"e-1","event":"delivered"}}`), time.Now(), "tok-1")
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(signed), `"e-1"`, `"e-2"`, 1)
	for _, c := range []struct {
		body string
		code int
	}{{string(signed), 200}, {forged, 401}} {
		req := httptest.NewRequest(http.MethodPost, "/hooks/mg", strings.NewReader(c.body))
		for k, v := range h {
			req.Header[k] = v
		}
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		if w.Code != c.code {
			t.Fatalf("%.40q: %d %s, want %d", c.body, w.Code, w.Body, c.code)
		}
	}
}
