package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type paddleFakeEvent struct {
	ID, Type string
	At       time.Time
}

// fakePaddle serves GET /events as Paddle documents it: Bearer API key,
// per_page (max 200), event_type (comma-separated), after (an event id),
// {"data":[...],"meta":{"request_id","pagination":{"per_page","next","has_more","estimated_total"}}};
// errors as {"error":{"type","code","detail"},"meta":{...}}. The list runs
// newest first unless asc.
type fakePaddle struct {
	key  string
	hist []paddleFakeEvent // in list order
	fl   fault

	mu   sync.Mutex
	n    int
	reqs []string
}

func newFakePaddle(t *testing.T, hist []paddleFakeEvent, asc bool) (*fakePaddle, *httptest.Server) {
	f := &fakePaddle{key: "pdl_live_fake", hist: slices.Clone(hist)}
	slices.SortStableFunc(f.hist, func(a, b paddleFakeEvent) int {
		if asc {
			return a.At.Compare(b.At)
		}
		return b.At.Compare(a.At)
	})
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func paddleError(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"type":"request_error","code":%q,"detail":%q,"documentation_url":"https://developer.paddle.com/errors"},"meta":{"request_id":"r1"}}`, code, detail)
}

func (f *fakePaddle) setFault(fl fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fl = fl
}

func (f *fakePaddle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.n++
	n, fl := f.n, f.fl
	f.reqs = append(f.reqs, r.URL.RawQuery)
	f.mu.Unlock()
	if fl != nil && fl(n, w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		paddleError(w, 403, "forbidden", "You aren't permitted to perform this request.")
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/events" {
		paddleError(w, 404, "not_found", "Entity not found")
		return
	}
	q := r.URL.Query()
	per := 50
	if v := q.Get("per_page"); v != "" {
		per, _ = strconv.Atoi(v)
		per = min(max(per, 1), 200)
	}
	types := map[string]bool{}
	if v := q.Get("event_type"); v != "" {
		for _, t := range strings.Split(v, ",") {
			types[t] = true
		}
	}
	after := q.Get("after")
	started := after == ""
	data := []map[string]any{}
	more := false
	for _, e := range f.hist {
		if !started {
			started = e.ID == after
			continue
		}
		if len(types) > 0 && !types[e.Type] {
			continue
		}
		if len(data) == per {
			more = true
			break
		}
		data = append(data, map[string]any{"event_id": e.ID, "event_type": e.Type, "occurred_at": e.At.Format(time.RFC3339Nano),
			"data": map[string]any{"id": "txn_" + e.ID}})
	}
	pag := map[string]any{"per_page": per, "has_more": more, "estimated_total": len(f.hist)}
	if len(data) > 0 {
		nq := q
		nq.Set("after", data[len(data)-1]["event_id"].(string))
		pag["next"] = "http://" + r.Host + "/events?" + nq.Encode()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"data": data, "meta": map[string]any{"request_id": "r1", "pagination": pag}})
}

func paddleHistory(n int) []paddleFakeEvent {
	var out []paddleFakeEvent
	for i := range n {
		out = append(out, paddleFakeEvent{ID: fmt.Sprintf("evt_%04d", i), Type: "transaction.completed",
			At: testNow.Add(-time.Hour - time.Duration(i)*time.Minute)})
	}
	return out
}

func paddleCollect(t *testing.T, got *[]string) func(Event) error {
	seen := map[string]bool{}
	return func(e Event) error {
		if seen[e.ID] {
			t.Errorf("event %s yielded twice", e.ID)
		}
		seen[e.ID] = true
		var v map[string]any
		if err := json.Unmarshal(e.Body, &v); err != nil || v["event_id"] != e.ID {
			t.Errorf("event %s: body %q is not its own JSON (%v)", e.ID, e.Body, err)
		}
		*got = append(*got, e.ID)
		return nil
	}
}

func mustPaddle(t *testing.T, cfg PaddleConfig) *Paddle {
	t.Helper()
	p, err := NewPaddle(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPaddleListsWindowOnce(t *testing.T) {
	hist := paddleHistory(1000)
	for _, asc := range []bool{false, true} {
		t.Run(fmt.Sprintf("asc=%v", asc), func(t *testing.T) {
			f, srv := newFakePaddle(t, hist, asc)
			p := mustPaddle(t, PaddleConfig{Options: testOptions(srv.URL, f.key)})
			from, to := hist[449].At, hist[250].At
			var got []string
			rep, err := p.List(context.Background(), from, to, paddleCollect(t, &got))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{}
			for _, e := range hist[250:450] {
				want[e.ID] = true
			}
			if len(got) != len(want) || rep.Listed != len(want) {
				t.Fatalf("got %d, listed %d, want %d", len(got), rep.Listed, len(want))
			}
			for _, id := range got {
				if !want[id] {
					t.Errorf("%s is outside the window", id)
				}
			}
			// Newest first: pages 1-3 reach past the window's start (event 449 is on page 3).
			// Oldest first: events 999..450 fill pages 1-3, page 4 goes past the window's end.
			wantPages := 3
			if asc {
				wantPages = 4
			}
			if rep.Pages != wantPages {
				t.Errorf("%d pages, want %d: the walk must stop once past the window", rep.Pages, wantPages)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if !strings.Contains(f.reqs[0], "per_page=200") || !strings.Contains(f.reqs[1], "after=") {
				t.Errorf("queries %q", f.reqs[:2])
			}
		})
	}
}

func TestPaddleTypesBeyondHistoryAndKey(t *testing.T) {
	hist := paddleHistory(10)
	hist[3].Type = "subscription.created"
	f, srv := newFakePaddle(t, hist, false)
	p := mustPaddle(t, PaddleConfig{Options: testOptions(srv.URL, f.key), Types: []string{"transaction.completed", "transaction.paid"}})
	from := testNow.Add(-100 * 24 * time.Hour)
	var got []string
	rep, err := p.List(context.Background(), from, testNow, paddleCollect(t, &got))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 9 || rep.BeyondHistory == nil || !rep.BeyondHistory.To.Equal(testNow.Add(-PaddleHistory)) {
		t.Errorf("got %d, report %+v", len(got), rep)
	}
	if !strings.Contains(f.reqs[0], "event_type=transaction.completed%2Ctransaction.paid") {
		t.Errorf("query %q lacks event_type", f.reqs[0])
	}

	p = mustPaddle(t, PaddleConfig{Options: testOptions(srv.URL, "pdl_wrong")})
	if _, err := p.List(context.Background(), testNow.Add(-time.Hour*24), testNow, paddleCollect(t, &got)); !errors.Is(err, ErrKeyRefused) {
		t.Errorf("wrong key: err %v", err)
	}
}

func TestPaddleMalformedAndRetried(t *testing.T) {
	f, srv := newFakePaddle(t, paddleHistory(500), false)
	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		switch n {
		case 2:
			w.Header().Set("Retry-After", "0")
			paddleError(w, 429, "too_many_requests", "slow down")
			return true
		case 3:
			paddleError(w, 500, "internal_error", "oops")
			return true
		case 5:
			fmt.Fprintf(w, `{"data":[{"event_id":"evt_new","event_type":"a","occurred_at":%q},{"event_id":"evt_bad","event_type":"a"}],"meta":{"pagination":{"has_more":false}}}`,
				testNow.Add(-2*time.Hour).Format(time.RFC3339))
			return true
		}
		return false
	})
	p := mustPaddle(t, PaddleConfig{Options: testOptions(srv.URL, f.key)})
	var got []string
	rep, err := p.List(context.Background(), testNow.Add(-24*time.Hour), testNow, paddleCollect(t, &got))
	var pe *PageError
	if !errors.Is(err, ErrMalformedPage) || !errors.As(err, &pe) || pe.Page != 3 || pe.Cursor != got[len(got)-1] {
		t.Fatalf("err %v, want malformed page 3 after %q", err, got[len(got)-1])
	}
	if len(got) != 400 || rep.Pages != 2 || slices.Contains(got, "evt_new") {
		t.Errorf("yielded %d over %d pages; want pages 1-2 only", len(got), rep.Pages)
	}
}

// The page bound stops every walker, not only Stripe's.
func TestPageBoundStopsPaddleAndGitHub(t *testing.T) {
	f, srv := newFakePaddle(t, paddleHistory(500), false)
	o := testOptions(srv.URL, f.key)
	o.MaxPages = 2
	p := mustPaddle(t, PaddleConfig{Options: o})
	var got []string
	rep, err := p.List(context.Background(), testNow.Add(-24*time.Hour), testNow, paddleCollect(t, &got))
	if !errors.Is(err, ErrPageBound) || rep.Pages != 2 || len(got) != 400 {
		t.Errorf("paddle: err %v, report %+v, %d yielded", err, rep, len(got))
	}

	gf, gsrv := newFakeGitHub(t, "repos/a/b/hooks/1", ghHistory(300))
	o = testOptions(gsrv.URL, gf.token)
	o.MaxPages = 2
	g := mustGitHub(t, GitHubConfig{Options: o, Hook: "repos/a/b/hooks/1"})
	rep, err = g.Redeliver(context.Background(), testNow.Add(-24*time.Hour), testNow, func(string) (bool, error) { return true, nil })
	if !errors.Is(err, ErrPageBound) || rep.Pages != 2 {
		t.Errorf("github: err %v, report %+v", err, rep)
	}
}
