package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// cell is one measurement of one server.
type cell struct {
	Target    string `json:"target"` // baseline | hookwarden
	Round     int    `json:"round"`
	BodyBytes int    `json:"body_bytes"`
	loadResult
	ClientCPUPerAck float64 `json:"client_cpu_us_per_ack"`
	PeakRSSMiB      float64 `json:"peak_rss_mib"`
	AvgBatch        float64 `json:"avg_commit_batch,omitempty"`
	Commits         float64 `json:"commits,omitempty"`
	// WriterBusy is the share of the window the store's writer spent in
	// transactions (store_commit_duration_seconds): near 1, it is the limit.
	WriterBusy float64 `json:"writer_busy,omitempty"`
}

// ratioRow compares the baseline and hookwarden cells of one setting; values
// are means over the rounds.
type ratioRow struct {
	Conns          int       `json:"conns"`
	BodyBytes      int       `json:"body_bytes"`
	BaselineAcks   float64   `json:"baseline_acks_per_sec"`
	HookwardenAcks float64   `json:"hookwarden_acks_per_sec"`
	Ratio          float64   `json:"ratio"`
	RoundRatios    []float64 `json:"round_ratios"`
	BaselineP50    float64   `json:"baseline_p50_ms"`
	HookwardenP50  float64   `json:"hookwarden_p50_ms"`
	BaselineP95    float64   `json:"baseline_p95_ms"`
	HookwardenP95  float64   `json:"hookwarden_p95_ms"`
	BaselineP99    float64   `json:"baseline_p99_ms"`
	HookwardenP99  float64   `json:"hookwarden_p99_ms"`
	P99Ratio       float64   `json:"p99_ratio"`
	BaselineMax    float64   `json:"baseline_max_ms"`
	HookwardenMax  float64   `json:"hookwarden_max_ms"`
	AvgBatch       float64   `json:"avg_commit_batch"`
	WriterBusy     float64   `json:"writer_busy"`
	BaselineCPU    float64   `json:"baseline_cpu_us_per_ack"`
	HookwardenCPU  float64   `json:"hookwarden_cpu_us_per_ack"`
	HookwardenRSS  float64   `json:"hookwarden_peak_rss_mib"`
	Unavailable    int64     `json:"hookwarden_503"`
}

func mean(cs []cell, f func(cell) float64) float64 {
	if len(cs) == 0 {
		return 0
	}
	var s float64
	for _, c := range cs {
		s += f(c)
	}
	return s / float64(len(cs))
}

func (r *ratioRow) fill(bs, hs []cell) {
	r.BaselineAcks = mean(bs, func(c cell) float64 { return c.AcksPerSec })
	r.HookwardenAcks = mean(hs, func(c cell) float64 { return c.AcksPerSec })
	r.BaselineP50 = mean(bs, func(c cell) float64 { return c.P50 })
	r.HookwardenP50 = mean(hs, func(c cell) float64 { return c.P50 })
	r.BaselineP95 = mean(bs, func(c cell) float64 { return c.P95 })
	r.HookwardenP95 = mean(hs, func(c cell) float64 { return c.P95 })
	r.BaselineP99 = mean(bs, func(c cell) float64 { return c.P99 })
	r.HookwardenP99 = mean(hs, func(c cell) float64 { return c.P99 })
	r.BaselineMax = mean(bs, func(c cell) float64 { return c.Max })
	r.HookwardenMax = mean(hs, func(c cell) float64 { return c.Max })
	r.AvgBatch = mean(hs, func(c cell) float64 { return c.AvgBatch })
	r.WriterBusy = mean(hs, func(c cell) float64 { return c.WriterBusy })
	r.BaselineCPU = mean(bs, func(c cell) float64 { return c.ServerCPUPerAck })
	r.HookwardenCPU = mean(hs, func(c cell) float64 { return c.ServerCPUPerAck })
	r.HookwardenRSS = mean(hs, func(c cell) float64 { return c.PeakRSSMiB })
	for _, c := range hs {
		r.Unavailable += c.Unavailable
	}
	if r.BaselineAcks > 0 {
		r.Ratio = round3(r.HookwardenAcks / r.BaselineAcks)
	}
	if r.BaselineP99 > 0 {
		r.P99Ratio = round3(r.HookwardenP99 / r.BaselineP99)
	}
}

