// Command hookbench measures `hookwarden serve` against an ack-only baseline
// with one load generator, in one run, on loopback (make bench).
//
// The baseline is this program's own server (`hookbench ack-server`, a child
// process): it reads and verifies a Standard Webhooks request like the
// receiver and answers 200 without storing anything. Each measurement cell
// starts a fresh server (hookwarden: a fresh database), warms up, measures
// for a bounded time and count, and stops it; baseline and hookwarden cells
// alternate, so each ratio compares neighbours in time on a noisy machine.
//
// Besides acks/s and latency per connection count and body size it measures
// end-to-end delivery to a local sink, a sustained run at a quarter of the
// baseline, a bulk redrive of processed events, peak RSS under a 100,000
// event burst and database bytes per event, and writes everything as JSON.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "ack-server" {
		if err := runAckServer(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "hookbench ack-server:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	killChildren()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookbench:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

// options are the command line.
type options struct {
	bin         string
	quick       bool
	conns       []int
	rounds      int
	duration    time.Duration
	warmup      time.Duration
	maxRequests int64
	dup         float64
	body        int
	bodies      []int
	e2e         time.Duration
	sustain     time.Duration
	sustainRate float64
	redrive     int
	burst       int64
	burstConns  int
	concurrency int
	out         string
	profile     string
	trace       bool
	profileE2E  bool
	workDir     string
	keep        bool
	phases      map[string]bool

	historyClaims, historyPayloads, historyReps int
	historyStores                               string
	// historyFrom is a SQLite history built before by bench-history, copied
	// in place of the build (to measure a change against the same store).
	historyFrom string
	// historyCompacted also measures the SQLite history compacted by backup.
	historyCompacted bool
	// historyIDs is how the history phase's new event ids sort: "spread"
	// (in no order, as UUIDs) or "ordered" (each after the last, as ULIDs
	// and KSUIDs, which lead with their time).
	historyIDs string
	// historySharedBuffers is the history phase's PostgreSQL
	// shared_buffers (-history-pg-shared-buffers).
	historySharedBuffers string
}

// sharedBuffersRe is a PostgreSQL memory size, as -history-pg-shared-buffers
// takes it into postgresql.conf.
var sharedBuffersRe = regexp.MustCompile(`^[1-9][0-9]*(kB|MB|GB)$`)

var allPhases = []string{"matrix", "bodies", "filter", "batch", "e2e", "postgres", "sustain", "burst", "history", "profile"}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("hookbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var conns, bodies, phases string
	fs.StringVar(&o.bin, "hookwarden", "bin/hookwarden", "the hookwarden binary to measure")
	fs.BoolVar(&o.quick, "quick", false, "short run (a couple of minutes): 3s cells, 10s e2e and sustain, no body sweep; explicit flags still win")
	fs.StringVar(&conns, "conns", "16,64,256", "connection counts of the matrix")
	fs.IntVar(&o.rounds, "rounds", 2, "baseline/hookwarden alternations per connection count (at least 2)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured window of each cell")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up of each cell")
	fs.Int64Var(&o.maxRequests, "max-requests", 2_000_000, "bound on the requests of one cell")
	fs.Float64Var(&o.dup, "dup", 0.2, "share of requests that repeat an event id already sent")
	fs.IntVar(&o.body, "body", 1024, "body size in bytes of the matrix")
	fs.StringVar(&bodies, "bodies", "16384,262144", "other body sizes, measured at 64 connections (empty: skip)")
	fs.DurationVar(&o.e2e, "e2e", 60*time.Second, "load time of the end-to-end phase (delivery to the sink)")
	fs.DurationVar(&o.sustain, "sustain", 60*time.Second, "length of the sustained phase at a quarter of the baseline")
	fs.Float64Var(&o.sustainRate, "sustain-rate", 0, "new events/s of the sustained phase (default: 0.25 of the baseline at 64 connections)")
	fs.IntVar(&o.redrive, "redrive", 40000, "events re-sent by the bulk redrive (at most the e2e phase's)")
	fs.Int64Var(&o.burst, "burst", 100000, "events of the burst phase (peak RSS)")
	fs.IntVar(&o.burstConns, "burst-conns", 256, "connections of the burst phase")
	fs.IntVar(&o.concurrency, "concurrency", 32, "delivery concurrency of the sink destination")
	fs.StringVar(&o.out, "out", "bench.json", "JSON report file")
	fs.StringVar(&o.profile, "profile", "", "directory for CPU and heap profiles of hookwarden serve (64 conns); empty: none")
	fs.BoolVar(&o.trace, "trace", false, "with -profile: also write an execution trace (trace.out, large)")
	fs.BoolVar(&o.profileE2E, "profile-e2e", false, "with -profile: profile the end-to-end load (deliveries on, until drained) instead of the ack-only one")
	fs.StringVar(&o.workDir, "workdir", "", "where databases go (default: a new temporary directory, removed after)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory")
	fs.IntVar(&o.historyClaims, "history-claims", 10_000_000, "claims of the history phase's store")
	fs.IntVar(&o.historyPayloads, "history-payloads", 1_000_000, "of which the newest keep their payloads (receipt, delivered job)")
	fs.IntVar(&o.historyReps, "history-reps", 5, "times each operator read is timed in the history phase (the median is reported)")
	fs.StringVar(&o.historyStores, "history-stores", "sqlite,postgres", "stores the history phase measures, in this order (postgres needs PostgreSQL's binaries)")
	fs.StringVar(&o.historyFrom, "history-from", "", "a SQLite file `hookwarden bench-history --db` wrote, copied for the SQLite history instead of a build (its -history-claims and -history-payloads are the file's)")
	fs.BoolVar(&o.historyCompacted, "history-compacted", true, "also measure the SQLite history store compacted by `hookwarden backup`, in the same rounds")
	fs.StringVar(&o.historyIDs, "history-ids", "spread", "how the history phase's new event ids sort: spread (in no order, as UUIDs) or ordered (each after the last, as ULIDs and KSUIDs)")
	fs.StringVar(&o.historySharedBuffers, "history-pg-shared-buffers", "128MB", "shared_buffers of the history phase's PostgreSQL server (PostgreSQL's default; docs/scale-out.md sizes it for the claim index)")
	fs.StringVar(&phases, "phases", strings.Join(allPhases, ","), "phases to run")
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		for name, v := range map[string]string{"duration": "3s", "e2e": "10s", "sustain": "10s", "redrive": "10000", "bodies": "",
			"history-claims": "200000", "history-payloads": "20000"} {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return nil, err
				}
				if name == "bodies" {
					bodies = ""
				}
			}
		}
	}
	var err error
	if o.conns, err = intList(conns); err != nil || len(o.conns) == 0 {
		return nil, usageError{fmt.Errorf("-conns %q: want a list like 16,64,256", conns)}
	}
	if o.bodies, err = intList(bodies); err != nil {
		return nil, usageError{fmt.Errorf("-bodies %q: %v", bodies, err)}
	}
	if o.historyClaims < 1 || o.historyPayloads < 0 || o.historyReps < 1 {
		return nil, usageError{errors.New("want -history-claims >= 1, -history-payloads >= 0, -history-reps >= 1")}
	}
	for _, st := range strings.Split(o.historyStores, ",") {
		if st = strings.TrimSpace(st); st != "sqlite" && st != "postgres" {
			return nil, usageError{fmt.Errorf("-history-stores: unknown store %q; want sqlite, postgres or both", st)}
		}
	}
	if o.historyIDs != "spread" && o.historyIDs != "ordered" {
		return nil, usageError{fmt.Errorf("-history-ids %q: want spread or ordered", o.historyIDs)}
	}
	if !sharedBuffersRe.MatchString(o.historySharedBuffers) {
		return nil, usageError{fmt.Errorf("-history-pg-shared-buffers %q: want a size like 128MB or 1GB", o.historySharedBuffers)}
	}
	if o.historyFrom != "" {
		if _, err := os.Stat(o.historyFrom); err != nil {
			return nil, usageError{fmt.Errorf("-history-from: %w", err)}
		}
	}
	if o.rounds < 1 || o.dup < 0 || o.dup >= 1 || o.body < 256 {
		return nil, usageError{errors.New("want -rounds >= 1, 0 <= -dup < 1, -body >= 256")}
	}
	o.phases = map[string]bool{}
	for _, p := range strings.Split(phases, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			return nil, usageError{fmt.Errorf("-phases: unknown phase %q; want some of %s", p, strings.Join(allPhases, ","))}
		}
		o.phases[p] = true
	}
	if o.profile == "" {
		delete(o.phases, "profile")
	}
	if o.profile != "" && !o.phases["profile"] && !o.phases["history"] {
		return nil, usageError{errors.New("-profile: the phases profile or history write profiles; neither runs")}
	}
	return o, nil
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// bench is one harness run.
type bench struct {
	o      *options
	out    io.Writer
	secret string
	key    []byte
	sink   *sink
	gens   map[int]*generator
	// spreadGens are the history phase's (spreadGen).
	spreadGens map[int]*generator
	// stripeGen makes the filter phase's Stripe-like events.
	stripeGen *generator
	rep       *report
	runs      int
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parseOptions(args, os.Stderr)
	if err != nil {
		return err
	}
	if _, err := os.Stat(o.bin); err != nil {
		return usageError{fmt.Errorf("-hookwarden %s: %w (run make build)", o.bin, err)}
	}
	if o.workDir == "" {
		if o.workDir, err = os.MkdirTemp("", "hookbench-"); err != nil {
			return err
		}
		if !o.keep {
			defer os.RemoveAll(o.workDir)
		}
	}
	key := make([]byte, 32)
	rand.Read(key)
	b := &bench{o: o, out: stdout, secret: "whsec_" + base64.StdEncoding.EncodeToString(key), key: key,
		gens: map[int]*generator{}, spreadGens: map[int]*generator{}}
	if b.sink, err = startSink(); err != nil {
		return err
	}
	defer b.sink.close()
	b.rep = newReport(o)
	b.rep.HookwardenVersion = commandOutput(o.bin, "version")
	b.printf("hookbench %s: %s, %d cores, %s; hookwarden: %s\n", b.rep.Date, b.rep.CPU, b.rep.Cores,
		runtime.Version(), b.rep.HookwardenVersion)
	b.printf("work directory %s\n", o.workDir)

	steps := []struct {
		phase string
		fn    func(context.Context) error
	}{
		{"matrix", b.matrix},
		{"bodies", b.bodySweep},
		{"filter", b.filterPhase},
		{"batch", b.batchPhase},
		{"e2e", b.endToEnd},
		{"postgres", b.postgresPhase},
		{"sustain", b.sustained},
		{"burst", b.burstPhase},
		{"history", b.historyPhase},
		{"profile", b.profilePhase},
	}
	var errs []error
	for _, st := range steps {
		if !o.phases[st.phase] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := st.fn(ctx); err != nil {
			b.printf("phase %s failed: %v\n", st.phase, err)
			errs = append(errs, fmt.Errorf("%s: %w", st.phase, err))
		}
	}
	b.rep.evaluate()
	b.rep.print(stdout)
	if err := b.rep.write(o.out); err != nil {
		errs = append(errs, err)
	} else {
		b.printf("report written to %s\n", o.out)
	}
	return errors.Join(errs...)
}

