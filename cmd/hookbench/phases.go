package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sampler records the outbox depth and the sink's count every second.
type sampler struct {
	s       *server
	sink    *sink
	live    *atomic.Int64 // accepted so far
	start   time.Time
	stopc   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []sample
}

func startSampler(s *server, sk *sink) *sampler {
	sm := &sampler{s: s, sink: sk, live: new(atomic.Int64), start: time.Now(), stopc: make(chan struct{})}
	sm.wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-sm.stopc:
				return
			case <-t.C:
				sm.take()
			}
		}
	})
	return sm
}

func (sm *sampler) take() {
	acc := sm.live.Load()
	d, _, _ := sm.sink.counts()
	x := sample{T: round3(time.Since(sm.start).Seconds()), Accepted: acc, Delivered: d, Backlog: max(acc-int64(d), 0)}
	if m, err := sm.s.metrics(); err == nil {
		for k, v := range m {
			if strings.HasPrefix(k, "hookwarden_outbox_pending{") {
				x.Pending += v
			}
		}
	}
	sm.mu.Lock()
	sm.samples = append(sm.samples, x)
	sm.mu.Unlock()
}

// stop ends sampling and returns the samples and the largest backlog seen.
func (sm *sampler) stop() ([]sample, float64) {
	close(sm.stopc)
	sm.wg.Wait()
	var peak int64
	for _, x := range sm.samples {
		peak = max(peak, x.Backlog)
	}
	return sm.samples, float64(peak)
}

// endToEnd loads a hookwarden that delivers to the sink, measures the time
// from the first send until the sink has every distinct event, then the
// database, then a bulk redrive of the processed events on a restart.
func (b *bench) endToEnd(ctx context.Context) error {
	o := b.o
	b.printf("\n== end to end: 64 conns for %s, delivery concurrency %d, then drain\n", o.e2e, o.concurrency)
	b.sink.reset()
	dir := b.dir("e2e")
	s, err := startHookwarden(ctx, b.hwOptions(dir, "/events", 2*o.body+4096))
	if err != nil {
		return err
	}
	defer s.stop()
	sm := startSampler(s, b.sink)
	res := runLoad(loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: 64, Duration: o.e2e,
		MaxRequests: 50 * o.maxRequests, DupShare: o.dup, Gen: b.gen(o.body), Live: sm.live})
	distinct := int64(len(res.acceptedIDs))
	last, ok := b.sink.waitDistinct(int(distinct), 5*time.Minute)
	samples, peak := sm.stop()
	got, repeats, _ := b.sink.counts()
	e := &e2eReport{Conns: 64, Concurrency: o.concurrency, Load: res, Distinct: distinct, Delivered: got,
		Repeats: repeats, MaxPending: peak, Samples: samples, PeakRSSMiB: s.peakRSSMiB()}
	if m, err := s.metrics(); err == nil {
		e.AvgBatch, _ = batchStats(m)
	}
	e.Seconds = last.Sub(res.firstSend).Seconds()
	if e.Seconds > 0 {
		e.EventsPerSec = float64(distinct) / e.Seconds
	}
	if base := b.rep.baseline64(); base > 0 {
		e.RatioBaseline = round3(e.EventsPerSec / base)
	}
	b.rep.E2E = e
	b.printf("  load: %s\n", res)
	b.printf("  delivered %d/%d distinct events %.1fs after the first send: %.0f events/s (%.2f of baseline), max backlog %.0f, batch %.1f\n",
		got, distinct, e.Seconds, e.EventsPerSec, e.RatioBaseline, peak, e.AvgBatch)
	if !ok {
		return fmt.Errorf("sink has %d of %d events after 5 minutes", got, distinct)
	}
	if err := s.stop(); err != nil {
		return err
	}

	b.printf("\n== database after the e2e phase\n")
	if b.rep.DB, err = measureDB(ctx, s.dbPath, o.body, dir, o.bin, filepath.Join(dir, "config.yaml")); err != nil {
		return fmt.Errorf("measure database: %w", err)
	}
	d := b.rep.DB
	b.printf("  %d events (%v receipts), %d jobs, %d attempts: %d bytes, %.0f per event (body %d + %.0f); pruned %.0f per event\n",
		d.Events, d.Receipts, d.Jobs, d.Attempts, d.FileBytes, d.BytesPerEvent, d.BodyBytes, d.OverBody, d.PrunedPerEvent)

	if o.redrive <= 0 || len(res.acceptedIDs) == 0 {
		return nil
	}
	ids := res.acceptedIDs[:min(len(res.acceptedIDs), o.redrive)]
	b.printf("\n== bulk redrive: %d processed events sent again (hookwarden restarted on the same database)\n", len(ids))
	s2, err := startHookwarden(ctx, b.hwOptions(dir, "/events", 2*o.body+4096))
	if err != nil {
		return err
	}
	defer s2.stop()
	d0, r0, _ := b.sink.counts()
	rr := runLoad(loadSpec{Addr: s2.addr, Path: "/hooks/bench", Conns: 64, Redrive: ids, Gen: b.gen(o.body)})
	time.Sleep(2 * time.Second) // any job created by mistake would be delivered by now
	d1, r1, _ := b.sink.counts()
	red := &redriveReport{Events: len(ids), Load: rr, NewJobs: int64(d1-d0) + (r1 - r0)}
	if base := b.rep.baseline64(); base > 0 {
		red.RatioBaseline = round3(rr.AcksPerSec / base)
	}
	b.rep.Redrive = red
	b.printf("  %s\n  new deliveries: %d\n", rr, red.NewJobs)
	if err := s2.stop(); err != nil {
		return err
	}
	if rr.Duplicates != int64(len(ids)) || red.NewJobs != 0 {
		return fmt.Errorf("redrive: %d duplicate answers of %d, %d new deliveries", rr.Duplicates, len(ids), red.NewJobs)
	}
	return nil
}

