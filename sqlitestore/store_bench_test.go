package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// benchSeq keeps event ids distinct across benchmark runs on one store.
var benchSeq atomic.Int64

// benchReceipt is a Standard Webhooks request as the receiver hands it over:
// a 1 KiB JSON body, the usual headers, one event with one destination.
func benchReceipt(id string, bodySize int) *hookwarden.Receipt {
	head := `{"id":"` + id + `","type":"bench.event","data":{"pad":"`
	body := []byte(head + strings.Repeat("x", max(bodySize-len(head)-3, 0)) + `"}}`)
	sum := sha256.Sum256(body)
	return &hookwarden.Receipt{
		Source: "bench",
		Header: http.Header{
			"Content-Type":      {"application/json"},
			"Content-Length":    {strconv.Itoa(len(body))},
			"User-Agent":        {"Svix-Webhooks/1.24.0"},
			"Accept-Encoding":   {"gzip"},
			"Webhook-Id":        {id},
			"Webhook-Timestamp": {"1700000000"},
			"Webhook-Signature": {"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		},
		Body:       body,
		BodySHA256: sum,
		RemoteAddr: "127.0.0.1:53422",
		ReceivedAt: time.Now(),
		Events: []hookwarden.Event{{ID: id, Type: "bench.event", BodySHA256: sum,
			Destinations: []string{"bench/app"}}},
	}
}

func benchID() string { return fmt.Sprintf("msg_%016d", benchSeq.Add(1)) }

// holdWriter occupies the writer with an empty transaction until the
// returned release is called, so that requests queue up behind it.
func holdWriter(tb testing.TB, s *Store) (release func()) {
	tb.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.write(context.Background(), true, func(context.Context, *sql.Tx) error {
			close(held)
			<-hold
			return nil
		})
	}()
	<-held
	return func() {
		close(hold)
		if err := <-done; err != nil {
			tb.Errorf("hold writer: %v", err)
		}
	}
}

// BenchmarkRecordBatch measures one group commit of n Record calls: receipt,
// claim and job of n new events in one IMMEDIATE transaction committed with
// synchronous=FULL. The n calls are queued behind a held writer so that the
// batch has exactly n requests; the clock runs from the release to the last
// Record's return. ns/event is the writer's cost per request at that batch
// size, fsync included.
// BenchmarkRecordBatch/bodykey is a source whose signature does not cover
// the id (github): each receipt also inserts its body key, through singleTx.
func BenchmarkRecordBatch(b *testing.B) {
	for _, mode := range []string{"", "/bodykey"} {
		benchRecordBatch(b, mode)
	}
}

func benchRecordBatch(b *testing.B, mode string) {
	for _, n := range []int{1, 16, 64, 256} {
		b.Run("n="+strconv.Itoa(n)+mode, func(b *testing.B) {
			var batches []int
			s := MustOpen(b, Options{MaxBatch: 256, Logger: slog.New(slog.DiscardHandler), OnCommit: func(n int, _ time.Duration, _ error) {
				batches = append(batches, n) // writer goroutine only
			}})
			ctx := context.Background()
			recs := make([]*hookwarden.Receipt, n)
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for i := range recs {
					recs[i] = benchReceipt(benchID(), 1024)
					recs[i].BodyReplayCheck = mode == "/bodykey"
				}
				release := holdWriter(b, s)
				for _, r := range recs {
					wg.Go(func() {
						res, err := s.Record(ctx, r)
						if err != nil || res.Outcome != hookwarden.Accepted {
							b.Errorf("Record = %v, %v", res.Outcome, err)
						}
					})
				}
				for len(s.ops) < n {
					time.Sleep(10 * time.Microsecond)
				}
				b.StartTimer()
				release()
				wg.Wait()
			}
			b.StopTimer()
			perEvent := float64(b.Elapsed().Nanoseconds()) / float64(b.N*n)
			b.ReportMetric(perEvent, "ns/event")
			b.ReportMetric(1e9/perEvent, "events/s")
			s.Close()
			for _, got := range batches {
				if got != 1 && got != n { // 1: the hold, or a lone first commit
					b.Fatalf("a batch of %d requests, want %d", got, n)
				}
			}
		})
	}
}

// BenchmarkLeaseFinish measures the worker's side of the store: lease up to
// 16 due jobs, then finish each as delivered from its own goroutine, as the
// pool's attempts do (so the finishes share group commits).
func BenchmarkLeaseFinish(b *testing.B) {
	for _, conc := range []int{1, 16} {
		b.Run("concurrency="+strconv.Itoa(conc), func(b *testing.B) {
			s := MustOpen(b, Options{Logger: slog.New(slog.DiscardHandler)})
			ctx := context.Background()
			mustRecordN(b, s, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			done := 0
			var wg sync.WaitGroup
			for done < b.N {
				jobs, err := s.Lease(ctx, "bench/app", conc, time.Minute)
				if err != nil || len(jobs) == 0 {
					b.Fatalf("lease after %d of %d: %d jobs, %v", done, b.N, len(jobs), err)
				}
				for _, j := range jobs {
					wg.Go(func() {
						err := s.Finish(ctx, hookwarden.Attempt{JobID: j.ID, Number: j.Attempt, StartedAt: time.Now(),
							Duration: time.Millisecond, StatusCode: 200, ExitCode: -1, Verdict: hookwarden.Delivered})
						if err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				done += len(jobs)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// mustRecordN records n new events with one job each, in batches.
func mustRecordN(tb testing.TB, s *Store, n int) {
	tb.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for {
				_, err := s.Record(ctx, benchReceipt(benchID(), 1024))
				if err == nil {
					return
				}
				if !strings.Contains(err.Error(), "queue full") {
					tb.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
}

// BenchmarkEncodeHeaders measures rendering a receipt's headers for storage.
func BenchmarkEncodeHeaders(b *testing.B) {
	h := benchReceipt("msg_1", 1024).Header
	b.ReportAllocs()
	for b.Loop() {
		_ = encodeHeaders(h)
	}
}