func (b *bench) printf(format string, args ...any) { fmt.Fprintf(b.out, format, args...) }

func (b *bench) gen(size int) *generator {
	if b.gens[size] == nil {
		b.gens[size] = newGenerator(b.key, size)
	}
	return b.gens[size]
}

// spreadGen is gen's spread twin (generator.spread: ids in no order), for
// the history phase. Its ids never meet gen's nor the history's: they
// lead with the hex digits and a dash, then the run's msg_ prefix. With
// -history-ids ordered they are not spread: "msg_" sorts after the
// history's hex, so each new claim lands after the newest.
func (b *bench) spreadGen(size int) *generator {
	if b.spreadGens[size] == nil {
		b.spreadGens[size] = newGenerator(b.key, size)
		b.spreadGens[size].spread = b.o.historyIDs != "ordered"
	}
	return b.spreadGens[size]
}

// dir returns a fresh work directory for one hookwarden process.
func (b *bench) dir(name string) string {
	b.runs++
	return filepath.Join(b.o.workDir, fmt.Sprintf("%02d-%s", b.runs, name))
}

func (b *bench) hwOptions(dir, sinkPath string, maxBody int) hwOptions {
	return hwOptions{bin: b.o.bin, dir: dir, secret: b.secret, sinkURL: b.sink.url(sinkPath),
		concurrency: b.o.concurrency, maxBody: maxBody}
}

