package main

// The history phase (issue 18): the same measurements on a fresh store and
// on one holding a long history, in one run, so that what grows with the
// history shows as a ratio: acks/s and p99 at 64 connections, the latency
// of every operator read (stats, /api/stats, the dashboard, /metrics, the
// event listings with each filter, gaps), one prune pass, the build time,
// and the first 10 s after a restart with the file out of the page cache.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// historyReport is the history phase's part of the report.
type historyReport struct {
	Claims       int       `json:"claims"`
	Payloads     int       `json:"payloads"`
	BuildSeconds float64   `json:"build_seconds"`
	DBBytes      int64     `json:"db_bytes"`
	Fresh        *storeRun `json:"fresh"`
	History      *storeRun `json:"history"`
	// Restart is the first 10 s of load after a restart with the file
	// evicted from the page cache, then the same load once warm.
	Restart *restartRun `json:"restart,omitempty"`
	// Medians over the rounds (-rounds, alternating fresh and history).
	FreshAcks   float64 `json:"fresh_acks_per_sec"`
	HistoryAcks float64 `json:"history_acks_per_sec"`
	FreshP99    float64 `json:"fresh_p99_ms"`
	HistoryP99  float64 `json:"history_p99_ms"`
	AcksRatio   float64 `json:"acks_ratio"` // history / fresh
	P99Ratio    float64 `json:"p99_ratio"`
}

// loadOnly serves the database in dir and loads it at 64 connections.
func (b *bench) loadOnly(ctx context.Context, dir string) (loadResult, error) {
	o := b.o
	s, err := startHookwarden(ctx, b.hwOptions(dir, "/hold", 2*o.body+4096))
	if err != nil {
		return loadResult{}, err
	}
	res := runLoad(loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: 64, Warmup: o.warmup, Duration: o.duration,
		MaxRequests: o.maxRequests, DupShare: o.dup, Gen: b.gen(o.body)})
	b.sink.releaseAll()
	err = s.stop()
	b.sink.rehold()
	return res, err
}

func medianOf(ls []loadResult, f func(loadResult) float64) float64 {
	v := make([]float64, len(ls))
	for i, l := range ls {
		v[i] = f(l)
	}
	slices.Sort(v)
	if len(v)%2 == 0 {
		return round3((v[len(v)/2-1] + v[len(v)/2]) / 2)
	}
	return round3(v[len(v)/2])
}

// storeRun is the load and the reads against one store.
type storeRun struct {
	Load  loadResult          `json:"load"`
	Reads map[string]readStat `json:"reads"`
	Order []string            `json:"-"`
}

type readStat struct {
	MedianMS float64 `json:"median_ms"`
	MaxMS    float64 `json:"max_ms"`
	Reps     int     `json:"reps"`
	Error    string  `json:"error,omitempty"`
}

type restartRun struct {
	ReadySeconds float64    `json:"ready_seconds"`
	Cold         loadResult `json:"cold_first_10s"`
	Warm         loadResult `json:"warm_10s"`
}

func (b *bench) historyPhase(ctx context.Context) error {
	o := b.o
	h := &historyReport{Claims: o.historyClaims, Payloads: min(o.historyPayloads, o.historyClaims)}
	b.rep.History = h
	b.printf("\n== history: a fresh store against one of %d claims (%d with payloads); 64 conns for %s each\n",
		h.Claims, h.Payloads, o.duration)

	fresh := b.dir("history-fresh")
	var err error
	if h.Fresh, err = b.measureStore(ctx, fresh, "fresh"); err != nil {
		return err
	}

	dir := b.dir("history")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	db := filepath.Join(dir, "hookwarden.db")
	b.printf("  building %d claims through the store's bulk path ...\n", h.Claims)
	start := time.Now()
	cmd := exec.CommandContext(ctx, o.bin, "bench-history", "--db", db, "--claims", strconv.Itoa(h.Claims),
		"--payloads", strconv.Itoa(h.Payloads), "--body", strconv.Itoa(o.body))
	cmd.Stderr = os.Stderr
	if out, err := cmd.Output(); err != nil {
		return fmt.Errorf("bench-history: %w", err)
	} else {
		b.printf("  built in %s\n", strings.TrimSpace(string(out)))
	}
	h.BuildSeconds = round3(time.Since(start).Seconds())
	if fi, err := os.Stat(db); err == nil {
		h.DBBytes = fi.Size()
	}
	b.printf("  build %.0fs, file %.0f MiB\n", h.BuildSeconds, float64(h.DBBytes)/(1<<20))
	if h.History, err = b.measureStore(ctx, dir, "history"); err != nil {
		return err
	}
	// More rounds, alternating, so that each ratio compares neighbours in
	// time on a noisy machine (the first history round also follows the
	// build's writes); the medians are compared.
	fl, hl := []loadResult{h.Fresh.Load}, []loadResult{h.History.Load}
	for r := 2; r <= o.rounds; r++ {
		for _, x := range []struct {
			dir  string
			into *[]loadResult
		}{{fresh, &fl}, {dir, &hl}} {
			res, err := b.loadOnly(ctx, x.dir)
			if err != nil {
				return err
			}
			*x.into = append(*x.into, res)
		}
		b.printf("  round %d: fresh %s\n           history %s\n", r, fl[len(fl)-1], hl[len(hl)-1])
	}
	h.FreshAcks, h.HistoryAcks = medianOf(fl, func(l loadResult) float64 { return l.AcksPerSec }),
		medianOf(hl, func(l loadResult) float64 { return l.AcksPerSec })
	h.FreshP99, h.HistoryP99 = medianOf(fl, func(l loadResult) float64 { return l.P99 }),
		medianOf(hl, func(l loadResult) float64 { return l.P99 })
	if h.FreshAcks > 0 && h.FreshP99 > 0 {
		h.AcksRatio = round3(h.HistoryAcks / h.FreshAcks)
		h.P99Ratio = round3(h.HistoryP99 / h.FreshP99)
	}
	b.printf("  => history/fresh (medians of %d rounds): acks %.0f/%.0f = %.2f, p99 %.1f/%.1f ms = %.2f\n",
		len(fl), h.HistoryAcks, h.FreshAcks, h.AcksRatio, h.HistoryP99, h.FreshP99, h.P99Ratio)
	b.printReads(h)

	// A restart with the file out of the page cache.
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		if err := evict(f); err != nil {
			b.printf("  evict %s: %v\n", f, err)
		}
	}
	t0 := time.Now()
	s, err := startHookwarden(ctx, b.hwOptions(dir, "/hold", 2*o.body+4096))
	if err != nil {
		return err
	}
	defer s.stop()
	r := &restartRun{ReadySeconds: round3(time.Since(t0).Seconds())}
	spec := loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: 64, Duration: 10 * time.Second,
		MaxRequests: o.maxRequests, DupShare: o.dup, Gen: b.gen(o.body)}
	r.Cold = runLoad(spec)
	r.Warm = runLoad(spec)
	h.Restart = r
	b.printf("  restart, file evicted from the page cache: ready in %.2fs; first 10 s %s\n  then warm: %s\n",
		r.ReadySeconds, r.Cold, r.Warm)
	b.sink.releaseAll()
	err = s.stop()
	b.sink.rehold()
	return err
}

