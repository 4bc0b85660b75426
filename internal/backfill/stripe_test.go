package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testNow is the clock every fake history is built around.
var testNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// fault lets a test answer request n (from 1) itself; true means handled.
type fault func(n int, w http.ResponseWriter, r *http.Request) bool

// stripeEvent is one event of the fake's history.
type stripeEvent struct {
	ID, Type, APIVersion string
	Created              int64
}

// fakeStripe serves GET /v1/events as Stripe documents it: Bearer (or basic)
// secret key, created[gte]/created[lte] inclusive, types[], limit (max 100),
// starting_after, newest first, {"object":"list","data","has_more","url"};
// errors as {"error":{"type","message"}}.
type fakeStripe struct {
	t      *testing.T
	key    string
	events []stripeEvent // newest first
	fault  fault

	mu    sync.Mutex
	n     int
	times []time.Time
	reqs  []*http.Request
}

func newFakeStripe(t *testing.T, events []stripeEvent) (*fakeStripe, *httptest.Server) {
	f := &fakeStripe{t: t, key: "sk_test_fake", events: events}
	sort.SliceStable(f.events, func(i, j int) bool { return f.events[i].Created > f.events[j].Created })
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func stripeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"type":%q,"message":%q}}`, typ, msg)
}

func (f *fakeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.n++
	n := f.n
	f.times = append(f.times, time.Now())
	f.reqs = append(f.reqs, r)
	flt := f.fault
	f.mu.Unlock()
	if flt != nil && flt(n, w, r) {
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/v1/events" {
		stripeError(w, 404, "invalid_request_error", "Unrecognized request URL")
		return
	}
	key, _, basic := r.BasicAuth()
	if !basic {
		key = ""
		if a := r.Header.Get("Authorization"); len(a) > 7 && a[:7] == "Bearer " {
			key = a[7:]
		}
	}
	if key != f.key {
		stripeError(w, 401, "invalid_request_error", "Invalid API Key provided")
		return
	}
	q := r.URL.Query()
	limit := 10
	if v := q.Get("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > 100 {
			stripeError(w, 400, "invalid_request_error", "Invalid limit")
			return
		}
		limit = l
	}
	gte, lte := int64(-1<<62), int64(1<<62)
	if v := q.Get("created[gte]"); v != "" {
		gte, _ = strconv.ParseInt(v, 10, 64)
	}
	if v := q.Get("created[lte]"); v != "" {
		lte, _ = strconv.ParseInt(v, 10, 64)
	}
	types := map[string]bool{}
	for _, t := range q["types[]"] {
		types[t] = true
	}
	after := q.Get("starting_after")
	started := after == ""
	var data []json.RawMessage
	more := false
	for _, e := range f.events {
		if !started {
			started = e.ID == after
			continue
		}
		if e.Created < gte || e.Created > lte || (len(types) > 0 && !types[e.Type]) {
			continue
		}
		if len(data) == limit {
			more = true
			break
		}
		b, _ := json.Marshal(map[string]any{"id": e.ID, "object": "event", "type": e.Type, "created": e.Created,
			"api_version": e.APIVersion, "livemode": false, "data": map[string]any{"object": map[string]any{"id": "in_" + e.ID}}})
		data = append(data, b)
	}
	if data == nil {
		data = []json.RawMessage{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "has_more": more, "url": "/v1/events"})
}

func (f *fakeStripe) setFault(fl fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fl
}

func (f *fakeStripe) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

// stripeHistory is n events one minute apart, the newest at testNow-1h.
func stripeHistory(n int) []stripeEvent {
	var out []stripeEvent
	for i := range n {
		out = append(out, stripeEvent{ID: fmt.Sprintf("evt_%04d", i), Type: "invoice.paid", APIVersion: "2024-06-20",
			Created: testNow.Add(-time.Hour - time.Duration(i)*time.Minute).Unix()})
	}
	return out
}

func testOptions(base, key string) Options {
	return Options{APIBase: base, APIKey: key, Backoff: time.Millisecond, Now: func() time.Time { return testNow }}
}

func mustStripe(t *testing.T, cfg StripeConfig) *Stripe {
	t.Helper()
	s, err := NewStripe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// collect returns a yield that records ids and fails on a second copy.
func collect(t *testing.T, got *[]string) func(Event) error {
	seen := map[string]bool{}
	return func(e Event) error {
		if seen[e.ID] {
			t.Errorf("event %s yielded twice", e.ID)
		}
		seen[e.ID] = true
		var v map[string]any
		if err := json.Unmarshal(e.Body, &v); err != nil || v["id"] != e.ID {
			t.Errorf("event %s: body %q is not its own JSON (%v)", e.ID, e.Body, err)
		}
		*got = append(*got, e.ID)
		return nil
	}
}

func TestStripeListsWindowOnceAcrossPages(t *testing.T) {
	hist := stripeHistory(400)
	f, srv := newFakeStripe(t, hist)
	// The window's bounds fall exactly on events 20 and 269: both are in.
	from, to := time.Unix(hist[269].Created, 0), time.Unix(hist[20].Created, 0)
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, f.key)})
	var got []string
	rep, err := s.List(context.Background(), from, to, collect(t, &got))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, e := range hist[20:270] {
		want[e.ID] = true
	}
	if len(got) != len(want) || rep.Listed != len(want) {
		t.Fatalf("got %d events (listed %d), want %d", len(got), rep.Listed, len(want))
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("event %s is outside the window", id)
		}
	}
	if rep.Pages != 3 || rep.Failed != 0 || rep.BeyondHistory != nil {
		t.Errorf("report %+v, want 3 pages, nothing failed or beyond", rep)
	}
	reqs := f.requests()
	for i, r := range reqs {
		q := r.URL.Query()
		if q.Get("limit") != "100" || q.Get("created[gte]") != strconv.FormatInt(from.Unix(), 10) || q.Get("created[lte]") != strconv.FormatInt(to.Unix(), 10) {
			t.Errorf("request %d: query %s", i, r.URL.RawQuery)
		}
		if r.Header.Get("Authorization") != "Bearer "+f.key {
			t.Errorf("request %d: Authorization %q", i, r.Header.Get("Authorization"))
		}
	}
	if c := reqs[1].URL.Query().Get("starting_after"); c != got[99] {
		t.Errorf("page 2 starting_after %q, want the last id of page 1 %q", c, got[99])
	}
}

func TestStripeTypesAndAPIVersion(t *testing.T) {
	hist := stripeHistory(30)
	for i := range hist {
		if i%3 == 0 {
			hist[i].Type = "customer.created"
		}
		if i%5 == 0 {
			hist[i].APIVersion = "2020-08-27"
		}
	}
	f, srv := newFakeStripe(t, hist)
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, f.key), Types: []string{"invoice.paid", "charge.failed"}, APIVersion: "2024-06-20"})
	var got []string
	rep, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, collect(t, &got))
	if err != nil {
		t.Fatal(err)
	}
	var wantOK, wantBad int
	for i := range hist {
		if i%3 == 0 {
			continue
		}
		if i%5 == 0 {
			wantBad++
		} else {
			wantOK++
		}
	}
	if len(got) != wantOK || rep.Listed != wantOK+wantBad || rep.Failed != wantBad || rep.FailedBy["api_version"] != wantBad {
		t.Errorf("yielded %d, report %+v; want %d yielded, %d failed api_version", len(got), rep, wantOK, wantBad)
	}
	if ts := f.requests()[0].URL.Query()["types[]"]; len(ts) != 2 || ts[0] != "invoice.paid" || ts[1] != "charge.failed" {
		t.Errorf("types[] = %v", ts)
	}
}

func TestStripeRetryAfterHonoured(t *testing.T) {
	f, srv := newFakeStripe(t, stripeHistory(250))
	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 2 { // mid-way: page 2's first try
			w.Header().Set("Retry-After", "1")
			stripeError(w, 429, "rate_limit_error", "Too many requests")
			return true
		}
		return false
	})
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, f.key)})
	var got []string
	rep, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, collect(t, &got))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 250 || rep.Pages != 3 {
		t.Fatalf("got %d events over %d pages, want 250 over 3", len(got), rep.Pages)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.times) != 4 {
		t.Fatalf("%d requests, want 4", len(f.times))
	}
	if gap := f.times[2].Sub(f.times[1]); gap < time.Second {
		t.Errorf("retried %s after a 429 with Retry-After: 1", gap)
	}
}

func TestStripeRetryAfterBeyondBound(t *testing.T) {
	f, srv := newFakeStripe(t, stripeHistory(5))
	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Retry-After", "3600")
		stripeError(w, 429, "rate_limit_error", "Too many requests")
		return true
	})
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, f.key)})
	_, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, func(Event) error { return nil })
	if !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("err %v, want ErrRetriesExhausted", err)
	}
}

func TestStripe5xxRetried(t *testing.T) {
	f, srv := newFakeStripe(t, stripeHistory(150))
	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 2 || n == 3 {
			stripeError(w, 500, "api_error", "Something went wrong")
			return true
		}
		return false
	})
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, f.key)})
	var got []string
	if _, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, collect(t, &got)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 150 {
		t.Fatalf("got %d events, want 150", len(got))
	}

	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		stripeError(w, 503, "api_error", "down")
		return true
	})
	o := testOptions(srv.URL, f.key)
	o.MaxAttempts = 3
	s = mustStripe(t, StripeConfig{Options: o})
	_, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, func(Event) error { return nil })
	var pe *PageError
	if !errors.Is(err, ErrRetriesExhausted) || !errors.As(err, &pe) || pe.Page != 1 {
		t.Fatalf("err %v, want ErrRetriesExhausted on page 1", err)
	}
}

func TestStripeKeyRefused(t *testing.T) {
	f, srv := newFakeStripe(t, stripeHistory(5))
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, "sk_test_wrong")})
	n := 0
	_, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, func(Event) error { n++; return nil })
	if !errors.Is(err, ErrKeyRefused) || n != 0 {
		t.Fatalf("err %v, %d yielded; want ErrKeyRefused, none", err, n)
	}
	if len(f.requests()) != 1 {
		t.Errorf("a refused key was retried")
	}
}

func TestStripeMalformedPageYieldsNothingFromIt(t *testing.T) {
	f, srv := newFakeStripe(t, stripeHistory(250))
	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n != 2 {
			return false
		}
		// Page 2: 99 good events and one without an id.
		var data []string
		for i := range 99 {
			data = append(data, fmt.Sprintf(`{"id":"evt_x%d","object":"event","type":"a","created":%d}`, i, testNow.Add(-2*time.Hour).Unix()))
		}
		data = append(data, `{"object":"event","type":"a","created":1}`)
		fmt.Fprintf(w, `{"object":"list","has_more":true,"data":[%s]}`, join(data))
		return true
	})
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, f.key)})
	var got []string
	rep, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, collect(t, &got))
	var pe *PageError
	if !errors.Is(err, ErrMalformedPage) || !errors.As(err, &pe) {
		t.Fatalf("err %v, want a malformed PageError", err)
	}
	if pe.Page != 2 || pe.Cursor != got[len(got)-1] {
		t.Errorf("page error names page %d cursor %q, want page 2 cursor %q", pe.Page, pe.Cursor, got[len(got)-1])
	}
	if len(got) != 100 || rep.Pages != 1 {
		t.Errorf("yielded %d over %d pages, want page 1's 100 only", len(got), rep.Pages)
	}
}

func join(parts []string) string { return strings.Join(parts, ",") }

func TestStripeBeyondHistory(t *testing.T) {
	f, srv := newFakeStripe(t, stripeHistory(5))
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, f.key)})
	from, to := testNow.Add(-40*24*time.Hour), testNow
	var got []string
	rep, err := s.List(context.Background(), from, to, collect(t, &got))
	if err != nil {
		t.Fatal(err)
	}
	oldest := testNow.Add(-StripeHistory)
	if rep.BeyondHistory == nil || !rep.BeyondHistory.From.Equal(from) || !rep.BeyondHistory.To.Equal(oldest) {
		t.Fatalf("beyond history %+v, want %s..%s", rep.BeyondHistory, from, oldest)
	}
	if len(got) != 5 {
		t.Errorf("got %d events, want the 5 within history", len(got))
	}
	if q := f.requests()[0].URL.Query().Get("created[gte]"); q != strconv.FormatInt(oldest.Unix(), 10) {
		t.Errorf("created[gte]=%s, want the history's start %d", q, oldest.Unix())
	}

	// A window wholly beyond history asks nothing and says so.
	before := len(f.requests())
	rep, err = s.List(context.Background(), testNow.Add(-50*24*time.Hour), testNow.Add(-40*24*time.Hour), collect(t, &got))
	if err != nil || rep.BeyondHistory == nil || rep.Pages != 0 || len(f.requests()) != before {
		t.Errorf("wholly beyond: report %+v, err %v, %d new requests", rep, err, len(f.requests())-before)
	}
}

func TestStripeBounds(t *testing.T) {
	f, srv := newFakeStripe(t, stripeHistory(250))
	o := testOptions(srv.URL, f.key)
	o.MaxPages = 2
	s := mustStripe(t, StripeConfig{Options: o})
	var got []string
	rep, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, collect(t, &got))
	if !errors.Is(err, ErrPageBound) || rep.Pages != 2 || len(got) != 200 {
		t.Errorf("page bound: err %v, report %+v, %d yielded", err, rep, len(got))
	}

	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n < 2 {
			return false
		}
		<-r.Context().Done() // hang until the client gives up
		return true
	})
	o = testOptions(srv.URL, f.key)
	o.MaxTime = 300 * time.Millisecond
	s = mustStripe(t, StripeConfig{Options: o})
	f.mu.Lock()
	f.n = 0
	f.mu.Unlock()
	_, err = s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, func(Event) error { return nil })
	if !errors.Is(err, ErrTimeBound) {
		t.Errorf("time bound: err %v, want ErrTimeBound", err)
	}

	f.setFault(nil)
	o = testOptions(srv.URL, f.key)
	o.MaxBody = 1000
	s = mustStripe(t, StripeConfig{Options: o})
	_, err = s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, func(Event) error { return nil })
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("body cap: err %v, want ErrTooLarge", err)
	}
}

func TestStripeYieldErrorStops(t *testing.T) {
	f, srv := newFakeStripe(t, stripeHistory(150))
	s := mustStripe(t, StripeConfig{Options: testOptions(srv.URL, f.key)})
	boom := errors.New("store full")
	n := 0
	_, err := s.List(context.Background(), testNow.Add(-24*time.Hour), testNow, func(Event) error {
		n++
		if n == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || n != 3 || len(f.requests()) != 1 {
		t.Errorf("err %v after %d yields and %d requests", err, n, len(f.requests()))
	}
}
