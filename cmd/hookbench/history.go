package main

// The history phase (issue 18): the same measurements on a fresh store and
// on one holding a long history, in one run, so that what grows with the
// history shows as a ratio: acks/s and p99 at 64 connections, the latency
// of every operator read (stats, /api/stats, the dashboard, /metrics, the
// event listings with each filter, gaps), one prune pass, the build time,
// and the first 10 s after a restart with the file out of the page cache.

import (
	"context"
	"encoding/json"
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

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// historyReport is the history phase's part of the report, for one store.
type historyReport struct {
	Store        string  `json:"store"` // sqlite | postgres
	Claims       int     `json:"claims"`
	Payloads     int     `json:"payloads"`
	BuildSeconds float64 `json:"build_seconds"`
	ReusedFrom   string  `json:"reused_from,omitempty"` // -history-from: no build, BuildSeconds 0
	IDs          string  `json:"ids"`                   // -history-ids: how new event ids sort, spread | ordered
	// SharedBuffers is the PostgreSQL server's shared_buffers
	// (-history-pg-shared-buffers); empty on SQLite.
	SharedBuffers string    `json:"shared_buffers,omitempty"`
	DBBytes       int64     `json:"db_bytes"` // the file, or pg_database_size
	Fresh         *storeRun `json:"fresh"`
	History       *storeRun `json:"history"`
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
	// CPURatio is the medians' ratio of serve's CPU per acknowledgement,
	// history / fresh: the work the history adds to each one, where
	// acks/s also moves with the disk's waits. On PostgreSQL it is serve's
	// alone: the database server's CPU is not in it.
	FreshCPU   float64 `json:"fresh_cpu_us_per_ack,omitempty"`
	HistoryCPU float64 `json:"history_cpu_us_per_ack,omitempty"`
	CPURatio   float64 `json:"cpu_ratio,omitempty"`
	// AfterCheckpoint is the history store's first load after the build
	// and its CHECKPOINT, and on PostgreSQL the loads that followed until
	// its claims stopped writing whole pages to the WAL.
	AfterCheckpoint *checkpointRun `json:"after_checkpoint,omitempty"`
	// Compacted is the history store copied by `hookwarden backup` (SQLite's
	// VACUUM INTO: each index in one run of pages), measured in the same
	// rounds (-history-compacted, SQLite only).
	Compacted *compactedRun `json:"compacted,omitempty"`
	// FreshWAL and HistoryWAL are PostgreSQL's WAL in each round.
	FreshWAL   []*walStat `json:"fresh_wal,omitempty"`
	HistoryWAL []*walStat `json:"history_wal,omitempty"`
}

// compactedRun is the history store after `hookwarden backup`: what a
// compaction in a maintenance window gives back (docs/operations.md).
type compactedRun struct {
	BackupSeconds float64      `json:"backup_seconds"`
	DBBytes       int64        `json:"db_bytes"`
	Rounds        []loadResult `json:"rounds"`
	Acks          float64      `json:"acks_per_sec"` // median of the rounds
	P99           float64      `json:"p99_ms"`
	AcksRatio     float64      `json:"acks_ratio"` // to the fresh store's medians
	P99Ratio      float64      `json:"p99_ratio"`
}

// historyStore is one store of the history phase: a SQLite file in dir,
// or the PostgreSQL database url (dir holds the serve process's config).
type historyStore struct{ dir, url string }

func (b *bench) historyOptions(st historyStore) hwOptions {
	opts := b.hwOptions(st.dir, "/hold", 2*b.o.body+4096)
	opts.dbURL = st.url
	return opts
}

// historyRounds is the least number of rounds of the history phase: even,
// so that each store runs first as often, and enough that the median of a
// store's rounds stands against one disturbed round (single 10 s rounds of
// the same store spread by a quarter on a shared 2-core machine).
const historyRounds = 4

// loadOnly serves the store and, once serve has read its claim index (the
// warm-up after a start, which the restart measurement covers), loads it
// at 64 connections: each round is a new serve process, and the rounds
// measure the store, not its restart.
func (b *bench) loadOnly(ctx context.Context, st historyStore) (loadResult, error) {
	return b.loadProfiled(ctx, st, "")
}

// loadProfiled is loadOnly, serving under serve-profiled when the run has
// -profile and tag is set: the round's CPU profile is kept there as
// tag.cpu.pprof.
func (b *bench) loadProfiled(ctx context.Context, st historyStore, tag string) (loadResult, error) {
	o := b.o
	from := sizeOf(filepath.Join(st.dir, "serve.log"))
	opts := b.historyOptions(st)
	opts.profile = o.profile != "" && tag != ""
	s, err := startHookwarden(ctx, opts)
	if err != nil {
		return loadResult{}, err
	}
	if err := waitWarm(ctx, s.logPath, from, st.url == "", 2*time.Minute); err != nil {
		s.stop()
		return loadResult{}, err
	}
	var cpuAtWindow float64
	res := runLoad(loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: 64, Warmup: o.warmup, Duration: o.duration,
		MaxRequests: o.maxRequests, DupShare: o.dup, Gen: b.spreadGen(o.body),
		OnMeasure: func() { cpuAtWindow = s.cpuSeconds() }})
	res.ServerCPUPerAck = round3(s.cpuPerAck(cpuAtWindow, res.Acks))
	b.sink.releaseAll()
	err = s.stop()
	b.sink.rehold()
	if err == nil && opts.profile {
		if err = os.MkdirAll(o.profile, 0o755); err == nil {
			err = copyFile(filepath.Join(st.dir, "cpu.pprof"), filepath.Join(o.profile, tag+".cpu.pprof"))
		}
	}
	return res, err
}