// sustained offers a quarter of the baseline's acks/s as new events, open
// loop, and checks that delivery keeps up: the outbox stays bounded. When it
// does not, it runs again at the end-to-end phase's delivered rate, to show
// what this machine sustains.
func (b *bench) sustained(ctx context.Context) error {
	base := b.rep.baseline64()
	target := 0.25 * base
	if b.o.sustainRate > 0 {
		target = b.o.sustainRate
	}
	if target == 0 {
		return errors.New("needs the matrix's baseline at 64 connections, or -sustain-rate")
	}
	r, err := b.sustainRun(ctx, target, base)
	if err != nil {
		return err
	}
	b.rep.Sustained = r
	if r.Bounded || b.o.sustainRate > 0 || b.rep.E2E == nil || b.rep.E2E.EventsPerSec <= 0 {
		return nil
	}
	b.rep.SustainedAtE2E, err = b.sustainRun(ctx, b.rep.E2E.EventsPerSec, base)
	return err
}

func (b *bench) sustainRun(ctx context.Context, target, base float64) (*sustainReport, error) {
	o := b.o
	rate := target / (1 - o.dup)
	b.printf("\n== sustained: %.0f requests/s (%.0f new events/s) for %s, delivering\n", rate, target, o.sustain)
	b.sink.reset()
	s, err := startHookwarden(ctx, b.hwOptions(b.dir("sustain"), "/events", 2*o.body+4096))
	if err != nil {
		return nil, err
	}
	defer s.stop()
	sm := startSampler(s, b.sink)
	res := runLoad(loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: 64, Rate: rate, Duration: o.sustain,
		DupShare: o.dup, Gen: b.gen(o.body), Live: sm.live})
	loadEnd := time.Now()
	inWindow, _, _ := b.sink.counts()
	distinct := int64(len(res.acceptedIDs))
	last, ok := b.sink.waitDistinct(int(distinct), 2*time.Minute)
	samples, peak := sm.stop()
	r := &sustainReport{OfferedRequestsPerSec: rate, TargetEventsPerSec: target, Load: res, Distinct: distinct,
		DeliveredInWindow: inWindow, MaxPending: peak, Samples: samples}
	r.EventsPerSec = float64(inWindow) / res.Seconds
	if base > 0 {
		r.RatioBaseline = round3(r.EventsPerSec / base)
	}
	if ok {
		r.DrainSeconds = max(last.Sub(loadEnd).Seconds(), 0)
	}
	// The samples taken while the load ran.
	var during []sample
	for _, x := range samples {
		if x.T <= res.Seconds {
			during = append(during, x)
		}
	}
	if n := len(during); n >= 4 {
		r.EndPending = float64(during[n-1].Backlog)
		h := during[n/2:]
		r.SecondHalfSlope = float64(h[len(h)-1].Backlog-h[0].Backlog) / (h[len(h)-1].T - h[0].T)
	}
	// Bounded: at the end no more than two seconds of input waits, and the
	// backlog does not trend up over the second half (5% of the input rate
	// is within the jitter of one-second samples).
	r.Bounded = ok && r.EndPending <= 2*target && r.SecondHalfSlope <= 0.05*target
	b.printf("  load: %s\n  delivered %.0f events/s during the load (%.2f of baseline); backlog max %.0f, end %.0f, slope %.1f/s; drained %.1fs after; bounded %v\n",
		res, r.EventsPerSec, r.RatioBaseline, peak, r.EndPending, r.SecondHalfSlope, r.DrainSeconds, r.Bounded)
	return r, s.stop()
}

