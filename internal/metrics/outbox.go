package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookwarden/hookwarden"
)

// outboxCollector serves the outbox gauges from a snapshot refreshed in the
// background. Counting pending jobs walks the pending index, which is cheap
// for a healthy outbox but grows with a backlog (about 15 ms for 100,000
// pending jobs): paying that on a timer, off the scrape path, keeps every
// scrape constant-time. Ages are advanced to the scrape's time.
type outboxCollector struct {
	r   OutboxReader
	log *slog.Logger

	mu        sync.Mutex
	maxStale  time.Duration // a snapshot older than this is not served
	dests     []string
	stats     []hookwarden.OutboxStat
	paused    map[string]bool // when r is a hookwarden.PauseInspector
	refreshed time.Time
}

var (
	pendingDesc = prometheus.NewDesc("hookwarden_outbox_pending", "Jobs waiting for delivery (retries included).", []string{"destination"}, nil)
	oldestDesc  = prometheus.NewDesc("hookwarden_outbox_oldest_pending_age_seconds", "Age of the oldest pending job (since it was created or last replayed).", []string{"destination"}, nil)
	deadDesc    = prometheus.NewDesc("hookwarden_dead_letters", "Dead-lettered jobs awaiting a human.", []string{"destination"}, nil)
	pausedDesc  = prometheus.NewDesc("hookwarden_destination_paused",
		"1 while the destination is paused (automatically after pause_after failures, or by an operator), else 0.",
		[]string{"destination"}, nil)
)

func (c *outboxCollector) setDestinations(d []string) {
	c.mu.Lock()
	c.dests = append([]string(nil), d...)
	c.mu.Unlock()
}

// refresh reads the outbox once.
func (c *outboxCollector) refresh(ctx context.Context) {
	c.mu.Lock()
	dests := c.dests
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stats, err := c.r.OutboxStats(ctx, dests)
	if err != nil {
		if c.log != nil && ctx.Err() == nil {
			c.log.Error("read outbox metrics", "err", err)
		}
		return
	}
	// An OutboxReader that reads pauses gets hookwarden_destination_paused:
	// the flow row only (Destinations would also count each backlog).
	var paused map[string]bool
	if pr, ok := c.r.(hookwarden.PauseInspector); ok {
		ps, err := pr.Paused(ctx, dests)
		if err != nil {
			if c.log != nil && ctx.Err() == nil {
				c.log.Error("read destination flow metrics", "err", err)
			}
			return
		}
		paused = make(map[string]bool, len(ps))
		for i, p := range ps {
			paused[dests[i]] = p
		}
	}
	c.mu.Lock()
	prev, first := c.paused, c.refreshed.IsZero()
	c.stats, c.paused, c.refreshed = stats, paused, time.Now()
	c.mu.Unlock()
	c.logPauses(dests, prev, paused, first)
}

// logPauses says in the log when a destination becomes paused (by
// pause_after's failures, another serve or an operator) or resumed: an
// automatic pause must not pass unnoticed until someone reads a gauge. A
// destination paused at start is said once too.
func (c *outboxCollector) logPauses(dests []string, prev, now map[string]bool, first bool) {
	if c.log == nil || now == nil {
		return
	}
	for _, d := range dests {
		p, was := now[d], prev[d]
		switch {
		case p && !was:
			msg := "destination paused: no deliveries until it is resumed"
			if first {
				msg = "destination is paused: no deliveries until it is resumed"
			}
			c.log.Warn(msg, "destination", d, "cause", "pause_after failures, or an operator (the audit log says)",
				"resume", "hookwarden resume "+d)
		case was && !p && !first:
			c.log.Info("destination resumed", "destination", d)
		}
	}
}

func (c *outboxCollector) run(ctx context.Context, every time.Duration) {
	c.mu.Lock()
	c.maxStale = 5 * every
	c.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		c.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- oldestDesc
	ch <- deadDesc
	ch <- pausedDesc
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	never := c.refreshed.IsZero()
	c.mu.Unlock()
	if never {
		// No background refresh yet (or none running, as in tests): read now.
		c.refresh(context.Background())
	}
	c.mu.Lock()
	stats, paused, since, maxStale := c.stats, c.paused, time.Since(c.refreshed), c.maxStale
	c.mu.Unlock()
	if maxStale > 0 && since > maxStale {
		// Refreshes keep failing: absent series, not made-up values.
		return
	}
	for _, s := range stats {
		age := s.OldestPendingAge
		if s.Pending > 0 {
			age += since
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.Pending), s.Destination)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age.Seconds(), s.Destination)
		ch <- prometheus.MustNewConstMetric(deadDesc, prometheus.GaugeValue, float64(s.Dead), s.Destination)
	}
	for dest, p := range paused {
		v := 0.0
		if p {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, v, dest)
	}
}
