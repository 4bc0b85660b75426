// Package metrics defines Hookwarden's Prometheus metrics (docs/reference.md, "Metrics") on
// a registry the program owns, so tests can read it and nothing is global.
//
// Label cardinality is bounded: sources and destinations come from the
// configuration; event types are provider-chosen, so past MaxTypes distinct
// values per source they fold into "other".
package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hookwarden/hookwarden"
)

// MaxTypes caps the distinct event-type label values per source.
const MaxTypes = 50

// OutboxReader reads the outbox gauges with cheap indexed queries, one entry
// per destination named (zeros included, so gauges never go absent).
type OutboxReader interface {
	OutboxStats(ctx context.Context, destinations []string) ([]hookwarden.OutboxStat, error)
}

// Metrics holds every collector. Its methods implement receiver.Observer and
// the worker's attempt hook.
type Metrics struct {
	Registry *prometheus.Registry
	outbox   *outboxCollector
	log      *slog.Logger

	requests      *prometheus.CounterVec
	duplicates    *prometheus.CounterVec
	divergent     *prometheus.CounterVec
	unauthorized  *prometheus.CounterVec
	quarantined   *prometheus.CounterVec
	filterErrors  *prometheus.CounterVec
	filterRefused *prometheus.CounterVec
	ack           *prometheus.HistogramVec
	lastAccepted  *prometheus.GaugeVec
	deliveries    *prometheus.CounterVec
	deliveryTime  *prometheus.HistogramVec
	commitTime    prometheus.Histogram
	batchSize     prometheus.Histogram
	commitErrors  prometheus.Counter
	retentionMarg *prometheus.GaugeVec
	expectWithin  *prometheus.GaugeVec
	backfill      *prometheus.CounterVec
	handshakes    *prometheus.CounterVec
	lag           *prometheus.HistogramVec // lag.go

	typesMu sync.Mutex
	types   map[string]map[string]bool // source -> seen types

	recent  recent // per-minute outcomes of the last day, for the dashboard
	started time.Time
}

// New builds the metrics on a fresh registry, with the Go and process
// collectors.
func New(log *slog.Logger) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{Registry: reg, log: log, types: map[string]map[string]bool{}, started: time.Now()}
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	const ns = "hookwarden"
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
		Help: "Requests to /hooks/{source} by outcome."}, []string{"source", "outcome"})
	m.duplicates = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "duplicates_total",
		Help: "Events whose id was already claimed, by source and event type."}, []string{"source", "type"})
	m.divergent = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "divergent_duplicates_total",
		Help: "Duplicates whose body differs from the first copy's (worth a human's look)."}, []string{"source"})
	m.unauthorized = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "unauthorized_total",
		Help: "Requests refused at the door, by reason (missing, malformed, mismatch, stale, replayed)."}, []string{"source", "reason"})
	m.quarantined = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "quarantined_total",
		Help: "Requests held for a human, by reason (no_event_id, body_replayed)."}, []string{"source", "reason"})
	m.filterErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "filter_errors_total",
		Help: "Evaluations of a destination's filter that failed (missing key, wrong type, cost limit); the job was created anyway."},
		[]string{"destination"})
	m.filterRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "filter_decode_refused_total",
		Help: "Filter evaluations refused because the body part they read is past the decode bounds (also in filter_errors_total); the job was created anyway."},
		[]string{"destination"})
	m.ack = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "ack_duration_seconds",
		Help:    "Time from request start to answer, durable commit included.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"source"})
	m.lastAccepted = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "last_accepted_timestamp_seconds",
		Help: "Unix time of the last accepted event per source (alert on absence)."}, []string{"source"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "deliveries_total",
		Help: "Delivery attempts by destination and outcome (delivered, retry, dead)."}, []string{"destination", "outcome"})
	m.deliveryTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "delivery_duration_seconds",
		Help:    "Duration of delivery attempts.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"destination"})
	m.commitTime = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "store_commit_duration_seconds",
		Help:    "Duration of store write transactions (group commits).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "store_batch_size",
		Help:    "Write requests per store transaction.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}})
	m.commitErrors = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "store_commit_errors_total",
		Help: "Store transactions that failed (disk full, I/O error)."})
	m.retentionMarg = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "retention_margin_seconds",
		Help: "Claims retention minus (retry_horizon + redrive_window); negative means duplicates can slip through."}, []string{"source"})
	m.expectWithin = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "source_expect_within_seconds",
		Help: "The source's expect_within: silence longer than this is a gap (the absence alert's threshold)."}, []string{"source"})
	m.backfill = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "backfill_events_total",
		Help: "Events a backfill handled, by outcome (recovered, already_claimed, requested, failed)."}, []string{"source", "outcome"})
	m.handshakes = newHandshakes()
	m.lag = newLag()
	for _, c := range []prometheus.Collector{m.handshakes, m.lag, m.backfill, m.requests, m.duplicates, m.divergent, m.unauthorized, m.quarantined, m.filterErrors, m.filterRefused, m.ack, m.lastAccepted,
		m.deliveries, m.deliveryTime, m.commitTime, m.batchSize, m.commitErrors, m.retentionMarg, m.expectWithin,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		f(c)
	}
	return m
}

