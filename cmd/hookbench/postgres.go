package main

// The PostgreSQL cell: hookwarden on database.url beside hookwarden on its
// SQLite file, in the same run, on a throwaway cluster this harness starts
// (internal/pgtest: initdb and pg_ctl of the newest PostgreSQL 15+ under
// /usr/lib/postgresql; fsync and synchronous_commit on, a unix socket only).
// Without PostgreSQL's binaries the phase is skipped with a message.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// pgReport is the PostgreSQL phase's figures; ratios are against the
// SQLite cell measured just before, with the same load.
type pgReport struct {
	Skipped string   `json:"skipped,omitempty"`
	Version string   `json:"postgres_version,omitempty"`
	Conns   int      `json:"conns"`
	SQLite  pgCell   `json:"sqlite"`
	Cells   []pgCell `json:"postgres"` // 1 instance, then 2
}

// pgCell is one acknowledging cell (deliveries parked) and one end-to-end
// run of the same store and instance count.
type pgCell struct {
	Store     string     `json:"store"` // sqlite | postgres
	Instances int        `json:"instances"`
	Load      loadResult `json:"load"`
	// HookwardenCPU and PostgresCPU are µs of CPU per ack in the window:
	// every serve process's, and the postmaster's whole process tree's.
	HookwardenCPU float64 `json:"hookwarden_cpu_us_per_ack"`
	PostgresCPU   float64 `json:"postgres_cpu_us_per_ack,omitempty"`
	// PostgresCores is the cluster's CPU seconds per second of the window.
	PostgresCores float64 `json:"postgres_cores,omitempty"`
	E2E           float64 `json:"e2e_delivered_per_sec"`
	AcksRatio     float64 `json:"acks_ratio_to_sqlite,omitempty"`
	P99Ratio      float64 `json:"p99_ratio_to_sqlite,omitempty"`
	E2ERatio      float64 `json:"e2e_ratio_to_sqlite,omitempty"`
}

func (b *bench) postgresPhase(ctx context.Context) error {
	o := b.o
	b.printf("\n== PostgreSQL: 1 and 2 instances on one database beside SQLite, %d conns, %s cells, %s end to end\n",
		64, o.duration, o.e2e)
	cluster, err := pgtest.Launch(pgtest.Settings{"max_connections": "300"})
	if err != nil {
		if pgtest.IsMissing(err) {
			msg := fmt.Sprintf("skipped: %v (apt-get install postgresql to measure it)", err)
			b.printf("  %s\n", msg)
			b.rep.Postgres = &pgReport{Skipped: msg}
			return nil
		}
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			b.printf("  stop PostgreSQL: %v\n", err)
		}
	}()
	rep := &pgReport{Conns: 64, Version: commandOutput(cluster.Bin("postgres"), "--version")}
	b.rep.Postgres = rep

	if rep.SQLite, err = b.storeCell(ctx, nil, 1); err != nil {
		return err
	}
	for _, n := range []int{1, 2} {
		c, err := b.storeCell(ctx, cluster, n)
		if err != nil {
			return err
		}
		if s := rep.SQLite; s.Load.AcksPerSec > 0 && s.Load.P99 > 0 {
			c.AcksRatio = round3(c.Load.AcksPerSec / s.Load.AcksPerSec)
			c.P99Ratio = round3(c.Load.P99 / s.Load.P99)
		}
		if rep.SQLite.E2E > 0 {
			c.E2ERatio = round3(c.E2E / rep.SQLite.E2E)
		}
		b.printf("  => PostgreSQL, %d instance(s): acks %.2f of SQLite's, p99 %.2f×, delivered/s %.2f of SQLite's\n",
			n, c.AcksRatio, c.P99Ratio, c.E2ERatio)
		rep.Cells = append(rep.Cells, c)
	}
	return nil
}

var pgDatabases int