// burstPhase sends a burst of new events as fast as possible and reads the
// server's peak RSS.
func (b *bench) burstPhase(ctx context.Context) error {
	o := b.o
	b.printf("\n== burst: %d new events at %d conns, delivering\n", o.burst, o.burstConns)
	b.sink.reset()
	s, err := startHookwarden(ctx, b.hwOptions(b.dir("burst"), "/events", 2*o.body+4096))
	if err != nil {
		return err
	}
	defer s.stop()
	res := runLoad(loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: o.burstConns, MaxRequests: o.burst, Gen: b.gen(o.body)})
	br := &burstReport{Events: o.burst, Conns: o.burstConns, Load: res, PeakRSSMiB: s.peakRSSMiB(),
		RSSAfterMiB: s.rssMiB()}
	if m, err := s.metrics(); err == nil {
		br.AvgBatch, _ = batchStats(m)
	}
	b.rep.Burst = br
	b.printf("  %s\n  peak RSS %.1f MiB, batch %.1f\n", res, br.PeakRSSMiB, br.AvgBatch)
	return s.stop()
}

// profilePhase runs hookwarden under `serve-profiled` at 64 connections and
// keeps its CPU and heap profiles.
func (b *bench) profilePhase(ctx context.Context) error {
	o := b.o
	b.printf("\n== profile: hookwarden at 64 conns for %s, profiles to %s\n", o.duration, o.profile)
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return err
	}
	dir := b.dir("profile")
	sinkPath := "/hold"
	if o.profileE2E {
		sinkPath = "/events"
		b.sink.reset()
	}
	opts := b.hwOptions(dir, sinkPath, 2*o.body+4096)
	opts.profile = true
	opts.trace = o.trace
	s, err := startHookwarden(ctx, opts)
	if err != nil {
		return err
	}
	res := runLoad(loadSpec{Addr: s.addr, Path: "/hooks/bench", Conns: 64, Warmup: o.warmup, Duration: o.duration,
		MaxRequests: o.maxRequests, DupShare: o.dup, Gen: b.gen(o.body)})
	b.printf("  %s\n", res)
	if o.profileE2E {
		last, ok := b.sink.waitDistinct(len(res.acceptedIDs), 5*time.Minute)
		b.printf("  delivered all: %v, %.1fs after the first send\n", ok, last.Sub(res.firstSend).Seconds())
	}
	b.sink.releaseAll()
	err = s.stop()
	b.sink.rehold()
	if err != nil {
		return err
	}
	b.rep.Profile = map[string]any{"conns": 64, "load": res}
	names := []string{"cpu.pprof", "heap.pprof"}
	if o.trace {
		names = append(names, "trace.out")
	}
	for _, name := range names {
		if err := copyFile(filepath.Join(dir, name), filepath.Join(o.profile, name)); err != nil {
			return err
		}
		b.rep.Profile[strings.TrimSuffix(strings.TrimSuffix(name, ".pprof"), ".out")] = filepath.Join(o.profile, name)
	}
	b.printf("  go tool pprof -top %s\n", filepath.Join(o.profile, "cpu.pprof"))
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
