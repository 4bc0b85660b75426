package metrics

import "github.com/prometheus/client_golang/prometheus"

// handshakeKinds are the kind label's values (SPEC 11): anything else a
// receiver reports is folded into "other", so the label set stays bounded.
var handshakeKinds = map[string]bool{"verify": true, "crc": true, "validation": true, "url_validation": true, "ping": true, "webhook": true}

func newHandshakes() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "hookwarden", Name: "handshakes_total",
		Help: "Platform verification requests answered at the door (never events), by kind and outcome (answered, refused)."},
		[]string{"source", "kind", "outcome"})
}

// Handshake implements receiver.HandshakeObserver.
func (m *Metrics) Handshake(source, kind, outcome string) {
	if !handshakeKinds[kind] {
		kind = "other"
	}
	if outcome != "answered" {
		outcome = "refused"
	}
	m.handshakes.WithLabelValues(source, kind, outcome).Inc()
}