// sample is one second of a delivering phase. Backlog is exact (events
// acknowledged as accepted minus events the sink has); Pending is the
// outbox gauge, which hookwarden refreshes every few seconds.
type sample struct {
	T         float64 `json:"t_s"`
	Accepted  int64   `json:"accepted"`
	Delivered int     `json:"sink_distinct"`
	Backlog   int64   `json:"backlog"`
	Pending   float64 `json:"outbox_pending"`
}

// e2eReport is the end-to-end phase: acks and deliveries together.
type e2eReport struct {
	Conns         int        `json:"conns"`
	Concurrency   int        `json:"delivery_concurrency"`
	Load          loadResult `json:"load"`
	Distinct      int64      `json:"distinct_events"`
	Delivered     int        `json:"delivered_distinct"`
	Repeats       int64      `json:"repeated_deliveries"`
	Seconds       float64    `json:"first_send_to_last_delivery_s"`
	EventsPerSec  float64    `json:"delivered_events_per_sec"`
	RatioBaseline float64    `json:"ratio_to_baseline_acks"`
	AvgBatch      float64    `json:"avg_commit_batch"`
	PeakRSSMiB    float64    `json:"peak_rss_mib"`
	MaxPending    float64    `json:"max_backlog"`
	Samples       []sample   `json:"samples"`
}

// sustainReport is the open-loop phase at a quarter of the baseline.
type sustainReport struct {
	OfferedRequestsPerSec float64    `json:"offered_requests_per_sec"`
	TargetEventsPerSec    float64    `json:"target_events_per_sec"`
	Load                  loadResult `json:"load"`
	Distinct              int64      `json:"distinct_events"`
	DeliveredInWindow     int        `json:"delivered_in_window"`
	EventsPerSec          float64    `json:"delivered_events_per_sec"`
	RatioBaseline         float64    `json:"ratio_to_baseline_acks"`
	MaxPending            float64    `json:"max_backlog"`
	EndPending            float64    `json:"backlog_at_end"`
	SecondHalfSlope       float64    `json:"backlog_slope_second_half_per_s"`
	Bounded               bool       `json:"outbox_bounded"`
	DrainSeconds          float64    `json:"drain_after_load_s"`
	Samples               []sample   `json:"samples"`
}

type redriveReport struct {
	Events        int        `json:"events"`
	Load          loadResult `json:"load"`
	RatioBaseline float64    `json:"ratio_to_baseline_acks"`
	NewJobs       int64      `json:"new_deliveries"`
}

type burstReport struct {
	Events      int64      `json:"events"`
	Conns       int        `json:"conns"`
	Load        loadResult `json:"load"`
	PeakRSSMiB  float64    `json:"peak_rss_mib"`
	RSSAfterMiB float64    `json:"rss_after_mib"`
	AvgBatch    float64    `json:"avg_commit_batch"`
}

type targetCheck struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
	Note   string  `json:"note,omitempty"`
}

type report struct {
	Date              string         `json:"date"`
	Host              string         `json:"host"`
	CPU               string         `json:"cpu"`
	Cores             int            `json:"cores"`
	GoVersion         string         `json:"go_version"`
	HookwardenVersion string         `json:"hookwarden_version"`
	Settings          map[string]any `json:"settings"`
	Ratios            []ratioRow     `json:"ratios"`
	E2E               *e2eReport     `json:"e2e,omitempty"`
	Sustained         *sustainReport `json:"sustained,omitempty"`
	SustainedAtE2E    *sustainReport `json:"sustained_at_e2e_rate,omitempty"`
	Redrive           *redriveReport `json:"redrive,omitempty"`
	Filter            *filterReport  `json:"filter,omitempty"`
	Batch             *batchReport   `json:"batch,omitempty"`
	Burst             *burstReport   `json:"burst,omitempty"`
	DB                *dbReport      `json:"database,omitempty"`
	Postgres          *pgReport      `json:"postgres,omitempty"`
	History           *historyReport `json:"history,omitempty"`
	HistoryPostgres   *historyReport `json:"history_postgres,omitempty"`
	Profile           map[string]any `json:"profile,omitempty"`
	Targets           []targetCheck  `json:"targets"`
	Cells             []cell         `json:"cells"`
}