// RegisterOutbox adds the outbox gauges for the named destinations. Their
// values come from the last refresh (RunOutbox), so a scrape never pays for
// counting a deep backlog.
func (m *Metrics) RegisterOutbox(r OutboxReader, destinations []string) {
	m.outbox = &outboxCollector{r: r, log: m.log}
	m.outbox.setDestinations(destinations)
	m.Registry.MustRegister(m.outbox)
}

// SetOutboxDestinations replaces the destinations reported (config reload).
func (m *Metrics) SetOutboxDestinations(destinations []string) {
	if m.outbox != nil {
		m.outbox.setDestinations(destinations)
	}
}

// RunOutbox refreshes the outbox gauges every period until ctx ends.
func (m *Metrics) RunOutbox(ctx context.Context, every time.Duration) {
	if m.outbox != nil {
		m.outbox.run(ctx, every)
	}
}

// Request implements receiver.Observer.
func (m *Metrics) Request(source, outcome string, d time.Duration) {
	m.requests.WithLabelValues(source, outcome).Inc()
	if source != "" {
		m.ack.WithLabelValues(source).Observe(d.Seconds())
		m.recent.add(source, outcome, time.Now())
	}
}

// Event implements receiver.Observer.
func (m *Metrics) Event(source, eventType string, outcome hookwarden.Outcome, divergent bool) {
	switch outcome {
	case hookwarden.Accepted:
		m.lastAccepted.WithLabelValues(source).SetToCurrentTime()
	case hookwarden.Duplicate:
		m.duplicates.WithLabelValues(source, m.typeLabel(source, eventType)).Inc()
		if divergent {
			m.divergent.WithLabelValues(source).Inc()
		}
	}
}

// Unauthorized implements receiver.Observer.
func (m *Metrics) Unauthorized(source, reason string) {
	m.unauthorized.WithLabelValues(source, reason).Inc()
}

// Quarantined implements receiver.Observer. The label is one of two values
// whatever the store's free-text detail says, so the label set stays bounded.
func (m *Metrics) Quarantined(source, kind string) {
	if kind != hookwarden.QuarantineBodyReplayed {
		kind = hookwarden.QuarantineNoEventID
	}
	m.quarantined.WithLabelValues(source, kind).Inc()
}

// FilterError implements receiver.Observer. The receiver names only
// configured destinations, so the label set stays bounded.
func (m *Metrics) FilterError(destination string) {
	m.filterErrors.WithLabelValues(destination).Inc()
}

// FilterRefused implements receiver.FilterRefusalObserver.
func (m *Metrics) FilterRefused(destination string) {
	m.filterRefused.WithLabelValues(destination).Inc()
}

