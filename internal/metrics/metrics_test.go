package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/metrics"
)

// value reads one series from g: a counter's or gauge's value, or a
// histogram's sample count. ok is false when the series does not exist.
func value(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) (v float64, ok bool) {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func mustValue(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	tb.Helper()
	v, ok := value(tb, g, name, labels...)
	if !ok {
		tb.Fatalf("series %s%v not found", name, labels)
	}
	return v
}

func TestMetricsPassLint(t *testing.T) {
	m := metrics.New(nil)
	m.InitSource("stripe")
	m.InitDestination("stripe/app")
	m.SetRetentionMargin("stripe", time.Hour)
	m.SetExpectWithin("stripe", 6*time.Hour)
	m.RegisterReady(func(context.Context) error { return nil })
	m.RegisterOutbox(fakeOutbox{}, []string{"stripe/app"})
	m.Request("stripe", "accepted", time.Millisecond)
	m.Attempt("stripe/app", hookwarden.Attempt{Verdict: hookwarden.Delivered, Duration: time.Millisecond})
	m.Commit(3, time.Millisecond, nil)
	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "hookwarden_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

func TestRequestCountsOutcomeAndAck(t *testing.T) {
	m := metrics.New(nil)
	m.InitSource("stripe")
	if got := mustValue(t, m.Registry, "hookwarden_requests_total", "source", "stripe", "outcome", "accepted"); got != 0 {
		t.Fatalf("after InitSource: accepted = %v, want 0 (series present from the start)", got)
	}
	for _, c := range []struct {
		outcome string
		n       int
	}{{"accepted", 3}, {"duplicate", 2}, {"unauthorized", 1}} {
		for range c.n {
			m.Request("stripe", c.outcome, 2*time.Millisecond)
		}
	}
	// An unknown source is attacker-chosen: counted under "", no ack sample.
	m.Request("", "not_found", time.Millisecond)
	for _, c := range []struct {
		source, outcome string
		want            float64
	}{{"stripe", "accepted", 3}, {"stripe", "duplicate", 2}, {"stripe", "unauthorized", 1}, {"", "not_found", 1}} {
		if got := mustValue(t, m.Registry, "hookwarden_requests_total", "source", c.source, "outcome", c.outcome); got != c.want {
			t.Errorf("requests_total{source=%q,outcome=%q} = %v, want %v", c.source, c.outcome, got, c.want)
		}
	}
	if got := mustValue(t, m.Registry, "hookwarden_ack_duration_seconds", "source", "stripe"); got != 6 {
		t.Errorf("ack_duration_seconds count = %v, want 6", got)
	}
	if _, ok := value(t, m.Registry, "hookwarden_ack_duration_seconds", "source", ""); ok {
		t.Error("ack_duration_seconds has a series for the unknown source")
	}
}

func TestDuplicateTypesFoldIntoOther(t *testing.T) {
	m := metrics.New(nil)
	for i := range metrics.MaxTypes + 5 {
		m.Event("stripe", fmt.Sprintf("type.%d", i), hookwarden.Duplicate, false)
	}
	// A type seen before the cap keeps its own label; new ones past it fold.
	m.Event("stripe", "type.0", hookwarden.Duplicate, true)
	m.Event("stripe", "", hookwarden.Duplicate, false)
	// The cap is per source.
	m.Event("github", "push", hookwarden.Duplicate, false)

	if got := mustValue(t, m.Registry, "hookwarden_duplicates_total", "source", "stripe", "type", "other"); got != 5 {
		t.Errorf(`duplicates{type="other"} = %v, want 5`, got)
	}
	if got := mustValue(t, m.Registry, "hookwarden_duplicates_total", "source", "stripe", "type", "type.0"); got != 2 {
		t.Errorf(`duplicates{type="type.0"} = %v, want 2`, got)
	}
	if got := mustValue(t, m.Registry, "hookwarden_duplicates_total", "source", "stripe", "type", "none"); got != 1 {
		t.Errorf(`duplicates{type="none"} = %v, want 1`, got)
	}
	if got := mustValue(t, m.Registry, "hookwarden_duplicates_total", "source", "github", "type", "push"); got != 1 {
		t.Errorf(`duplicates{source="github",type="push"} = %v, want 1`, got)
	}
	// MaxTypes own labels + other + none for stripe, one for github.
	if n := testutil.CollectAndCount(m.Registry, "hookwarden_duplicates_total"); n != metrics.MaxTypes+3 {
		t.Errorf("duplicates_total series: %d, want %d (bounded)", n, metrics.MaxTypes+3)
	}
	if got := mustValue(t, m.Registry, "hookwarden_divergent_duplicates_total", "source", "stripe"); got != 1 {
		t.Errorf("divergent = %v, want 1", got)
	}
}

func TestLastAcceptedMovesAndSeeds(t *testing.T) {
	m := metrics.New(nil)
	if _, ok := value(t, m.Registry, "hookwarden_last_accepted_timestamp_seconds", "source", "stripe"); ok {
		t.Fatal("last_accepted present before any event or seed")
	}
	seed := time.Date(2025, 3, 1, 12, 0, 0, 500e6, time.UTC)
	m.SetLastAccepted("stripe", seed)
	if got, want := mustValue(t, m.Registry, "hookwarden_last_accepted_timestamp_seconds", "source", "stripe"), 1740830400.5; got != want {
		t.Fatalf("seeded = %v, want %v", got, want)
	}
	m.SetLastAccepted("github", time.Time{}) // never accepted: stays absent
	if _, ok := value(t, m.Registry, "hookwarden_last_accepted_timestamp_seconds", "source", "github"); ok {
		t.Error("a zero seed created a series")
	}
	before := float64(time.Now().Unix())
	m.Event("stripe", "x", hookwarden.Accepted, false)
	if got := mustValue(t, m.Registry, "hookwarden_last_accepted_timestamp_seconds", "source", "stripe"); got < before {
		t.Errorf("after an accepted event = %v, want >= %v", got, before)
	}
	// Duplicates are not news: they must not move the clock.
	m.SetLastAccepted("stripe", seed)
	m.Event("stripe", "x", hookwarden.Duplicate, false)
	if got := mustValue(t, m.Registry, "hookwarden_last_accepted_timestamp_seconds", "source", "stripe"); got != 1740830400.5 {
		t.Errorf("a duplicate moved last_accepted to %v", got)
	}
}

func TestExpectWithinAndRetentionMargin(t *testing.T) {
	m := metrics.New(nil)
	m.SetExpectWithin("stripe", 6*time.Hour)
	m.SetExpectWithin("quiet", 0) // not configured: no series, no absence alert
	m.SetRetentionMargin("stripe", -time.Hour)
	if got := mustValue(t, m.Registry, "hookwarden_source_expect_within_seconds", "source", "stripe"); got != 21600 {
		t.Errorf("expect_within = %v, want 21600", got)
	}
	if _, ok := value(t, m.Registry, "hookwarden_source_expect_within_seconds", "source", "quiet"); ok {
		t.Error("a source without expect_within has a series")
	}
	if got := mustValue(t, m.Registry, "hookwarden_retention_margin_seconds", "source", "stripe"); got != -3600 {
		t.Errorf("retention margin = %v, want -3600", got)
	}
}

func TestDeliveriesAndStore(t *testing.T) {
	m := metrics.New(nil)
	m.InitDestination("s/app")
	m.Attempt("s/app", hookwarden.Attempt{Verdict: hookwarden.Retry, Duration: time.Second})
	m.Attempt("s/app", hookwarden.Attempt{Verdict: hookwarden.Delivered, Duration: time.Second})
	m.Commit(8, time.Millisecond, nil)
	m.Commit(1, time.Millisecond, errors.New("disk full"))
	for _, c := range []struct {
		outcome string
		want    float64
	}{{"delivered", 1}, {"retry", 1}, {"dead", 0}} {
		if got := mustValue(t, m.Registry, "hookwarden_deliveries_total", "destination", "s/app", "outcome", c.outcome); got != c.want {
			t.Errorf("deliveries{outcome=%q} = %v, want %v", c.outcome, got, c.want)
		}
	}
	if got := mustValue(t, m.Registry, "hookwarden_delivery_duration_seconds", "destination", "s/app"); got != 2 {
		t.Errorf("delivery_duration count = %v, want 2", got)
	}
	if got := mustValue(t, m.Registry, "hookwarden_store_batch_size"); got != 2 {
		t.Errorf("store_batch_size count = %v, want 2", got)
	}
	if got := mustValue(t, m.Registry, "hookwarden_store_commit_errors_total"); got != 1 {
		t.Errorf("commit errors = %v, want 1", got)
	}
}

// fakeOutbox is an OutboxReader made of a function field.
type fakeOutbox struct {
	stats func(ctx context.Context, dests []string) ([]hookwarden.OutboxStat, error)
}

var _ metrics.OutboxReader = fakeOutbox{}

func (f fakeOutbox) OutboxStats(ctx context.Context, dests []string) ([]hookwarden.OutboxStat, error) {
	if f.stats == nil {
		out := make([]hookwarden.OutboxStat, len(dests))
		for i, d := range dests {
			out[i].Destination = d
		}
		return out, nil
	}
	return f.stats(ctx, dests)
}

func TestOutboxGaugesServedFromRefreshedSnapshot(t *testing.T) {
	m := metrics.New(nil)
	var mu sync.Mutex
	fail, pending, calls := false, 7, 0
	m.RegisterOutbox(fakeOutbox{stats: func(_ context.Context, dests []string) ([]hookwarden.OutboxStat, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if fail {
			return nil, errors.New("database is locked")
		}
		return []hookwarden.OutboxStat{
			{Destination: "s/app", Pending: pending, OldestPendingAge: 90 * time.Second, Dead: 2},
			{Destination: "s/notify"},
		}, nil
	}}, []string{"s/app", "s/notify"})
	for _, c := range []struct {
		name, dest string
		want       float64
	}{
		{"hookwarden_outbox_pending", "s/app", 7},
		{"hookwarden_dead_letters", "s/app", 2},
		{"hookwarden_dead_letters", "s/notify", 0},
	} {
		if got := mustValue(t, m.Registry, c.name, "destination", c.dest); got != c.want {
			t.Errorf("%s{destination=%q} = %v, want %v", c.name, c.dest, got, c.want)
		}
	}
	// The age moves on between refreshes.
	if got := mustValue(t, m.Registry, "hookwarden_outbox_oldest_pending_age_seconds", "destination", "s/app"); got < 90 || got > 91 {
		t.Errorf("oldest pending age %v, want 90 and a little", got)
	}
	mu.Lock()
	if calls != 1 {
		t.Errorf("OutboxStats called %d times for several scrapes, want 1: scrapes must not count the backlog", calls)
	}
	mu.Unlock()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.RunOutbox(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	mu.Lock()
	pending = 9
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for mustValue(t, m.Registry, "hookwarden_outbox_pending", "destination", "s/app") != 9 {
		if time.Now().After(deadline) {
			t.Fatal("the refresh never showed the new backlog")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Refreshes failing for long: the series go absent, not stale forever.
	mu.Lock()
	fail = true
	mu.Unlock()
	for {
		if _, ok := value(t, m.Registry, "hookwarden_dead_letters", "destination", "s/app"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("dead_letters still served from a snapshot that can no longer be refreshed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReadyGauge(t *testing.T) {
	m := metrics.New(nil)
	var err error
	m.RegisterReady(func(context.Context) error { return err })
	if got := mustValue(t, m.Registry, "hookwarden_ready"); got != 1 {
		t.Errorf("ready = %v, want 1", got)
	}
	err = errors.New("last write failed")
	if got := mustValue(t, m.Registry, "hookwarden_ready"); got != 0 {
		t.Errorf("ready = %v, want 0 after a failed write", got)
	}
}

// quarantined_total has two reasons whatever the store's free text says.
func TestQuarantinedReasonsBounded(t *testing.T) {
	m := metrics.New(nil)
	m.InitSource("gh")
	for _, r := range []string{hookwarden.QuarantineNoEventID, hookwarden.QuarantineBodyReplayed} {
		if got := mustValue(t, m.Registry, "hookwarden_quarantined_total", "source", "gh", "reason", r); got != 0 {
			t.Fatalf("after InitSource: %s = %v, want 0", r, got)
		}
	}
	m.Quarantined("gh", hookwarden.QuarantineBodyReplayed)
	m.Quarantined("gh", hookwarden.QuarantineBodyReplayed)
	m.Quarantined("gh", "batch body is not a JSON array: unexpected end")
	m.Quarantined("gh", hookwarden.QuarantineNoEventID)
	for r, want := range map[string]float64{hookwarden.QuarantineBodyReplayed: 2, hookwarden.QuarantineNoEventID: 2} {
		if got := mustValue(t, m.Registry, "hookwarden_quarantined_total", "source", "gh", "reason", r); got != want {
			t.Errorf("quarantined_total{reason=%q} = %v, want %v", r, got, want)
		}
	}
	if n := testutil.CollectAndCount(m.Registry, "hookwarden_quarantined_total"); n != 2 {
		t.Errorf("quarantined_total has %d series, want 2", n)
	}
}