// cell runs one measurement against a fresh server.
func (b *bench) cell(ctx context.Context, target string, conns, body, round int) (cell, error) {
	start := func() (*server, error) {
		if target == "baseline" {
			return startBaseline(ctx, b.secret)
		}
		// Deliveries are parked at the sink (/hold): this cell measures
		// acknowledging, with the jobs written but not yet delivered.
		return startHookwarden(ctx, b.hwOptions(b.dir("cell"), "/hold", 2*body+4096))
	}
	return b.measure(cell{Target: target, Round: round, BodyBytes: body}, conns, cellRun{start: start, gen: b.gen(body)})
}

// cellRun is what one cell runs: the server it starts and the requests it sends.
type cellRun struct {
	start func() (*server, error)
	gen   *generator
	// after, if set, checks the server once it has stopped, before its
	// directory is removed.
	after func(*server) error
	// noDup sends no repeats (-dup does not apply).
	noDup bool
}

// measure starts a fresh server, loads it for one cell and stops it.
func (b *bench) measure(c cell, conns int, cr cellRun) (_ cell, err error) {
	s, err := cr.start()
	if err != nil {
		return c, err
	}
	hw := s.adminAddr != "" // hookwarden, with metrics
	defer func() {
		b.sink.releaseAll()
		if err := s.stop(); err != nil {
			b.printf("  stop: %v\n", err)
		}
		b.sink.rehold()
		if cr.after != nil && err == nil {
			err = cr.after(s)
		}
		if s.dir != "" && !b.o.keep {
			os.RemoveAll(s.dir)
		}
	}()
	body := c.BodyBytes
	maxReq := b.o.maxRequests
	if mb := int64(body); mb > 64<<10 {
		maxReq = min(maxReq, (1<<30)/mb) // at most 1 GiB of bodies per cell
	}
	var cpuAtWindow float64
	var m0 map[string]float64
	dup := b.o.dup
	if cr.noDup {
		dup = 0
	}
	res := runLoad(loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: conns, Warmup: b.o.warmup,
		Duration: b.o.duration, MaxRequests: maxReq, DupShare: dup, Gen: cr.gen,
		OnMeasure: func() {
			cpuAtWindow = s.cpuSeconds()
			if hw {
				m0, _ = s.metrics()
			}
		}})
	c.loadResult = res
	if res.Acks > 0 {
		c.ServerCPUPerAck = s.cpuPerAck(cpuAtWindow, res.Acks)
		c.ClientCPUPerAck = res.ClientCPU / float64(res.Acks) * 1e6
	}
	c.PeakRSSMiB = s.peakRSSMiB()
	if hw {
		if m1, err := s.metrics(); err == nil && m0 != nil {
			c.AvgBatch, c.Commits, c.WriterBusy = windowStats(m0, m1, res.Seconds)
		}
	}
	extra := ""
	if c.AvgBatch > 0 {
		extra = fmt.Sprintf("  batch %.1f  writer busy %.0f%%", c.AvgBatch, 100*c.WriterBusy)
	}
	b.printf("  %-10s conns %3d body %6d round %d: %s  cpu %.1f µs/ack%s\n", c.Target, conns, body, c.Round, res,
		c.ServerCPUPerAck, extra)
	return c, nil
}