// Attempt records one delivery attempt (the worker's OnAttempt hook).
func (m *Metrics) Attempt(destination string, a hookwarden.Attempt) {
	m.deliveries.WithLabelValues(destination, string(a.Verdict)).Inc()
	m.deliveryTime.WithLabelValues(destination).Observe(a.Duration.Seconds())
}

// Commit records one store transaction (the store's OnCommit hook).
func (m *Metrics) Commit(batch int, d time.Duration, err error) {
	m.commitTime.Observe(d.Seconds())
	m.batchSize.Observe(float64(batch))
	if err != nil {
		m.commitErrors.Inc()
	}
}

// SetRetentionMargin publishes a source's claims retention margin.
func (m *Metrics) SetRetentionMargin(source string, margin time.Duration) {
	m.retentionMarg.WithLabelValues(source).Set(margin.Seconds())
}

// SetExpectWithin publishes a source's expect_within, so that one alert rule
// serves every source with its own threshold. Sources without one get no
// series and no absence alert.
func (m *Metrics) SetExpectWithin(source string, d time.Duration) {
	if d > 0 {
		m.expectWithin.WithLabelValues(source).Set(d.Seconds())
	}
}

// SetLastAccepted seeds last_accepted_timestamp_seconds from the database at
// start, so that a restart does not reset the absence clock: without it the
// gauge would be missing until the next event, and a silent source would
// never alert after a restart.
func (m *Metrics) SetLastAccepted(source string, t time.Time) {
	if !t.IsZero() {
		m.lastAccepted.WithLabelValues(source).Set(float64(t.UnixNano()) / 1e9)
	}
}

// RegisterReady adds hookwarden_ready, 1 when ready() (the /readyz check)
// returns nil at scrape time, else 0.
func (m *Metrics) RegisterReady(ready func(context.Context) error) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "hookwarden", Name: "ready",
		Help: "1 when the database is writable and the workers are running (as /readyz), else 0."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if ready(ctx) != nil {
				return 0
			}
			return 1
		}))
}

// InitSource creates a source's series at zero so that alerts on absence and
// rates work from the first scrape.
func (m *Metrics) InitSource(source string) {
	for _, o := range []string{"accepted", "duplicate", "quarantined", "unauthorized", "too_large", "unavailable"} {
		m.requests.WithLabelValues(source, o)
	}
	for _, k := range []string{hookwarden.QuarantineNoEventID, hookwarden.QuarantineBodyReplayed} {
		m.quarantined.WithLabelValues(source, k)
	}
}

// BackfillOutcomes are the outcome labels of hookwarden_backfill_events_total.
var BackfillOutcomes = []string{"recovered", "already_claimed", "requested", "failed"}

// InitBackfill creates a backfilled source's series at zero.
func (m *Metrics) InitBackfill(source string) {
	for _, o := range BackfillOutcomes {
		m.backfill.WithLabelValues(source, o)
	}
}

// Backfill counts n events of a backfill run with outcome (BackfillOutcomes).
func (m *Metrics) Backfill(source, outcome string, n int) {
	if n > 0 {
		m.backfill.WithLabelValues(source, outcome).Add(float64(n))
	}
}

// InitDestination creates a destination's series at zero.
func (m *Metrics) InitDestination(dest string) {
	for _, o := range []string{"delivered", "retry", "dead"} {
		m.deliveries.WithLabelValues(dest, o)
	}
	m.filterErrors.WithLabelValues(dest)
	m.filterRefused.WithLabelValues(dest)
}

func (m *Metrics) typeLabel(source, t string) string {
	if t == "" {
		return "none"
	}
	m.typesMu.Lock()
	defer m.typesMu.Unlock()
	seen := m.types[source]
	if seen == nil {
		seen = map[string]bool{}
		m.types[source] = seen
	}
	if seen[t] {
		return t
	}
	if len(seen) >= MaxTypes {
		return "other"
	}
	seen[t] = true
	return t
}
