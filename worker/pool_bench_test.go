package worker

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// BenchmarkPoolDeliver measures the pool's lease → deliver → finish cycle on
// the real SQLite store, with a deliverer that succeeds at once: the ceiling
// the store and the pool put on delivery, without any network. jobs/s is
// the figure; one op is one job.
//
// pause_after=20 runs the same with a flow policy that makes every finish
// keep the destination's failure streak (docs/performance.md).
func BenchmarkPoolDeliver(b *testing.B) {
	for _, conc := range []int{4, 16, 32, 64} {
		for _, pauseAfter := range []int{0, 20} {
			name := "concurrency=" + strconv.Itoa(conc)
			if pauseAfter > 0 {
				name += "/pause_after=" + strconv.Itoa(pauseAfter)
			}
			b.Run(name, func(b *testing.B) { benchPoolDeliver(b, conc, pauseAfter) })
		}
	}
}

func benchPoolDeliver(b *testing.B, conc, pauseAfter int) {
	{
		{
			ctx := context.Background()
			s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "hw.db"),
				sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.SetFlow(ctx, []hookwarden.FlowPolicy{{Destination: "bench/app", PauseAfter: pauseAfter,
				ProbeEvery: time.Minute}}); err != nil {
				b.Fatal(err)
			}
			benchRecord(b, s, b.N)
			var delivered atomic.Int64
			all := make(chan struct{})
			d := deliverFunc(func(context.Context, *hookwarden.Job) Result { return Result{Class: Success} })
			p := New(s, []Destination{{Name: "bench/app", Deliverer: d, Concurrency: conc}}, Options{
				OnAttempt: func(_ string, a hookwarden.Attempt) {
					if a.Verdict == hookwarden.Delivered && delivered.Add(1) == int64(b.N) {
						close(all)
					}
				},
			})
			b.ReportAllocs()
			b.ResetTimer()
			stop := MustOpen(b, p)
			select {
			case <-all:
			case <-time.After(5 * time.Minute):
				b.Fatalf("delivered %d of %d", delivered.Load(), b.N)
			}
			b.StopTimer()
			stop()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		}
	}
}

// benchRecord records n events with one job each for bench/app.
func benchRecord(tb testing.TB, s *sqlitestore.Store, n int) {
	tb.Helper()
	body := []byte(`{"type":"bench.event","data":{}}`)
	sum := sha256.Sum256(body)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 128)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := fmt.Sprintf("msg_%d", i)
			r := &hookwarden.Receipt{Source: "bench", Header: http.Header{"Content-Type": {"application/json"}},
				Body: body, BodySHA256: sum, RemoteAddr: "127.0.0.1:1", ReceivedAt: time.Now(),
				Events: []hookwarden.Event{{ID: id, Type: "bench.event", BodySHA256: sum, Destinations: []string{"bench/app"}}}}
			if _, err := s.Record(context.Background(), r); err != nil {
				tb.Error(err)
			}
		})
	}
	wg.Wait()
}
