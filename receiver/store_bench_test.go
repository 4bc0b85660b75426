package receiver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/filter"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// BenchmarkAckSQLite is the whole ack path of one new event with a 1 KiB
// body into a real SQLite store (commit included), with two destinations;
// Filtered gives each destination a typical content filter. The ratio of the
// two is what filters cost an answer.
func BenchmarkAckSQLite(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchAck(b, "") })
	b.Run("filtered", func(b *testing.B) {
		benchAck(b, `body.livemode && event.type.startsWith("invoice.") && body.data.object.amount_paid >= 1000`)
	})
}

func benchAck(b *testing.B, expr string) {
	store, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "hw.db"), sqlitestore.Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	v, _ := signature.New(signature.Params{Scheme: "none"})
	id, _ := extract.Parse("json:id")
	typ, _ := extract.Parse("json:type")
	src := receiver.Source{Name: "s", Scheme: "none", Verifier: v, EventID: id, EventType: typ}
	for _, n := range []string{"s/app", "s/audit"} {
		d := receiver.Destination{FullName: n}
		if expr != "" {
			if d.Filter, err = filter.Compile(expr); err != nil {
				b.Fatal(err)
			}
		}
		src.Destinations = append(src.Destinations, d)
	}
	jobs := 0
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store,
		Logger: slog.New(slog.DiscardHandler), Notify: func(d []string) { jobs += len(d) }})
	head := `","type":"invoice.paid","livemode":true,"data":{"object":{"customer":"cus_R2kL9mQ","amount_paid":2000,"description":"`
	pad := strings.Repeat("x", 1024-len(head)-30)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		body := `{"id":"evt_` + strconv.Itoa(i) + head + pad + `"}}}`
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/hooks/s", strings.NewReader(body)))
		if w.Code != 200 {
			b.Fatalf("status %d %s", w.Code, w.Body)
		}
	}
	if jobs != 2*i {
		b.Fatalf("jobs %d, want %d", jobs, 2*i)
	}
}
