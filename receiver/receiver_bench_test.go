package receiver

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/benchcpu"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/filter"
	"github.com/hookwarden/hookwarden/internal/signature"
)

// nopRecorder accepts everything without storing it.
type nopRecorder struct{}

func (nopRecorder) Record(_ context.Context, r *hookwarden.Receipt) (hookwarden.RecordResult, error) {
	res := hookwarden.RecordResult{Outcome: hookwarden.Accepted, Events: make([]hookwarden.EventResult, len(r.Events))}
	for i := range res.Events {
		res.Events[i] = hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: len(r.Events[i].Destinations)}
	}
	return res, nil
}

// discardWriter is the cheapest http.ResponseWriter that still keeps headers.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkServeHook measures the receiver's own work for one Standard
// Webhooks request with a 1 KiB body: routing, reading the body, verifying
// the signature, hashing, extracting id and type, answering. The recorder
// stores nothing, so this is the CPU the HTTP path adds to the store's.
func BenchmarkServeHook(b *testing.B) { benchServeHook(b, "") }

// BenchmarkServeHookFiltered is BenchmarkServeHook with a typical content
// filter on the destination: the body is parsed as JSON once and the
// expression evaluated. Its ratio to BenchmarkServeHook is the filter's cost
// on the ack path (without the store's commit, which dominates it).
func BenchmarkServeHookFiltered(b *testing.B) {
	benchServeHook(b, `body.type == "bench.event" && event.source == "bench" && headers["user-agent"].startsWith("Svix")`)
}

func benchServeHook(b *testing.B, expr string) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	p := signature.Params{Scheme: "standard", Secrets: []string{secret}}
	v, err := signature.New(p)
	if err != nil {
		b.Fatal(err)
	}
	idx, _ := extract.Parse("header:webhook-id|header:svix-id")
	typ, _ := extract.Parse("json:type")
	var jobs int // destinations that got a job in the last request
	dest := Destination{FullName: "bench/app"}
	if expr != "" {
		if dest.Filter, err = filter.Compile(expr); err != nil {
			b.Fatal(err)
		}
	}
	rc := New([]Source{{Name: "bench", Scheme: "standard", Verifier: v, EventID: idx, EventType: typ,
		Destinations: []Destination{dest}}},
		Options{Recorder: nopRecorder{}, Logger: slog.New(slog.DiscardHandler), Notify: func(d []string) { jobs = len(d) }})

	head := `{"id":"msg_2Lh6h1cP3Ym0iJ0w","type":"bench.event","data":{"pad":"`
	body := []byte(head + strings.Repeat("x", 1024-len(head)-3) + `"}}`)
	now := time.Now()
	sh, err := signature.Sign(p, body, now, "msg_2Lh6h1cP3Ym0iJ0w")
	if err != nil {
		b.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/hooks/bench", nil)
	req.RemoteAddr = "127.0.0.1:53422"
	req.Header = sh
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Svix-Webhooks/1.24.0")
	req.ContentLength = int64(len(body))
	rd := bytes.NewReader(body)
	w := &discardWriter{h: http.Header{}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	defer benchcpu.Report(b)()
	for b.Loop() {
		jobs = 0
		rd.Reset(body)
		req.Body = io.NopCloser(rd)
		clear(w.h)
		rc.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
		if jobs != 1 {
			b.Fatalf("jobs %d, want 1 (the filter must pass)", jobs)
		}
	}
}
