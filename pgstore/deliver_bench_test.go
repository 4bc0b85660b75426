package pgstore

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/hookwarden/hookwarden/worker"
)

// BenchmarkDeliverCPU measures what delivering a job costs in CPU: the
// real worker.Pool (a deliverer that succeeds at once) drains an outbox
// of b.N jobs of one destination, recorded before the timer starts, on a
// cluster of its own. Concurrency 4 finishes through FinishAndLease, one
// job each (the chained slots); 32, hookbench's, leases the freed slots in
// one statement and finishes each job with Finish. It reports the
// PostgreSQL process tree's CPU and this process's per delivered job, and
// the round trips and statements the store sent per job.
//
// HOOKWARDEN_PGSS=1 loads pg_stat_statements and logs the statements the
// delivery ran (nested ones too) by total time.
func BenchmarkDeliverCPU(b *testing.B) {
	for _, conc := range []int{4, 32} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) { benchDeliverCPU(b, conc) })
	}
}

func benchDeliverCPU(b *testing.B, conc int) {
	pgss := os.Getenv("HOOKWARDEN_PGSS") != ""
	var settings []pgtest.Settings
	if pgss {
		settings = append(settings, pgtest.Settings{"shared_preload_libraries": "'pg_stat_statements'",
			"pg_stat_statements.track": "all"})
	}
	c := pgtest.Start(b, settings...)
	url := c.NewDatabase(b)
	trace := &roundTrips{}
	s := open(b, url, Options{Timeout: time.Minute, MaxConns: 16, tracer: trace})
	ctx := context.Background()
	const dest = "std/app"
	if err := s.SetFlow(ctx, []hookwarden.FlowPolicy{{Destination: dest, Concurrency: conc}}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.StartRun(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	body := `{"type":"bench","data":{"pad":"` + fmt.Sprintf("%0500d", 0) + `"}}`
	var seq atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := seq.Add(1); i <= int64(b.N); i = seq.Add(1) {
				if _, err := s.Record(ctx, receipt("std", fmt.Sprint("e", i), body, dest)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	if _, err := s.Pool().Exec(ctx, `VACUUM ANALYZE`); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `CHECKPOINT`); err != nil {
		b.Fatal(err)
	}
	if pgss {
		if _, err := s.Pool().Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Pool().Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
			b.Fatal(err)
		}
	}

	var delivered atomic.Int64
	all := make(chan struct{})
	d := deliverFunc(func(context.Context, *hookwarden.Job) worker.Result { return worker.Result{Class: worker.Success} })
	p := worker.New(s, []worker.Destination{{Name: dest, Deliverer: d, Concurrency: conc}}, worker.Options{
		OnAttempt: func(_ string, a hookwarden.Attempt) {
			if a.Verdict == hookwarden.Delivered && delivered.Add(1) == int64(b.N) {
				close(all)
			}
		},
	})
	trace.n.Store(0)
	trace.statements.Store(0)
	pg0, self0 := clusterCPU(b, c), processCPU()
	b.ResetTimer()
	if err := p.Open(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		b.Errorf("delivered %d of %d", delivered.Load(), b.N)
	}
	b.StopTimer()
	pg, self := clusterCPU(b, c)-pg0, processCPU()-self0
	trips, statements := trace.n.Load(), trace.statements.Load()
	p.Close()
	b.ReportMetric(pg/float64(b.N)*1e6, "pg-cpu-µs/op")
	b.ReportMetric(self/float64(b.N)*1e6, "client-cpu-µs/op")
	b.ReportMetric(float64(trips)/float64(b.N), "round-trips/op")
	b.ReportMetric(float64(statements)/float64(b.N), "statements/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	var n int64
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM attempts WHERE verdict = 'delivered'`).Scan(&n); err != nil || n != int64(b.N) {
		b.Errorf("attempts: %d, %v; want %d", n, err, b.N)
	}
	if pgss && b.N > 100 {
		logStatements(b, s)
	}
}

// logStatements logs the statements pg_stat_statements saw, by total time.
func logStatements(b *testing.B, s *Store) {
	rows, err := s.Pool().Query(context.Background(), `SELECT calls, total_exec_time, total_plan_time, shared_blks_hit + shared_blks_read,
		wal_records, query FROM pg_stat_statements WHERE calls > 0 ORDER BY total_exec_time DESC LIMIT 25`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	type stmt struct {
		calls       int64
		exec, plan  float64
		blocks, wal int64
		query       string
	}
	var list []stmt
	for rows.Next() {
		var st stmt
		if err := rows.Scan(&st.calls, &st.exec, &st.plan, &st.blocks, &st.wal, &st.query); err != nil {
			b.Fatal(err)
		}
		list = append(list, st)
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].exec > list[j].exec })
	var out strings.Builder
	for _, st := range list {
		q := strings.Join(strings.Fields(st.query), " ")
		if len(q) > 160 {
			q = q[:160]
		}
		fmt.Fprintf(&out, "\n%8d calls %8.1f µs exec/call %6.1f plan %6.1f blocks %5.1f wal  %s", st.calls,
			st.exec*1e3/float64(st.calls), st.plan*1e3/float64(st.calls), float64(st.blocks)/float64(st.calls),
			float64(st.wal)/float64(st.calls), q)
	}
	b.Logf("pg_stat_statements:%s", out.String())
}

// roundTrips counts the round trips the pool makes (BEGIN and COMMIT
// included; a batch is one) and the statements they carry.
type roundTrips struct{ n, statements atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	r.statements.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	r.statements.Add(1)
}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// deliverFunc adapts a function to a worker.Deliverer.
type deliverFunc func(ctx context.Context, job *hookwarden.Job) worker.Result

func (f deliverFunc) Deliver(ctx context.Context, job *hookwarden.Job) worker.Result {
	return f(ctx, job)
}
