package receiver_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookwarden/hookwarden/receiver"
)

// BenchmarkWhatsAppBatch: WhatsApp-shaped requests of 1, 10 and 100
// messages, every one new, through the receiver and a real SQLite store,
// 64 at a time. events/s against the 1-event case is what batching buys
// (SPEC 11: each event its own claim and envelope, one receipt a request).
func BenchmarkWhatsAppBatch(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			store := openStore(b)
			src := platform(b, "wa", "meta")
			rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store, Logger: slog.New(slog.DiscardHandler)})
			var seq atomic.Int64
			body := func() string {
				msgs := make([]string, n)
				for i := range msgs {
					msgs[i] = waMsg(fmt.Sprint("wamid.", seq.Add(1)), `caf\u00e9`)
				}
				return wab(msgs, nil)
			}
			b.SetParallelism(32) // 64 in flight on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := httptest.NewRecorder()
					rc.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/hooks/wa", strings.NewReader(body())))
					if w.Code != 200 {
						b.Errorf("%d %s", w.Code, w.Body)
					}
				}
			})
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
