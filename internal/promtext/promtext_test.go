package promtext

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestParseRealExposition reads what client_golang's handler serves.
func TestParseRealExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookwarden_requests_total", Help: "h"}, []string{"outcome", "source"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hookwarden_store_batch_size", Help: "h", Buckets: []float64{1, 10}})
	reg.MustRegister(c, h)
	c.WithLabelValues("accepted", "t").Add(3)
	h.Observe(4)
	h.Observe(6)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got, err := Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]float64{
		`hookwarden_requests_total{outcome="accepted",source="t"}`: 3,
		"hookwarden_store_batch_size_sum":                          10,
		"hookwarden_store_batch_size_count":                        2,
		`hookwarden_store_batch_size_bucket{le="1"}`:               0,
		`hookwarden_store_batch_size_bucket{le="+Inf"}`:            2,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

func TestParse(t *testing.T) {
	in := `# HELP x help
# TYPE hookwarden_requests_total counter
hookwarden_requests_total{outcome="accepted",source="t"} 3
hookwarden_store_batch_size_sum 10
hookwarden_store_batch_size_count 2
go_goroutines 18
weird_line_without_value
bad_value{a="b"} x
  spaced 1.5e3  
`
	got, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`hookwarden_requests_total{outcome="accepted",source="t"}`: 3,
		"hookwarden_store_batch_size_sum":                          10,
		"hookwarden_store_batch_size_count":                        2,
		"go_goroutines":                                            18,
		"spaced":                                                   1500,
	}
	if len(got) != len(want) {
		t.Errorf("got %d series %v, want %d", len(got), got, len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// FuzzParse: any input parses without panicking, and every series kept has
// no surrounding space and does not start a comment.
func FuzzParse(f *testing.F) {
	f.Add("a 1\n# c\nb{x=\"y\"} 2\n")
	f.Add("   \n\t\n")
	f.Add("x{a=\"b c\"} NaN\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(strings.NewReader(s))
		if err != nil {
			return
		}
		for k := range m {
			if k == "" || k != strings.TrimSpace(k) || k[0] == '#' {
				t.Fatalf("series %q kept", k)
			}
		}
	})
}
