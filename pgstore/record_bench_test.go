package pgstore

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// BenchmarkRecordConcurrent answers whether pgstore should group concurrent
// Records into one transaction, as sqlitestore's writer does: 64 goroutines
// each record distinct events (one op is one Record), through
//
//   - one-tx-per-request: Record as built, each call its own transaction on
//     a pooled connection; PostgreSQL already makes concurrent commits share
//     a WAL flush;
//   - grouped: the group-commit form of group_test.go, not kept: the calls
//     waiting share one transaction, each inside a savepoint, with one
//     COMMIT for all, on groupers transactions at once.
//
// docs/performance.md has the figures.
func BenchmarkRecordConcurrent(b *testing.B) {
	const callers = 64
	body := `{"type":"bench","data":{"pad":"` + fmt.Sprintf("%0500d", 0) + `"}}`
	for _, grouped := range []bool{false, true} {
		name := "one-tx-per-request"
		if grouped {
			name = "grouped"
		}
		b.Run(name, func(b *testing.B) {
			s := open(b, pgtest.Database(b), Options{Timeout: time.Minute, MaxConns: 16})
			record := s.Record
			var g *grouping
			if grouped {
				g = newGrouping(s)
				defer g.close()
				record = g.Record
			}
			var seq atomic.Int64
			b.SetParallelism(max(1, callers/max(1, runtime.GOMAXPROCS(0))))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("e%d", seq.Add(1))
					res, err := record(context.Background(), receipt("std", id, body, "app"))
					if err != nil {
						b.Error(err)
						return
					}
					if res.Outcome != hookwarden.Accepted {
						b.Errorf("%s: %v", id, res.Outcome)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			if g != nil && g.commits.Load() > 0 {
				b.ReportMetric(float64(g.members.Load())/float64(g.commits.Load()), "records/commit")
			}
		})
	}
}