// waitWarm waits until the serve log at path, from offset on, says the
// claim index was read (or could not be) and, with filter (SQLite), that
// the writer's claims filter is built (or could not be).
func waitWarm(ctx context.Context, path string, offset int64, filter bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if b, err := os.ReadFile(path); err == nil && int64(len(b)) > offset {
			log := string(b[offset:])
			warm := strings.Contains(log, "claim index read into the page cache") || strings.Contains(log, "claim index not warmed") ||
				strings.Contains(log, "claim index not read at start")
			built := !filter || strings.Contains(log, "claims filter built") || strings.Contains(log, "build the claims filter") ||
				strings.Contains(log, "claims filter loaded")
			if warm && built {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("serve did not read its claim index within %s (log: %s)", timeout, tail(path))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
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

// checkpointRun is the first load after a checkpoint, and the settling
// after it (settle).
type checkpointRun struct {
	Load loadResult `json:"first_load"`
	WAL  *walStat   `json:"first_load_wal,omitempty"`
	// Settle are the loads after the first until one wrote at most
	// settleFPI full-page images per ack (Settled), or settleMax passed.
	Settle        []loadResult `json:"settle,omitempty"`
	SettleWAL     []*walStat   `json:"settle_wal,omitempty"`
	SettleSeconds float64      `json:"settle_seconds,omitempty"` // of load, the first's included
	SettleAcks    int64        `json:"settle_acks,omitempty"`    // the first's included
	Settled       bool         `json:"settled"`
}

// settleFPI is where the stretch after a checkpoint ends: a round whose
// claims write at most this many full-page images per ack (a fresh
// store's write 0.00-0.02).
const settleFPI = 0.05

// settleMax bounds the settling's load, whatever the rate.
const settleMax = 3 * time.Minute

// settle loads the store round after round until its claims write at most
// settleFPI full-page images per ack, so that the rounds compared with a
// fresh store measure it between checkpoints (the stretch after each is
// the first load's, reported on its own). Each round restarts serve, as
// loadOnly does.
func (b *bench) settle(ctx context.Context, st historyStore, c *checkpointRun) error {
	c.SettleSeconds, c.SettleAcks = c.Load.Seconds, c.Load.Acks
	c.Settled = c.WAL.FPIPerAck <= settleFPI
	for !c.Settled && c.SettleSeconds < settleMax.Seconds() {
		res, w, err := walDuring(ctx, st.url, func() (loadResult, error) { return b.loadOnly(ctx, st) })
		if err != nil {
			return err
		}
		c.Settle, c.SettleWAL = append(c.Settle, res), append(c.SettleWAL, w)
		c.SettleSeconds, c.SettleAcks = round3(c.SettleSeconds+res.Seconds), c.SettleAcks+res.Acks
		c.Settled = w.FPIPerAck <= settleFPI
		b.printf("  settling: %s\n            %s\n", res, w)
	}
	b.printf("  after %.0f s and %d acks of load since the checkpoint: settled %v (at most %.2f full-page images per ack)\n",
		c.SettleSeconds, c.SettleAcks, c.Settled, settleFPI)
	return nil
}

type restartRun struct {
	// Kept is the first 10 s after a restart with the page cache kept:
	// what a restart costs apart from the cold file.
	Kept         loadResult `json:"kept_cache_first_10s"`
	ReadySeconds float64    `json:"ready_seconds"`
	Cold         loadResult `json:"cold_first_10s"`
	Warm         loadResult `json:"warm_10s"`
	// FilterLoadSeconds is how long the cold restart took to read the
	// claims filter the clean stop before it kept (SQLite; 0: none read).
	FilterLoadSeconds float64 `json:"filter_load_seconds,omitempty"`
	// After a crash (SQLite): serve killed with SIGKILL, the file evicted,
	// started again. It reads the claims filter its writer kept in the
	// file while idle (CrashFilterLoadSeconds), or, with none kept yet,
	// builds one beside the first seconds of load (FilterBuildSeconds; 0:
	// not within those 20 s).
	CrashReadySeconds      float64     `json:"crash_ready_seconds,omitempty"`
	Crash                  *loadResult `json:"crash_first_10s,omitempty"`
	CrashNext              *loadResult `json:"crash_next_10s,omitempty"`
	CrashFilterLoadSeconds float64     `json:"crash_filter_load_seconds,omitempty"`
	FilterBuildSeconds     float64     `json:"filter_build_seconds,omitempty"`
}

// filterSeconds reads, from the serve log at path past offset, how long
// the line msg ("claims filter built", "claims filter loaded") says the
// claims filter took; 0 when there is no such line.
func filterSeconds(path string, offset int64, msg string) float64 {
	secs := 0.0
	for _, line := range strings.Split(since(path, offset), "\n") {
		var l struct {
			Msg     string  `json:"msg"`
			Seconds float64 `json:"seconds"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == msg {
			secs = l.Seconds
		}
	}
	return round3(secs)
}

// historyPhase runs the history's measurements on SQLite, then on
// PostgreSQL (a throwaway cluster, as the postgres phase's) when its
// binaries are there.
func (b *bench) historyPhase(ctx context.Context) error {
	stores := map[string]bool{} // checked when the flags were read
	for _, st := range strings.Split(b.o.historyStores, ",") {
		stores[strings.TrimSpace(st)] = true
	}
	if stores["sqlite"] {
		h, err := b.historyRun(ctx, nil)
		b.rep.History = h
		if err != nil {
			return err
		}
	}
	if !stores["postgres"] {
		return nil
	}
	// Checkpoints as docs/scale-out.md advises for a long history: timed,
	// every 15 minutes, not requested every ~30 s by PostgreSQL's default
	// 1 GB max_wal_size at these rates (each one starts the stretch of
	// full-page images again: the feedback the first rounds measured).
	// shared_buffers at PostgreSQL's own default unless
	// -history-pg-shared-buffers says otherwise, not the test clusters'
	// 32 MB: at 32 MB each claim with a random id evicted a page of a
	// claim index 18 times that size, and the history store measured the
	// test cluster's buffers.
	cluster, err := pgtest.Launch(pgtest.Settings{"max_connections": "300", "max_wal_size": "16GB", "checkpoint_timeout": "15min",
		"shared_buffers":           "'" + b.o.historySharedBuffers + "'",
		"shared_preload_libraries": "'pg_stat_statements'", "pg_stat_statements.track": "top"})
	if err != nil {
		if pgtest.IsMissing(err) {
			b.printf("\n== history on PostgreSQL: skipped: %v\n", err)
			return nil
		}
		return err
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			b.printf("  stop PostgreSQL: %v\n", err)
		}
	}()
	b.rep.HistoryPostgres, err = b.historyRun(ctx, cluster)
	return err
}

// historyRun measures a fresh store against one holding the history, on
// SQLite (cluster nil) or on a new database of cluster each.
func (b *bench) historyRun(ctx context.Context, cluster *pgtest.Cluster) (*historyReport, error) {
	o := b.o
	h := &historyReport{Store: "sqlite", Claims: o.historyClaims, Payloads: min(o.historyPayloads, o.historyClaims), IDs: o.historyIDs}
	newStore := func(name string) (historyStore, error) {
		st := historyStore{dir: b.dir(name)}
		if cluster == nil {
			return st, nil
		}
		pgDatabases++
		db := fmt.Sprintf("bench%d", pgDatabases)
		if err := cluster.Exec(ctx, "", "CREATE DATABASE "+db+" TEMPLATE template0"); err != nil {
			return st, err
		}
		st.url = cluster.URL(db)
		// Each round's costliest statements (walStat.Top).
		if err := cluster.Exec(ctx, db, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
			return st, err
		}
		return st, nil
	}
	if cluster != nil {
		h.Store, h.SharedBuffers = "postgres", o.historySharedBuffers
	}
	ids := "new ids in no order (as UUIDs)"
	if h.IDs == "ordered" {
		ids = "new ids in order (as ULIDs)"
	}
	b.printf("\n== history (%s): a fresh store against one of %d claims (%d with payloads); %s; 64 conns for %s each\n",
		h.Store, h.Claims, h.Payloads, ids, o.duration)
	if h.SharedBuffers != "" {
		b.printf("  shared_buffers %s\n", h.SharedBuffers)
	}

	fresh, err := newStore("history-fresh-" + h.Store)
	if err != nil {
		return h, err
	}
	if h.Fresh, err = b.measureStore(ctx, fresh, "fresh"); err != nil {
		return h, err
	}

	hist, err := newStore("history-" + h.Store)
	if err != nil {
		return h, err
	}
	if err := os.MkdirAll(hist.dir, 0o750); err != nil {
		return h, err
	}
	db := filepath.Join(hist.dir, "hookwarden.db")
	start := time.Now()
	if o.historyFrom != "" && cluster == nil {
		// A store built before: the build is not measured, the store is.
		b.printf("  copying the history %s (its build not measured) ...\n", o.historyFrom)
		if err := copyFile(o.historyFrom, db); err != nil {
			return h, fmt.Errorf("-history-from: %w", err)
		}
		h.ReusedFrom = o.historyFrom
		// Its claims were placed before the time it was built; an hour
		// after that the oldest cross the retention lines, and the first
		// measured prune pass would remove them instead of finding nothing
		// to do. One unmeasured pass catches up.
		t := time.Now()
		cfg, err := writeHWConfig(b.historyOptions(hist), "127.0.0.1:0", "127.0.0.1:0", db)
		if err != nil {
			return h, err
		}
		out, err := exec.CommandContext(ctx, o.bin, "prune", "--config", cfg, "--write").CombinedOutput()
		if err != nil {
			return h, fmt.Errorf("-history-from: catching up retention: %w: %s", err, out)
		}
		b.printf("  retention caught up since the file was built in %.1fs: %s\n", time.Since(t).Seconds(), oneLine(out))
	} else {
		b.printf("  building %d claims through the store's bulk path ...\n", h.Claims)
		target := []string{"--db", db}
		if hist.url != "" {
			target = []string{"--url", hist.url}
		}
		cmd := exec.CommandContext(ctx, o.bin, append(append([]string{"bench-history"}, target...), "--claims", strconv.Itoa(h.Claims),
			"--payloads", strconv.Itoa(h.Payloads), "--body", strconv.Itoa(o.body))...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return h, fmt.Errorf("bench-history: %w", err)
		}
		b.printf("  built in %s\n", strings.TrimSpace(string(out)))
		h.BuildSeconds = round3(time.Since(start).Seconds())
	}
	// The build's writes on disk before anything is measured: a store
	// that old would have been checkpointed long since, and a checkpoint
	// or the kernel's writeback of gigabytes during the rounds measures the
	// build, not the store.
	t := time.Now()
	if cluster != nil {
		if err := cluster.Exec(ctx, "", "CHECKPOINT"); err != nil {
			return h, fmt.Errorf("checkpoint after the build: %w", err)
		}
	}
	unix.Sync()
	b.printf("  build flushed to disk in %.1fs\n", time.Since(t).Seconds())
	if hist.url != "" {
		h.DBBytes, err = pgDatabaseSize(ctx, hist.url)
		if err != nil {
			return h, err
		}
	} else if fi, err := os.Stat(db); err == nil {
		h.DBBytes = fi.Size()
	}
	b.printf("  build %.0fs, store %.0f MiB\n", h.BuildSeconds, float64(h.DBBytes)/(1<<20))
	var comp historyStore
	if cluster == nil && o.historyCompacted {
		if comp, h.Compacted, err = b.compactHistory(ctx, db); err != nil {
			return h, err
		}
	}
	// The first load after the build follows its CHECKPOINT, as every
	// store's load follows its server's last one: on PostgreSQL each claim
	// then changes a leaf of the claim index not changed since, and writes
	// the whole page to the WAL. Reported on its own, as the restart is.
	res, w, err := walDuring(ctx, hist.url, func() (loadResult, error) { return b.loadOnly(ctx, hist) })
	if err != nil {
		return h, err
	}
	h.AfterCheckpoint = &checkpointRun{Load: res, WAL: w}
	b.printf("  history, first load after the build's checkpoint: %s\n", res)
	if w != nil {
		b.printf("           %s\n", w)
		if err := b.settle(ctx, hist, h.AfterCheckpoint); err != nil {
			return h, err
		}
	}
	if h.History, err = b.measureStore(ctx, hist, "history"); err != nil {
		return h, err
	}
	// Rounds alternating fresh and history, so that each ratio compares
	// neighbours in time on a noisy machine; the medians are compared. The
	// loads measureStore ran before its reads are not among them (the
	// fresh store's ran before the build). Every other round runs the
	// history store first: a load leaves its writes to the kernel's
	// writeback and its process's exit to the machine, and whichever store
	// always came second paid for the other's.
	var fl, hl []loadResult
	type storeRounds struct {
		name string
		st   historyStore
		into *[]loadResult
		wal  *[]*walStat
	}
	stores := []storeRounds{{"fresh", fresh, &fl, &h.FreshWAL}, {"history", hist, &hl, &h.HistoryWAL}}
	if h.Compacted != nil {
		var none []*walStat
		stores = append(stores, storeRounds{"compacted", comp, &h.Compacted.Rounds, &none})
	}
	rounds := max(o.rounds, historyRounds)
	for r := 1; r <= rounds; r++ {
		order := stores
		if r%2 == 0 {
			order = append([]storeRounds{stores[1], stores[0]}, stores[2:]...)
		}
		for _, x := range order {
			tag := fmt.Sprintf("history-%s-%s-%d", h.Store, x.name, r)
			res, w, err := walDuring(ctx, x.st.url, func() (loadResult, error) { return b.loadProfiled(ctx, x.st, tag) })
			if err != nil {
				return h, err
			}
			*x.into = append(*x.into, res)
			if w != nil {
				*x.wal = append(*x.wal, w)
			}
		}
		b.printf("  round %d: fresh %s\n           history %s\n", r, fl[len(fl)-1], hl[len(hl)-1])
		if c := h.Compacted; c != nil {
			b.printf("           compacted %s\n", c.Rounds[len(c.Rounds)-1])
		}
		if cluster != nil {
			b.printf("           fresh   %s\n           history %s\n", h.FreshWAL[len(h.FreshWAL)-1], h.HistoryWAL[len(h.HistoryWAL)-1])
		}
	}
	h.FreshAcks, h.HistoryAcks = medianOf(fl, func(l loadResult) float64 { return l.AcksPerSec }),
		medianOf(hl, func(l loadResult) float64 { return l.AcksPerSec })
	h.FreshP99, h.HistoryP99 = medianOf(fl, func(l loadResult) float64 { return l.P99 }),
		medianOf(hl, func(l loadResult) float64 { return l.P99 })
	if h.FreshAcks > 0 && h.FreshP99 > 0 {
		h.AcksRatio = round3(h.HistoryAcks / h.FreshAcks)
		h.P99Ratio = round3(h.HistoryP99 / h.FreshP99)
	}
	h.FreshCPU, h.HistoryCPU = medianOf(fl, func(l loadResult) float64 { return l.ServerCPUPerAck }),
		medianOf(hl, func(l loadResult) float64 { return l.ServerCPUPerAck })
	if h.FreshCPU > 0 {
		h.CPURatio = round3(h.HistoryCPU / h.FreshCPU)
	}
	b.printf("  => history/fresh (medians of %d rounds): acks %.0f/%.0f = %.2f, p99 %.1f/%.1f ms = %.2f, serve CPU %.0f/%.0f µs an ack = %.2f\n",
		len(fl), h.HistoryAcks, h.FreshAcks, h.AcksRatio, h.HistoryP99, h.FreshP99, h.P99Ratio, h.HistoryCPU, h.FreshCPU, h.CPURatio)
	if c := h.Compacted; c != nil {
		c.Acks = medianOf(c.Rounds, func(l loadResult) float64 { return l.AcksPerSec })
		c.P99 = medianOf(c.Rounds, func(l loadResult) float64 { return l.P99 })
		if h.FreshAcks > 0 && h.FreshP99 > 0 {
			c.AcksRatio, c.P99Ratio = round3(c.Acks/h.FreshAcks), round3(c.P99/h.FreshP99)
		}
		b.printf("  => compacted/fresh: acks %.0f/%.0f = %.2f, p99 %.1f/%.1f ms = %.2f\n",
			c.Acks, h.FreshAcks, c.AcksRatio, c.P99, h.FreshP99, c.P99Ratio)
	}
	b.printReads(h)

	spec := loadSpec{Path: "/hooks/bench", Conns: 64, Duration: 10 * time.Second,
		MaxRequests: o.maxRequests, DupShare: o.dup, Gen: b.spreadGen(o.body)}
	r := &restartRun{}
	// First a restart with the page cache kept (the process's own start:
	// its pool, its first statements), to tell that apart from the cold
	// file below.
	s, err := startHookwarden(ctx, b.historyOptions(hist))
	if err != nil {
		return h, err
	}
	spec.Addr = s.addr
	r.Kept = runLoad(spec)
	b.sink.releaseAll()
	err = s.stop()
	b.sink.rehold()
	if err != nil {
		return h, err
	}
	// A restart with the store out of the page cache: the SQLite file's
	// pages; on PostgreSQL the server restarted (its shared buffers
	// empty) and every file of its data directory evicted.
	if cluster != nil {
		if err := cluster.Restart(); err != nil {
			return h, err
		}
		if err := evictTree(cluster.DataDir()); err != nil {
			b.printf("  evict %s: %v\n", cluster.DataDir(), err)
		}
	} else {
		for _, f := range []string{db, db + "-wal", db + "-shm"} {
			if err := evict(f); err != nil {
				b.printf("  evict %s: %v\n", f, err)
			}
		}
	}
	from := sizeOf(filepath.Join(hist.dir, "serve.log"))
	t0 := time.Now()
	s, err = startHookwarden(ctx, b.historyOptions(hist))
	if err != nil {
		return h, err
	}
	defer s.stop()
	r.ReadySeconds = round3(time.Since(t0).Seconds())
	spec.Addr = s.addr
	r.Cold = runLoad(spec)
	r.Warm = runLoad(spec)
	h.Restart = r
	b.printf("  restart, page cache kept: first 10 s %s\n", r.Kept)
	b.printf("  restart, store evicted from the page cache: ready in %.2fs; first 10 s %s\n  then warm: %s\n",
		r.ReadySeconds, r.Cold, r.Warm)
	if cluster != nil {
		b.sink.releaseAll()
		err = s.stop()
		b.sink.rehold()
		return h, err
	}
	r.FilterLoadSeconds = filterSeconds(s.logPath, from, "claims filter loaded")
	b.printf("  claims filter kept in the file, read in %.2f s (0: none)\n", r.FilterLoadSeconds)
	// A crash: the filter the writer kept in the file is read (built
	// beside the load only when none was kept yet).
	s.kill()
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		if err := evict(f); err != nil {
			b.printf("  evict %s: %v\n", f, err)
		}
	}
	from = sizeOf(s.logPath)
	t0 = time.Now()
	if s, err = startHookwarden(ctx, b.historyOptions(hist)); err != nil {
		return h, err
	}
	defer s.stop()
	r.CrashReadySeconds = round3(time.Since(t0).Seconds())
	spec.Addr = s.addr
	crash, next := runLoad(spec), runLoad(spec)
	r.Crash, r.CrashNext = &crash, &next
	r.CrashFilterLoadSeconds = filterSeconds(s.logPath, from, "claims filter loaded")
	r.FilterBuildSeconds = filterSeconds(s.logPath, from, "claims filter built")
	b.printf("  restart after SIGKILL, store evicted: ready in %.2fs; first 10 s %s\n  next 10 s: %s\n",
		r.CrashReadySeconds, crash, next)
	b.printf("  claims filter kept in the file, read in %.2f s (0: none); built in %.1f s beside that load (0: not built within its 20 s)\n",
		r.CrashFilterLoadSeconds, r.FilterBuildSeconds)
	b.sink.releaseAll()
	err = s.stop()
	b.sink.rehold()
	return h, err
}

// compactHistory copies the history file at db with `hookwarden backup`
// into a store of its own, as an operator compacts a long history.
func (b *bench) compactHistory(ctx context.Context, db string) (historyStore, *compactedRun, error) {
	st := historyStore{dir: b.dir("history-compacted-sqlite")}
	if err := os.MkdirAll(st.dir, 0o750); err != nil {
		return st, nil, err
	}
	to := filepath.Join(st.dir, "hookwarden.db")
	t := time.Now()
	if out, err := exec.CommandContext(ctx, b.o.bin, "backup", "--db", db, to).CombinedOutput(); err != nil {
		return st, nil, fmt.Errorf("backup of the history store: %w: %s", err, out)
	}
	c := &compactedRun{BackupSeconds: round3(time.Since(t).Seconds())}
	unix.Sync()
	if fi, err := os.Stat(to); err == nil {
		c.DBBytes = fi.Size()
	}
	b.printf("  compacted copy (hookwarden backup) in %.1fs, %.0f MiB\n", c.BackupSeconds, float64(c.DBBytes)/(1<<20))
	return st, c, nil
}

// pgDatabaseSize is the size on disk of the database at url.
func pgDatabaseSize(ctx context.Context, url string) (int64, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var n int64
	err = c.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
	return n, err
}

// measureStore serves the store, loads it at 64 connections, then times
// every operator read on it, and one prune pass.
func (b *bench) measureStore(ctx context.Context, st historyStore, label string) (*storeRun, error) {
	o := b.o
	dir := st.dir
	s, err := startHookwarden(ctx, b.historyOptions(st))
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
		MaxRequests: o.maxRequests, DupShare: o.dup, Gen: b.spreadGen(o.body)})
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
		// The first pass after a build also does the housekeeping the build
		// left (PostgreSQL folds the count rows of the builder's connections,
		// a store that old would have folded hour by hour); the next one is a
		// pass with nothing to do.
		{"prune (CLI), one pass", cli("prune"), 1},
		{"prune (CLI), next pass", cli("prune"), 1},
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

// evictTree evicts every regular file under dir (evict).
func evictTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		return evict(path)
	})
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

// oneLine is a command's output on one line, for the harness's log.
func oneLine(out []byte) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", " | ")), " ")
}
