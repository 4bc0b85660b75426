package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

const testToken = "s3cret-token"

type apiFixture struct {
	t        *testing.T
	srv      *httptest.Server
	store    *sqlitestore.Store
	mu       sync.Mutex
	notified []string
}

// setupAPI serves the admin handler with the API on a real store holding
// five events: e0..e3 delivered-pending mix, "bad" dead-lettered.
func setupAPI(t *testing.T) *apiFixture {
	t.Helper()
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "hw.db"), sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := &apiFixture{t: t, store: s}
	for i, id := range []string{"e0", "e1", "e2", "e3", "bad"} {
		body := []byte(fmt.Sprintf(`{"id":%q,"n":%d}`, id, i))
		sum := sha256.Sum256(body)
		_, err := s.Record(ctx, &hookwarden.Receipt{Source: "std", Header: http.Header{"Content-Type": {"application/json"}},
			Body: body, BodySHA256: sum, RemoteAddr: "127.0.0.1:1", ReceivedAt: time.Now(),
			Events: []hookwarden.Event{{ID: id, Type: "t.x", BodySHA256: sum, Destinations: []string{"std/app"}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := s.Lease(ctx, "std/app", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		v := hookwarden.Retry
		if j.EventID == "bad" {
			v = hookwarden.Dead
		}
		if err := s.Finish(ctx, hookwarden.Attempt{JobID: j.ID, Number: j.Attempt, StartedAt: time.Now(), ExitCode: -1,
			StatusCode: 422, Verdict: v, RetryAt: time.Now().Add(time.Hour), Error: "HTTP 422"}); err != nil {
			t.Fatal(err)
		}
	}
	a := New(Options{Token: testToken, Ready: func(context.Context) error { return nil }})
	NewAPI(APIOptions{
		Store: s,
		Sources: func() []hookwarden.SourcePolicy {
			return []hookwarden.SourcePolicy{{Name: "std", RetryHorizon: time.Hour}}
		},
		Destinations: func() []string { return []string{"std/app"} },
		Rates:        func() map[string]string { return map[string]string{"std/app": "20/s"} },
		Notify: func(d ...string) {
			f.mu.Lock()
			f.notified = append(f.notified, d...)
			f.mu.Unlock()
		},
		Logger: slog.New(slog.DiscardHandler),
	}).Register(a.Router())
	f.srv = httptest.NewServer(a)
	t.Cleanup(f.srv.Close)
	return f
}

// call does one request; token "" sends none. It decodes JSON into out.
func (f *apiFixture) call(method, path, token string, body string, out any, hdr ...string) int {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func TestAPIAuth(t *testing.T) {
	f := setupAPI(t)
	for _, p := range []string{"/api/events", "/api/events/std/e1", "/api/dead", "/api/gaps", "/api/stats"} {
		if code := f.call("GET", p, "", "", nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without token: %d, want 401", p, code)
		}
		if code := f.call("GET", p, "wrong", "", nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", p, code)
		}
		if code := f.call("GET", p, testToken, "", nil); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d, want 200", p, code)
		}
	}
	if code := f.call("POST", "/api/replay", "", `{"dead":true}`, nil); code != http.StatusUnauthorized {
		t.Errorf("POST /api/replay without token: %d, want 401", code)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code := f.call("GET", p, "", "", nil); code != http.StatusOK {
			t.Errorf("GET %s without token: %d, want 200 (open)", p, code)
		}
	}
}

func TestAPIListsPaginateByCursor(t *testing.T) {
	f := setupAPI(t)
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		var p struct {
			Items []struct {
				EventID string `json:"event_id"`
				Status  string `json:"status"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		if code := f.call("GET", "/api/events?limit=2&cursor="+cursor, testToken, "", &p); code != 200 {
			t.Fatalf("page %d: %d", pages, code)
		}
		for _, it := range p.Items {
			seen = append(seen, it.EventID+"="+it.Status)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if got := fmt.Sprint(seen); got != "[bad=dead e3=pending e2=pending e1=pending e0=pending]" {
		t.Fatalf("events over pages: %s", got)
	}
	var dead struct {
		Items []hookwarden.DeadLetter `json:"items"`
	}
	if code := f.call("GET", "/api/dead?source=std", testToken, "", &dead); code != 200 || len(dead.Items) != 1 ||
		dead.Items[0].EventID != "bad" || dead.Items[0].Destination != "std/app" {
		t.Fatalf("dead: %d %+v", code, dead)
	}
	var bad map[string]string
	if code := f.call("GET", "/api/events?status=weird", testToken, "", &bad); code != 400 || bad["status"] != "bad_request" {
		t.Fatalf("bad status filter: %d %v", code, bad)
	}
	if code := f.call("GET", "/api/events?since=yesterday", testToken, "", nil); code != 400 {
		t.Fatalf("bad since: %d, want 400", code)
	}
}

func TestAPIEventDetail(t *testing.T) {
	f := setupAPI(t)
	var d hookwarden.EventDetail
	if code := f.call("GET", "/api/events/std/bad", testToken, "", &d); code != 200 {
		t.Fatalf("detail: %d", code)
	}
	if string(d.Body) != `{"id":"bad","n":4}` || len(d.JobLog) != 1 || len(d.JobLog[0].Log) != 1 || d.Status != "dead" {
		t.Fatalf("detail: %+v", d)
	}
	var nf map[string]string
	if code := f.call("GET", "/api/events/std/nope", testToken, "", &nf); code != 404 || nf["status"] != "not_found" {
		t.Fatalf("missing event: %d %v", code, nf)
	}
}

func TestAPIReplay(t *testing.T) {
	f := setupAPI(t)
	// CSRF guards: a form post (wrong type) and a cross-site fetch are refused.
	req, _ := http.NewRequest("POST", f.srv.URL+"/api/replay", bytes.NewReader([]byte("dead=true")))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("form post: %d, want 415", resp.StatusCode)
	}
	if code := f.call("POST", "/api/replay", testToken, `{"dead":true}`, nil, "Sec-Fetch-Site", "cross-site"); code != 403 {
		t.Fatalf("cross-site: %d, want 403", code)
	}
	for _, body := range []string{`{}`, `{"dead":true,"event_ids":["e1"],"source":"std"}`, `{"event_ids":["e1"]}`,
		`{"job_ids":[1],"since":"1h"}`, `{"dead":true,"bogus":1}`} {
		if code := f.call("POST", "/api/replay", testToken, body, nil); code != 400 {
			t.Errorf("replay %s: %d, want 400", body, code)
		}
	}

	var res hookwarden.ReplayResult
	if code := f.call("POST", "/api/replay", testToken, `{"dead":true,"source":"std","since":"1h"}`, &res); code != 200 {
		t.Fatalf("replay: %d", code)
	}
	if res.Replayed != 1 || res.Selected != 1 {
		t.Fatalf("replay result: %+v", res)
	}
	f.mu.Lock()
	notified := fmt.Sprint(f.notified)
	f.mu.Unlock()
	if notified != "[std/app]" {
		t.Fatalf("workers woken for %s, want [std/app]", notified)
	}
	var d hookwarden.EventDetail
	f.call("GET", "/api/events/std/bad", testToken, "", &d)
	if d.Status != "pending" || d.JobLog[0].Attempts != 0 || d.JobLog[0].ReplayedAt.IsZero() {
		t.Fatalf("after replay: %+v", d.JobLog[0])
	}
	// Unknown event ids come back as skipped, not as an error.
	res = hookwarden.ReplayResult{}
	if code := f.call("POST", "/api/replay", testToken, `{"source":"std","event_ids":["e1","nope"]}`, &res); code != 200 ||
		res.Replayed != 1 || len(res.Skipped) != 1 || res.Skipped[0].Reason != hookwarden.SkipNotFound {
		t.Fatalf("replay by id: %d %+v", code, res)
	}
}

func TestAPIGapsAndStats(t *testing.T) {
	f := setupAPI(t)
	var g hookwarden.GapReport
	if code := f.call("GET", "/api/gaps?since=7d", testToken, "", &g); code != 200 || g.Outages == nil || g.Silences == nil {
		t.Fatalf("gaps: %d %+v", code, g)
	}
	var st struct {
		hookwarden.Stats
		Hourly map[string][]hookwarden.HourCount `json:"hourly"`
	}
	// serve's flush of two refusals: /api/stats shows them by reason.
	if err := f.store.CountRefusals(context.Background(), []hookwarden.RefusalCount{
		{Source: "std", Hour: time.Now(), Reason: hookwarden.RefusedMismatch, N: 2}}); err != nil {
		t.Fatal(err)
	}
	if code := f.call("GET", "/api/stats", testToken, "", &st); code != 200 {
		t.Fatalf("stats: %d", code)
	}
	if len(st.Sources) != 1 || st.Sources[0].Accepted != 5 || len(st.Destinations) != 1 ||
		st.Destinations[0].Pending != 4 || st.Destinations[0].Dead != 1 {
		t.Fatalf("stats: %+v", st)
	}
	if st.Sources[0].Refused != (hookwarden.Refusals{Mismatch: 2}) {
		t.Fatalf("stats' refused_24h: %+v, want 2 mismatches", st.Sources[0].Refused)
	}
	// The five events were recorded this hour (or, across an hour's turn,
	// the last one): the series says so.
	hours := st.Hourly["std"]
	if len(hours) == 0 || len(hours) > 2 {
		t.Fatalf("hourly: %+v, want this hour's (and at most the last's)", st.Hourly)
	}
	n := 0
	for _, h := range hours {
		n += h.Accepted
		if h.Hour.Minute() != 0 || time.Since(h.Hour) > 2*time.Hour {
			t.Errorf("hourly hour %v, want a recent whole hour", h.Hour)
		}
	}
	if n != 5 {
		t.Errorf("hourly accepted %d, want 5: %+v", n, hours)
	}
}

// Every state-changing /api/* route refuses another origin's request by its
// Origin header when the browser sends no Sec-Fetch-Site (an older browser,
// or plain http to a non-local name), as the dashboard does; the same
// origin, and a client with neither header (curl), pass the check.
func TestAPIPostsRefuseAnotherOrigin(t *testing.T) {
	f := setupAPI(t)
	host := strings.TrimPrefix(f.srv.URL, "http://")
	for _, path := range []string{"/api/replay", "/api/backfill", "/api/destinations/std/app/pause"} {
		if code := f.call("POST", path, testToken, `{}`, nil, "Origin", "http://evil.example"); code != 403 {
			t.Errorf("%s from Origin http://evil.example: %d, want 403", path, code)
		}
		if code := f.call("POST", path, testToken, `{}`, nil, "Origin", "http://"+host); code == 403 {
			t.Errorf("%s from its own origin: 403", path)
		}
		if code := f.call("POST", path, testToken, `{}`, nil); code == 403 {
			t.Errorf("%s without Origin: 403", path)
		}
	}
}
