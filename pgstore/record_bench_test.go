package pgstore

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// BenchmarkRecordConcurrent compares Record's batches (batch.go) with one
// transaction per call: 64 goroutines each record distinct events (one op
// is one Record), with 20 % repeats of an id recorded before, through
//
//   - batched: Record as built, the calls waiting for one of its batchers
//     sharing its statements and its COMMIT;
//   - one-tx-per-request: every call its own transaction on a pooled
//     connection (PostgreSQL still makes concurrent commits share a flush).
//
// It reports Records per second and, for the batches, Records per COMMIT.
// (A form that grouped whole transactions behind savepoints, measured
// before, is in docs/performance.md under "Tried and not kept".)
func BenchmarkRecordConcurrent(b *testing.B) {
	const callers = 64
	body := `{"type":"bench","data":{"pad":"` + fmt.Sprintf("%0500d", 0) + `"}}`
	for _, batched := range []bool{true, false} {
		name, batchers := "batched", 0
		if !batched {
			name, batchers = "one-tx-per-request", -1
		}
		b.Run(name, func(b *testing.B) {
			var commits, records atomic.Int64
			s := open(b, pgtest.Database(b), Options{Timeout: time.Minute, MaxConns: 16, batchers: batchers,
				OnCommit: func(n int, _ time.Duration, err error) {
					if err == nil {
						commits.Add(1)
						records.Add(int64(n))
					}
				}})
			var seq atomic.Int64
			// An id's repeat can overtake it (64 calls in flight): an id
			// whose repeat was sent may be a duplicate itself.
			var repeated sync.Map
			b.SetParallelism(max(1, callers/max(1, runtime.GOMAXPROCS(0))))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					id, want := fmt.Sprintf("e%d", n), hookwarden.Accepted
					if n%5 == 0 && n > 64 {
						id, want = fmt.Sprintf("e%d", n-64), hookwarden.Duplicate
						repeated.Store(id, true)
					}
					res, err := s.Record(context.Background(), receipt("std", id, body, "app"))
					if err != nil {
						b.Error(err)
						return
					}
					if _, overtaken := repeated.Load(id); res.Outcome != want && want == hookwarden.Accepted && !overtaken {
						b.Errorf("%s: %v", id, res.Outcome)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			if c := commits.Load(); c > 0 {
				b.ReportMetric(float64(records.Load())/float64(c), "records/commit")
			}
		})
	}
}

// BenchmarkRecordCPU measures what a Record costs in CPU, not in time (the
// shared machine's load moves wall-clock figures by 2× between runs): on a
// cluster of its own, 8 goroutines record new events for one destination,
// one in five a duplicate of the one before, and it reports the
// PostgreSQL process tree's CPU and this process's per Record.
func BenchmarkRecordCPU(b *testing.B) {
	c := pgtest.Start(b)
	s := open(b, c.NewDatabase(b), Options{Timeout: time.Minute, MaxConns: 8})
	body := `{"type":"bench","data":{"pad":"` + fmt.Sprintf("%0500d", 0) + `"}}`
	ctx := context.Background()
	for i := range 100 { // connections and their statement caches warm
		if _, err := s.Record(ctx, receipt("std", fmt.Sprint("warm", i), body, "std/app")); err != nil {
			b.Fatal(err)
		}
	}
	var seq atomic.Int64
	pg0, self0 := clusterCPU(b, c), processCPU()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := seq.Add(1)
				if i > int64(b.N) {
					return
				}
				id := fmt.Sprint("e", i)
				if i%5 == 0 {
					id = fmt.Sprint("e", i-1)
				}
				if _, err := s.Record(ctx, receipt("std", id, body, "std/app")); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric((clusterCPU(b, c)-pg0)/float64(b.N)*1e6, "pg-cpu-µs/op")
	b.ReportMetric((processCPU()-self0)/float64(b.N)*1e6, "client-cpu-µs/op")
}

// clusterCPU is the CPU seconds of c's postmaster and its children.
func clusterCPU(tb testing.TB, c *pgtest.Cluster) float64 {
	pid, err := c.PID()
	if err != nil {
		tb.Fatal(err)
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		tb.Fatal(err)
	}
	var t float64
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && (st.PID == pid || st.PPID == pid) {
			t += st.CPUTime()
		}
	}
	return t
}

// processCPU is this process's CPU seconds, user and system.
func processCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