func newReport(o *options) *report {
	host, _ := os.Hostname()
	return &report{
		Date: time.Now().UTC().Format(time.RFC3339), Host: host, CPU: cpuModel(), Cores: runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Settings: map[string]any{"quick": o.quick, "conns": o.conns, "rounds": o.rounds,
			"cell_duration": o.duration.String(), "warmup": o.warmup.String(), "dup_share": o.dup,
			"body_bytes": o.body, "bodies": o.bodies, "e2e": o.e2e.String(), "sustain": o.sustain.String(),
			"redrive": o.redrive, "burst": o.burst, "burst_conns": o.burstConns,
			"delivery_concurrency": o.concurrency, "synchronous": "FULL",
			"history_claims": o.historyClaims, "history_payloads": o.historyPayloads, "history_reps": o.historyReps},
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func (r *report) row(conns, body int) *ratioRow {
	for i := range r.Ratios {
		if r.Ratios[i].Conns == conns && r.Ratios[i].BodyBytes == body {
			return &r.Ratios[i]
		}
	}
	return nil
}

// baseline64 is the baseline's acks/s at 64 connections with the matrix body.
func (r *report) baseline64() float64 {
	body, _ := r.Settings["body_bytes"].(int)
	if row := r.row(64, body); row != nil {
		return row.BaselineAcks
	}
	return 0
}

// evaluate checks the targets against what was measured.
func (r *report) evaluate() {
	r.Targets = nil
	add := func(t targetCheck) { r.Targets = append(r.Targets, t) }
	body, _ := r.Settings["body_bytes"].(int)
	if row := r.row(64, body); row != nil {
		add(targetCheck{Name: "acks/s at 64 conns, ratio to baseline", Value: row.Ratio, Target: ">= 0.5", Met: row.Ratio >= 0.5})
		add(targetCheck{Name: "p99 ack latency at 64 conns, ratio to baseline", Value: row.P99Ratio, Target: "<= 1.5", Met: row.P99Ratio > 0 && row.P99Ratio <= 1.5})
	}
	r.evaluateFilter(add)
	r.evaluateBatch(add)
	if e := r.E2E; e != nil {
		add(targetCheck{Name: "end-to-end delivered events/s, ratio to baseline acks/s", Value: e.RatioBaseline, Target: ">= 0.25",
			Met: e.RatioBaseline >= 0.25 && e.Delivered >= int(e.Distinct)})
	}
	if p := r.Postgres; p != nil && len(p.Cells) > 0 {
		one := p.Cells[0]
		add(targetCheck{Name: "PostgreSQL, 1 instance: acks/s at 64 conns, ratio to SQLite", Value: one.AcksRatio, Target: ">= 0.5", Met: one.AcksRatio >= 0.5})
		add(targetCheck{Name: "PostgreSQL, 1 instance: p99 at 64 conns, ratio to SQLite", Value: one.P99Ratio, Target: "<= 2", Met: one.P99Ratio > 0 && one.P99Ratio <= 2})
	}
	if s := r.Sustained; s != nil {
		add(targetCheck{Name: "sustained delivery at 0.25 of baseline, ratio delivered/baseline acks", Value: s.RatioBaseline,
			Target: ">= 0.25 with the outbox bounded", Met: s.RatioBaseline >= 0.245 && s.Bounded,
			Note: fmt.Sprintf("backlog max %.0f, at end %.0f, slope %.1f/s over the second half", s.MaxPending, s.EndPending, s.SecondHalfSlope)})
	}
	if b := r.Burst; b != nil {
		add(targetCheck{Name: fmt.Sprintf("peak RSS under a %d-event burst at %d conns, MiB", b.Events, b.Conns), Value: b.PeakRSSMiB,
			Target: "< 150", Met: b.PeakRSSMiB > 0 && b.PeakRSSMiB < 150})
	}
	for _, h := range []*historyReport{r.History, r.HistoryPostgres} {
		if h == nil || h.History == nil || h.Fresh == nil {
			continue
		}
		at := fmt.Sprintf(" at %d claims (%d with payloads), %s", h.Claims, h.Payloads, h.Store)
		if h.IDs == "ordered" {
			at += ", new ids in order"
		}
		acks := targetCheck{Name: "acks/s at 64 conns, history store / fresh" + at, Value: h.AcksRatio, Target: ">= 0.9", Met: h.AcksRatio >= 0.9}
		if c := h.AfterCheckpoint; c != nil && h.FreshAcks > 0 {
			acks.Note = fmt.Sprintf("first load after the build's checkpoint %.2f of fresh, p99 %.1f ms", c.Load.AcksPerSec/h.FreshAcks, c.Load.P99)
			if c.WAL != nil {
				acks.Note += fmt.Sprintf(" (%.2f full-page images per ack); settled after %.0f s of load: %v", c.WAL.FPIPerAck, c.SettleSeconds, c.Settled)
			}
		}
		p99 := targetCheck{Name: "p99 ack latency at 64 conns, history store / fresh" + at, Value: h.P99Ratio, Target: "<= 1.2",
			Met: h.P99Ratio > 0 && h.P99Ratio <= 1.2}
		if c := h.Compacted; c != nil {
			note := fmt.Sprintf("compacted by backup: %.2f", c.AcksRatio)
			acks.Note = strings.TrimPrefix(acks.Note+"; "+note, "; ")
			p99.Note = fmt.Sprintf("compacted by backup: %.2f", c.P99Ratio)
		}
		add(acks)
		add(p99)
		for _, name := range h.History.Order {
			x := h.History.Reads[name]
			t := targetCheck{Name: name + at + ", ms", Value: x.MedianMS, Target: "<= 50", Met: x.Error == "" && x.MedianMS <= 50}
			if f := h.Fresh.Reads[name]; strings.HasPrefix(name, "prune") {
				// A prune pass with nothing to do costs what it costs fresh.
				t = targetCheck{Name: name + at + ", ms (fresh " + strconv.FormatFloat(f.MedianMS, 'f', 1, 64) + ")", Value: x.MedianMS,
					Target: "<= 2 x fresh + 50", Met: x.Error == "" && x.MedianMS <= 2*f.MedianMS+50}
			}
			if x.Error != "" {
				t.Note = x.Error
			}
			add(t)
		}
		if rs := h.Restart; rs != nil {
			note := fmt.Sprintf("warm p99 %.1f ms, ready %.2fs; first 10 s after a restart with the cache kept: p99 %.1f ms",
				rs.Warm.P99, rs.ReadySeconds, rs.Kept.P99)
			if rs.Crash != nil {
				built := "not built within 20 s"
				switch {
				case rs.CrashFilterLoadSeconds > 0:
					built = fmt.Sprintf("kept in the file, read in %.2f s", rs.CrashFilterLoadSeconds)
				case rs.FilterBuildSeconds > 0:
					built = fmt.Sprintf("built in %.1f s", rs.FilterBuildSeconds)
				}
				note += fmt.Sprintf("; after SIGKILL (claims filter %s): p99 %.1f ms, then %.1f ms",
					built, rs.Crash.P99, rs.CrashNext.P99)
			}
			add(targetCheck{Name: "p99 of the first 10 s after a restart, store out of the page cache, " + h.Store + ", ms", Value: rs.Cold.P99,
				Target: "<= 1.2 x warm", Met: rs.Warm.P99 > 0 && rs.Cold.P99 <= 1.2*rs.Warm.P99, Note: note})
		}
	}
	if d := r.DB; d != nil && d.Events > 0 {
		add(targetCheck{Name: "database bytes per accepted event over the body size", Value: round3(d.OverBody),
			Target: "<= 600", Met: d.OverBody <= 600})
		add(targetCheck{Name: "database bytes per claimed event after payload pruning", Value: round3(d.PrunedPerEvent),
			Target: "<= 200", Met: d.PrunedPerEvent <= 200})
	}
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n== results (%s, %s, %d cores, %s)\n", r.Date, r.CPU, r.Cores, r.GoVersion)
	fmt.Fprintf(w, "%-6s %-7s %10s %10s %6s %8s %8s %8s %8s %6s %7s %9s %9s %8s\n",
		"conns", "body", "base/s", "hw/s", "ratio", "b.p50", "hw.p50", "b.p99", "hw.p99", "p99x", "batch", "b.cpu/ack", "hw.cpu/ack", "hw.RSS")
	for _, x := range r.Ratios {
		fmt.Fprintf(w, "%-6d %-7d %10.0f %10.0f %6.2f %8.2f %8.2f %8.2f %8.2f %6.2f %7.1f %8.1fµs %8.1fµs %6.1fMiB\n",
			x.Conns, x.BodyBytes, x.BaselineAcks, x.HookwardenAcks, x.Ratio, x.BaselineP50, x.HookwardenP50,
			x.BaselineP99, x.HookwardenP99, x.P99Ratio, x.AvgBatch, x.BaselineCPU, x.HookwardenCPU, x.HookwardenRSS)
	}
	r.printFilter(w)
	r.printBatch(w)
	if e := r.E2E; e != nil {
		fmt.Fprintf(w, "e2e: %d distinct events delivered in %.1fs from first send: %.0f events/s (%.2f of baseline); acks during it %.0f/s, p99 %.2f ms; max backlog %.0f; repeats %d\n",
			e.Delivered, e.Seconds, e.EventsPerSec, e.RatioBaseline, e.Load.AcksPerSec, e.Load.P99, e.MaxPending, e.Repeats)
	}
	for _, s := range []*sustainReport{r.Sustained, r.SustainedAtE2E} {
		if s == nil {
			continue
		}
		fmt.Fprintf(w, "sustained: offered %.0f req/s (%.0f new events/s) for %.0fs: delivered %.0f events/s (%.2f of baseline); backlog max %.0f, end %.0f, bounded %v\n",
			s.OfferedRequestsPerSec, s.TargetEventsPerSec, s.Load.Seconds, s.EventsPerSec, s.RatioBaseline, s.MaxPending, s.EndPending, s.Bounded)
	}
	if d := r.Redrive; d != nil {
		fmt.Fprintf(w, "redrive: %d processed events re-sent: %.0f acks/s (%.2f of baseline), p99 %.2f ms, %d duplicate answers, %d new deliveries\n",
			d.Events, d.Load.AcksPerSec, d.RatioBaseline, d.Load.P99, d.Load.Duplicates, d.NewJobs)
	}
	if b := r.Burst; b != nil {
		fmt.Fprintf(w, "burst: %d events at %d conns: %.0f acks/s, p99 %.2f ms, max %.1f ms, %d 503s; peak RSS %.1f MiB\n",
			b.Events, b.Conns, b.Load.AcksPerSec, b.Load.P99, b.Load.Max, b.Load.Unavailable, b.PeakRSSMiB)
	}
	if d := r.DB; d != nil {
		fmt.Fprintf(w, "database: %d events, %d bytes: %.0f bytes per event (%d B body + %.0f); after pruning payloads %.0f bytes per event\n",
			d.Events, d.FileBytes, d.BytesPerEvent, d.BodyBytes, d.OverBody, d.PrunedPerEvent)
	}
	if p := r.Postgres; p != nil {
		if p.Skipped != "" {
			fmt.Fprintf(w, "postgres: %s\n", p.Skipped)
		}
		for _, c := range append([]pgCell{p.SQLite}, p.Cells...) {
			if c.Store == "" {
				continue
			}
			fmt.Fprintf(w, "%-8s x%d: %.0f acks/s (%.2f of SQLite), p99 %.2f ms (%.2f×), e2e %.0f delivered/s (%.2f), hookwarden %.1f µs/ack, PostgreSQL %.1f µs/ack (%.2f cores)\n",
				c.Store, c.Instances, c.Load.AcksPerSec, c.AcksRatio, c.Load.P99, c.P99Ratio, c.E2E, c.E2ERatio, c.HookwardenCPU, c.PostgresCPU, c.PostgresCores)
		}
	}
	fmt.Fprintln(w, "\ntargets:")
	for _, t := range r.Targets {
		mark := "MET   "
		if !t.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "  %s %-72s %10.3f  (target %s) %s\n", mark, t.Name, t.Value, t.Target, t.Note)
	}
}

func (r *report) write(path string) error { return writeJSON(path, r) }
