package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lagBuckets span a live event (seconds) to a platform's last retries
// after a long outage (days).
var lagBuckets = []float64{1, 5, 15, 60, 300, 900, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400}

func newLag() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "hookwarden", Name: "event_lag_seconds",
		Help:    "Received time minus the event's own time (event_time), per source: the platform's delay, its retries' included.",
		Buckets: lagBuckets}, []string{"source"})
}

// EventLag implements receiver.LagObserver: a newly accepted event's lag
// (a negative one, the platform's clock ahead of ours, counts as 0).
func (m *Metrics) EventLag(source string, lag time.Duration) {
	m.lag.WithLabelValues(source).Observe(max(lag, 0).Seconds())
}
