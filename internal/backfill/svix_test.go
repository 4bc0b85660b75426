package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// fakeSvix serves POST /api/v1/app/{app}/endpoint/{endpoint}/recover as Svix
// documents it: Bearer API key, JSON {"since","until"}, 202 with
// {"id","status":"running","task":"endpoint.recover"}; errors as
// {"code","detail"}.
type fakeSvix struct {
	key, app, endpoint string
	fl                 fault

	mu     sync.Mutex
	n      int
	bodies []map[string]string
}

func (f *fakeSvix) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.n++
	n, fl := f.n, f.fl
	f.mu.Unlock()
	if fl != nil && fl(n, w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		w.WriteHeader(401)
		w.Write([]byte(`{"code":"authentication_failed","detail":"Invalid token"}`))
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != fmt.Sprintf("/api/v1/app/%s/endpoint/%s/recover", f.app, f.endpoint) {
		w.WriteHeader(404)
		w.Write([]byte(`{"code":"not_found","detail":"Entity not found"}`))
		return
	}
	var in map[string]string
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in["since"] == "" {
		w.WriteHeader(422)
		w.Write([]byte(`{"detail":[{"loc":["body","since"],"msg":"field required","type":"value_error.missing"}]}`))
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, in)
	f.mu.Unlock()
	w.WriteHeader(202)
	w.Write([]byte(`{"id":"qtask_1srOrx2ZWZBpBUvZwXKQmoEYga2","status":"running","task":"endpoint.recover"}`))
}

func TestSvixRecover(t *testing.T) {
	f := &fakeSvix{key: "testsk_fake", app: "app_1", endpoint: "ep_2"}
	f.fl = func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			w.WriteHeader(503)
			return true
		}
		return false
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	s, err := NewSvix(SvixConfig{Options: testOptions(srv.URL, f.key), App: "app_1", Endpoint: "ep_2"})
	if err != nil {
		t.Fatal(err)
	}
	from, to := testNow.Add(-3*time.Hour), testNow.Add(-time.Hour)
	rep, err := s.Redeliver(context.Background(), from, to, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.CountsUnknown || rep.Task != "qtask_1srOrx2ZWZBpBUvZwXKQmoEYga2" {
		t.Errorf("report %+v", rep)
	}
	f.mu.Lock()
	if len(f.bodies) != 1 || f.bodies[0]["since"] != from.Format(time.RFC3339Nano) || f.bodies[0]["until"] != to.Format(time.RFC3339Nano) {
		t.Errorf("bodies %v", f.bodies)
	}
	f.mu.Unlock()

	s, _ = NewSvix(SvixConfig{Options: testOptions(srv.URL, "wrong"), App: "app_1", Endpoint: "ep_2"})
	if _, err := s.Redeliver(context.Background(), from, to, nil); !errors.Is(err, ErrKeyRefused) {
		t.Errorf("wrong key: err %v", err)
	}
	if _, err := NewSvix(SvixConfig{Options: testOptions(srv.URL, f.key), App: "../x", Endpoint: "ep_2"}); err == nil {
		t.Errorf("app ../x accepted")
	}
}

func TestInsecureBaseRefused(t *testing.T) {
	builders := map[string]func(base string) error{
		"stripe": func(b string) error {
			_, err := NewStripe(StripeConfig{Options: Options{APIBase: b, APIKey: "k"}})
			return err
		},
		"paddle": func(b string) error {
			_, err := NewPaddle(PaddleConfig{Options: Options{APIBase: b, APIKey: "k"}})
			return err
		},
		"github": func(b string) error {
			_, err := NewGitHub(GitHubConfig{Options: Options{APIBase: b, APIKey: "k"}, Hook: "repos/o/r/hooks/1"})
			return err
		},
		"svix": func(b string) error {
			_, err := NewSvix(SvixConfig{Options: Options{APIBase: b, APIKey: "k"}, App: "a", Endpoint: "e"})
			return err
		},
	}
	for name, build := range builders {
		for _, bad := range []string{"http://api.example.com", "http://10.0.0.1:8080", "ftp://127.0.0.1", "https://u:p@api.example.com", "api.example.com", "http://127.0.0.1.example.com"} {
			if err := build(bad); !errors.Is(err, ErrInsecureBase) {
				t.Errorf("%s %q: err %v, want ErrInsecureBase", name, bad, err)
			}
		}
		for _, ok := range []string{"", "https://api.example.com", "http://127.0.0.1:9999", "http://[::1]:1", "http://localhost:80/base"} {
			if err := build(ok); err != nil {
				t.Errorf("%s %q: %v", name, ok, err)
			}
		}
	}
	if _, err := NewStripe(StripeConfig{}); err == nil {
		t.Errorf("no api key accepted")
	}
}

func TestRedirectToOtherOriginRefused(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the key followed a redirect to another origin: %s", r.Header.Get("Authorization"))
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/events", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, "sk")})
	_, err := s.List(context.Background(), testNow.Add(-time.Hour), testNow, func(Event) error { return nil })
	if !errors.Is(err, ErrInsecureBase) {
		t.Errorf("err %v, want ErrInsecureBase", err)
	}
}

func TestBadWindow(t *testing.T) {
	s := mustStripe(t, StripeConfig{Options: testOptions("https://api.stripe.com", "sk")})
	if _, err := s.List(context.Background(), testNow, testNow.Add(-time.Hour), nil); !errors.Is(err, ErrBadWindow) {
		t.Errorf("from after to: err %v", err)
	}
}