// pair alternates baseline and hookwarden cells and adds their ratio row.
func (b *bench) pair(ctx context.Context, conns, body int) error {
	row := ratioRow{Conns: conns, BodyBytes: body}
	var bs, hs []cell
	for r := 1; r <= b.o.rounds; r++ {
		for _, target := range []string{"baseline", "hookwarden"} {
			if err := ctx.Err(); err != nil {
				return err
			}
			c, err := b.cell(ctx, target, conns, body, r)
			if err != nil {
				return err
			}
			b.rep.Cells = append(b.rep.Cells, c)
			if target == "baseline" {
				bs = append(bs, c)
			} else {
				hs = append(hs, c)
			}
		}
		if bs[r-1].AcksPerSec > 0 {
			row.RoundRatios = append(row.RoundRatios, round3(hs[r-1].AcksPerSec/bs[r-1].AcksPerSec))
		}
	}
	row.fill(bs, hs)
	b.rep.Ratios = append(b.rep.Ratios, row)
	b.printf("  => conns %d body %d: hookwarden/baseline acks %.2f (rounds %v), p99 %.2f\n",
		conns, body, row.Ratio, row.RoundRatios, row.P99Ratio)
	return nil
}

func (b *bench) matrix(ctx context.Context) error {
	b.printf("\n== matrix: %d B bodies, %.0f%% duplicates, %s per cell after %s warm-up, %d rounds\n",
		b.o.body, b.o.dup*100, b.o.duration, b.o.warmup, b.o.rounds)
	for _, conns := range b.o.conns {
		if err := b.pair(ctx, conns, b.o.body); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) bodySweep(ctx context.Context) error {
	if len(b.o.bodies) == 0 {
		return nil
	}
	b.printf("\n== body sizes at 64 connections\n")
	for _, size := range b.o.bodies {
		if err := b.pair(ctx, 64, size); err != nil {
			return err
		}
	}
	return nil
}

// commandOutput runs a command and returns its trimmed output.
func commandOutput(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func round3(v float64) float64 { return float64(int(v*1000+0.5)) / 1000 }

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "" {
		os.MkdirAll(dir, 0o755)
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
