package receiver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/benchcpu"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// BenchmarkAckSequence is the ack path of a Telegram-shaped source (its
// update_id a sequence, message.date its event time: the bookkeeping of
// issue 48) against the same source without either, in one run, into a
// real SQLite store; cpu-ns/op is the process's CPU per ack.
func BenchmarkAckSequence(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchAckMarks(b, false) })
	b.Run("sequence", func(b *testing.B) { benchAckMarks(b, true) })
}

func benchAckMarks(b *testing.B, marks bool) {
	store, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "hw.db"), sqlitestore.Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	if _, err := store.StartRun(context.Background(), "bench"); err != nil {
		b.Fatal(err)
	}
	v, _ := signature.New(signature.Params{Scheme: "none"})
	id, _ := extract.Parse("json:update_id")
	typ, _ := extract.Parse("json:type")
	src := receiver.Source{Name: "tg", Scheme: "none", Verifier: v, EventID: id, EventType: typ,
		Destinations: []receiver.Destination{{FullName: "tg/app"}}}
	if marks {
		seq, _ := extract.Parse("json:update_id")
		et, _ := extract.Parse("json:message.date")
		src.Marks = &receiver.Marks{Sequence: seq, Reset: hookwarden.DefaultSequenceReset, Horizon: 24 * time.Hour, EventTime: et}
	}
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store, Logger: slog.New(slog.DiscardHandler)})
	pad := strings.Repeat("x", 600)
	b.ReportAllocs()
	defer benchcpu.Report(b)()
	i := 0
	for b.Loop() {
		i++
		body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"date":%d,"chat":{"id":1},"text":%q}}`, 100000+i, i, time.Now().Unix(), pad)
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/hooks/tg", strings.NewReader(body)))
		if w.Code != 200 {
			b.Fatalf("status %d %s", w.Code, w.Body)
		}
	}
}