// storeCell measures n serve processes on one fresh database (cluster nil:
// one on a fresh SQLite file): acknowledging with deliveries parked, then
// end to end.
func (b *bench) storeCell(ctx context.Context, cluster *pgtest.Cluster, n int) (pgCell, error) {
	c := pgCell{Store: "sqlite", Instances: n}
	newDB := func() (string, error) {
		if cluster == nil {
			return "", nil
		}
		pgDatabases++
		name := fmt.Sprintf("bench%d", pgDatabases)
		if err := cluster.Exec(ctx, "", "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
			return "", err
		}
		return cluster.URL(name), nil
	}
	if cluster != nil {
		c.Store = "postgres"
	}
	run := func(sinkPath string, measure func([]*server) (loadResult, error)) (loadResult, error) {
		url, err := newDB()
		if err != nil {
			return loadResult{}, err
		}
		var ss []*server
		defer func() {
			b.sink.releaseAll()
			for _, s := range ss {
				if err := s.stop(); err != nil {
					b.printf("  stop: %v\n", err)
				}
				if !b.o.keep {
					os.RemoveAll(s.dir)
				}
			}
			b.sink.rehold()
		}()
		for range n {
			opts := b.hwOptions(b.dir(c.Store), sinkPath, 2*b.o.body+4096)
			opts.dbURL = url
			s, err := startHookwarden(ctx, opts)
			if err != nil {
				return loadResult{}, err
			}
			ss = append(ss, s)
		}
		return measure(ss)
	}

	// Acknowledging: 64 connections split over the instances.
	var err error
	c.Load, err = run("/hold", func(ss []*server) (loadResult, error) {
		var hw0, pg0 float64
		var window time.Time
		res := b.loadSplit(ss, loadSpec{Path: "/hooks/bench", Conns: 64, Warmup: b.o.warmup, Duration: b.o.duration,
			MaxRequests: b.o.maxRequests, DupShare: b.o.dup, Gen: b.gen(b.o.body)}, func() {
			window = time.Now()
			hw0, pg0 = serversCPU(ss), clusterCPU(cluster)
		})
		if res.Acks > 0 {
			c.HookwardenCPU = (serversCPU(ss) - hw0) / float64(res.Acks) * 1e6
			if cluster != nil {
				pg := clusterCPU(cluster) - pg0
				c.PostgresCPU = pg / float64(res.Acks) * 1e6
				c.PostgresCores = round3(pg / time.Since(window).Seconds())
			}
		}
		return res, nil
	})
	if err != nil {
		return c, err
	}
	b.printf("  %-8s x%d: %s  cpu %.1f µs/ack hookwarden, %.1f µs/ack PostgreSQL (%.2f cores)\n",
		c.Store, n, c.Load, c.HookwardenCPU, c.PostgresCPU, c.PostgresCores)

	// End to end: delivered distinct events per second from the first send.
	b.sink.reset()
	_, err = run("/events", func(ss []*server) (loadResult, error) {
		res := b.loadSplit(ss, loadSpec{Path: "/hooks/bench", Conns: 64, Duration: b.o.e2e,
			MaxRequests: 50 * b.o.maxRequests, DupShare: b.o.dup, Gen: b.gen(b.o.body)}, nil)
		distinct := len(res.acceptedIDs)
		last, ok := b.sink.waitDistinct(distinct, 5*time.Minute)
		if !ok {
			got, _, _ := b.sink.counts()
			return res, fmt.Errorf("%s x%d: the sink has %d of %d events after 5 minutes", c.Store, n, got, distinct)
		}
		if secs := last.Sub(res.firstSend).Seconds(); secs > 0 {
			c.E2E = float64(distinct) / secs
		}
		b.printf("  %-8s x%d end to end: %d distinct events delivered, %.0f/s (acks %.0f/s meanwhile)\n",
			c.Store, n, distinct, c.E2E, res.AcksPerSec)
		return res, nil
	})
	return c, err
}

// loadSplit runs spec against the servers at once, the connections split
// evenly (a load balancer's round robin), and merges the results: counts
// and rates add up, latencies are the worst server's.
func (b *bench) loadSplit(ss []*server, spec loadSpec, onMeasure func()) loadResult {
	results := make([]loadResult, len(ss))
	var once sync.Once
	var wg sync.WaitGroup
	for i, s := range ss {
		sp := spec
		sp.Addr = s.addr
		sp.Conns = spec.Conns / len(ss)
		if spec.MaxRequests > 0 {
			sp.MaxRequests = spec.MaxRequests / int64(len(ss))
		}
		if onMeasure != nil {
			sp.OnMeasure = func() { once.Do(onMeasure) }
		}
		wg.Go(func() { results[i] = runLoad(sp) })
	}
	wg.Wait()
	m := results[0]
	for _, r := range results[1:] {
		m.Conns += r.Conns
		m.Requests += r.Requests
		m.Acks += r.Acks
		m.Accepted += r.Accepted
		m.Duplicates += r.Duplicates
		m.Unavailable += r.Unavailable
		m.Other += r.Other
		m.NetErrors += r.NetErrors
		m.AcksPerSec += r.AcksPerSec
		m.Seconds = max(m.Seconds, r.Seconds)
		m.P50, m.P95, m.P99, m.Max = max(m.P50, r.P50), max(m.P95, r.P95), max(m.P99, r.P99), max(m.Max, r.Max)
		m.ClientCPU = max(m.ClientCPU, r.ClientCPU) // one process's
		if r.firstSend.Before(m.firstSend) {
			m.firstSend = r.firstSend
		}
		m.acceptedIDs = append(m.acceptedIDs, r.acceptedIDs...)
	}
	return m
}

func serversCPU(ss []*server) float64 {
	var t float64
	for _, s := range ss {
		t += s.cpuSeconds()
	}
	return t
}

// clusterCPU is the CPU seconds so far of the postmaster and every process
// it started (backends, WAL writer, checkpointer...), from /proc. A backend
// that exited meanwhile takes its share with it: the connection pools keep
// theirs open, so that is little.
func clusterCPU(c *pgtest.Cluster) float64 {
	if c == nil {
		return 0
	}
	pid, err := c.PID()
	if err != nil {
		return 0
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0
	}
	var t float64
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue
		}
		if st.PID == pid || st.PPID == pid {
			t += st.CPUTime()
		}
	}
	return t
}