// measureStore serves the database in dir, loads it at 64 connections,
// then times every operator read on it, and one prune pass.
func (b *bench) measureStore(ctx context.Context, dir, label string) (*storeRun, error) {
	o := b.o
	s, err := startHookwarden(ctx, b.hwOptions(dir, "/hold", 2*o.body+4096))
	if err != nil {
		return nil, err
	}
	defer func() {
		b.sink.releaseAll()
		s.stop()
		b.sink.rehold()
	}()
	run := &storeRun{Reads: map[string]readStat{}}
	run.Load = runLoad(loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: 64, Warmup: o.warmup, Duration: o.duration,
		MaxRequests: o.maxRequests, DupShare: o.dup, Gen: b.gen(o.body)})
	b.printf("  %-8s load: %s\n", label, run.Load)
	cfg := filepath.Join(dir, "config.yaml")
	web := func(path string) func() error {
		return func() error {
			resp, err := http.Get("http://" + s.adminAddr + path)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
			}
			return nil
		}
	}
	cli := func(args ...string) func() error {
		return func() error {
			out, err := exec.CommandContext(ctx, o.bin, append(args, "--config", cfg)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
			}
			return nil
		}
	}
	reads := []struct {
		name string
		fn   func() error
		reps int
	}{
		{"stats (CLI)", cli("stats"), o.historyReps},
		{"GET /api/stats", web("/api/stats"), o.historyReps},
		{"GET / (dashboard)", web("/"), o.historyReps},
		{"GET /metrics", web("/metrics"), o.historyReps},
		{"GET /api/events", web("/api/events"), o.historyReps},
		{"GET /api/events?source=rare", web("/api/events?source=rare"), o.historyReps},
		{"GET /api/events?type=rare.type", web("/api/events?type=rare.type"), o.historyReps},
		{"GET /api/events?source=bench&type=type.*", web("/api/events?source=bench&type=type.*"), o.historyReps},
		{"GET /api/events?status=dead", web("/api/events?status=dead"), o.historyReps},
		{"GET /api/events?status=pending", web("/api/events?status=pending"), o.historyReps},
		{"GET /api/events?since=1h", web("/api/events?since=1h"), o.historyReps},
		{"events list --type rare.type (CLI)", cli("events", "list", "--type", "rare.type"), o.historyReps},
		{"GET /api/gaps?since=7d", web("/api/gaps?since=7d"), o.historyReps},
		{"gaps (CLI)", cli("gaps"), o.historyReps},
		{"prune (CLI), one pass", cli("prune"), 1},
	}
	for _, rd := range reads {
		run.Reads[rd.name] = timeRead(rd.fn, rd.reps)
		run.Order = append(run.Order, rd.name)
	}
	return run, nil
}

// timeRead runs fn reps times and returns the median and the maximum.
func timeRead(fn func() error, reps int) readStat {
	var ms []float64
	for range reps {
		t := time.Now()
		if err := fn(); err != nil {
			return readStat{Reps: len(ms), Error: err.Error()}
		}
		ms = append(ms, float64(time.Since(t).Microseconds())/1000)
	}
	slices.Sort(ms)
	return readStat{MedianMS: round3(ms[len(ms)/2]), MaxMS: round3(ms[len(ms)-1]), Reps: reps}
}

func (b *bench) printReads(h *historyReport) {
	b.printf("  %-42s %12s %12s %8s\n", "read (median of reps)", "fresh ms", "history ms", "ratio")
	for _, name := range h.History.Order {
		f, x := h.Fresh.Reads[name], h.History.Reads[name]
		ratio := 0.0
		if f.MedianMS > 0 {
			ratio = x.MedianMS / f.MedianMS
		}
		note := ""
		if x.Error != "" || f.Error != "" {
			note = " error: " + x.Error + f.Error
		}
		b.printf("  %-42s %12.1f %12.1f %8.2f%s\n", name, f.MedianMS, x.MedianMS, ratio, note)
	}
}

// evict drops a file's pages from the page cache (written out first), so
// the next reads come from the disk as after a reboot. Only this file: the
// machine's other caches are left alone. The harness runs no store, so
// opening the file here drops no lock of it.
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
