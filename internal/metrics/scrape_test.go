package metrics_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookwarden/hookwarden/internal/metrics"
)

// TestParseTextReadsWhatTheHandlerServes: the series the harnesses read
// come back keyed as the exposition writes them, histograms included, and a
// label value with a quote, a backslash and a newline is escaped as written.
func TestParseTextReadsWhatTheHandlerServes(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookwarden_requests_total", Help: "h"}, []string{"source", "outcome"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hookwarden_store_batch_size", Help: "h", Buckets: []float64{1, 10}})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "go_goroutines_test", Help: "h"})
	reg.MustRegister(c, h, g)
	c.WithLabelValues("t", "accepted").Add(3)
	c.WithLabelValues("q\"\\\n", "accepted").Add(1)
	h.Observe(4)
	h.Observe(6)
	g.Set(18)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	got, err := metrics.ParseText(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`hookwarden_requests_total{outcome="accepted",source="t"}`:       3,
		`hookwarden_requests_total{outcome="accepted",source="q\"\\\n"}`: 1,
		"hookwarden_store_batch_size_sum":                                10,
		"hookwarden_store_batch_size_count":                              2,
		`hookwarden_store_batch_size_bucket{le="1"}`:                     0,
		`hookwarden_store_batch_size_bucket{le="10"}`:                    2,
		`hookwarden_store_batch_size_bucket{le="+Inf"}`:                  2,
		"go_goroutines_test":                                             18,
	}
	if len(got) != len(want) {
		t.Errorf("got %d series %v, want %d", len(got), got, len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
		// each key is a line of the exposition, value aside
		if !strings.Contains(text, "\n"+k+" ") {
			t.Errorf("%s is not a series as the exposition writes it:\n%s", k, text)
		}
	}
}

// TestParseTextRefusesMalformed: a line that is not a sample is an error,
// not a silently missing series.
func TestParseTextRefusesMalformed(t *testing.T) {
	for _, in := range []string{"x{a=\"b\"} notanumber\n", "weird_line_without_value\n", "x{a=\"b} 1\n",
		"\" \"0\n", "{\"a.b\"} 1\n", "x{\"a.b\"=\"c\"} 1\n"} {
		if m, err := metrics.ParseText(strings.NewReader(in)); err == nil {
			t.Errorf("%q parsed as %v, want an error", in, m)
		}
	}
}

// FuzzParseText: any input parses or fails without panicking, and every
// series kept starts with a name and has no surrounding space.
func FuzzParseText(f *testing.F) {
	f.Add("a 1\n# c\nb{x=\"y\"} 2\n")
	f.Add("   \n\t\n")
	f.Add("x{a=\"b c\"} NaN\n")
	f.Add("# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := metrics.ParseText(strings.NewReader(s))
		if err != nil {
			return
		}
		for k := range m {
			if k == "" || k != strings.TrimSpace(k) || k[0] == '{' || k[0] == '#' {
				t.Fatalf("series %q kept", k)
			}
		}
	})
}
