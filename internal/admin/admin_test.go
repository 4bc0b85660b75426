package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Without a token, a page on a rebound DNS name must not reach the API.
func TestNoTokenRefusesForeignHostNames(t *testing.T) {
	a := New(Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})})
	for host, want := range map[string]int{
		"127.0.0.1:8081": 200, "localhost:8081": 200, "[::1]:8081": 200,
		"attacker.example:8081": 403, "attacker.example": 403,
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Host = host
		w := httptest.NewRecorder()
		a.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d", host, w.Code, want)
		}
	}
	// Health checks answer any host name (load balancers use them).
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.Host = "lb.internal"
	w := httptest.NewRecorder()
	a.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Errorf("/healthz: %d", w.Code)
	}
}
