package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

type ghFakeDelivery struct {
	ID          int64
	GUID        string
	DeliveredAt time.Time
	Redelivery  bool
}

// fakeGitHub serves a hook's deliveries as GitHub documents them:
// GET {hook}/deliveries?per_page=N(&cursor=C), newest first, the next page's
// cursor in a Link header (rel="next"); POST {hook}/deliveries/{id}/attempts
// answers 202, or 422 for a delivery older than 3 days. Bearer token,
// Accept: application/vnd.github+json, X-GitHub-Api-Version checked; errors
// as {"message","documentation_url"}.
type fakeGitHub struct {
	t     *testing.T
	token string
	hook  string
	hist  []ghFakeDelivery // newest first
	fault fault

	mu        sync.Mutex
	n         int
	gets      int
	redeliver []int64
	refuse    map[int64]bool
}

func newFakeGitHub(t *testing.T, hook string, hist []ghFakeDelivery) (*fakeGitHub, *httptest.Server) {
	f := &fakeGitHub{t: t, token: "ghp_fake", hook: hook, hist: hist, refuse: map[int64]bool{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func ghError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, msg)
}

func (f *fakeGitHub) setFault(fl fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fl
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.n++
	n, flt := f.n, f.fault
	f.mu.Unlock()
	if flt != nil && flt(n, w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		ghError(w, 401, "Bad credentials")
		return
	}
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
		ghError(w, 400, "want the documented Accept and X-GitHub-Api-Version")
		return
	}
	base := "/" + f.hook + "/deliveries"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == base:
		f.list(w, r)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, base+"/") && strings.HasSuffix(r.URL.Path, "/attempts"):
		id, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, base+"/"), "/attempts"), 10, 64)
		var d *ghFakeDelivery
		for i := range f.hist {
			if f.hist[i].ID == id {
				d = &f.hist[i]
			}
		}
		f.mu.Lock()
		refused := f.refuse[id]
		f.mu.Unlock()
		switch {
		case err != nil || d == nil:
			ghError(w, 404, "Not Found")
		case refused || d.DeliveredAt.Before(testNow.Add(-GitHubHistory)):
			ghError(w, 422, "Validation Failed")
		default:
			f.mu.Lock()
			f.redeliver = append(f.redeliver, id)
			f.mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte("{}"))
		}
	default:
		ghError(w, 404, "Not Found")
	}
}

func (f *fakeGitHub) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.gets++
	f.mu.Unlock()
	q := r.URL.Query()
	per := 30
	if v := q.Get("per_page"); v != "" {
		per, _ = strconv.Atoi(v)
		per = min(max(per, 1), 100)
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		start, _ = strconv.Atoi(strings.TrimPrefix(c, "v1_"))
	}
	end := min(start+per, len(f.hist))
	out := []map[string]any{}
	for _, d := range f.hist[start:end] {
		out = append(out, map[string]any{"id": d.ID, "guid": d.GUID, "delivered_at": d.DeliveredAt.Format(time.RFC3339),
			"redelivery": d.Redelivery, "duration": 0.1, "status": "OK", "status_code": 200, "event": "push", "action": nil,
			"installation_id": nil, "repository_id": 1})
	}
	if end < len(f.hist) {
		next := fmt.Sprintf("http://%s%s?per_page=%d&cursor=v1_%d", r.Host, r.URL.Path, per, end)
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <http://%s%s?per_page=%d>; rel="first"`, next, r.Host, r.URL.Path, per))
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(out)
}

// ghHistory is n deliveries one minute apart, the newest at testNow-1h; every
// tenth is a redelivery of the one before it (same guid).
func ghHistory(n int) []ghFakeDelivery {
	var out []ghFakeDelivery
	for i := range n {
		g := fmt.Sprintf("guid-%04d", i)
		if i%10 == 9 {
			g = fmt.Sprintf("guid-%04d", i+1)
		}
		out = append(out, ghFakeDelivery{ID: int64(1000 + i), GUID: g, DeliveredAt: testNow.Add(-time.Hour - time.Duration(i)*time.Minute), Redelivery: i%10 == 9})
	}
	return out
}

func mustGitHub(t *testing.T, cfg GitHubConfig) *GitHub {
	t.Helper()
	g, err := NewGitHub(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGitHubRedeliversUnclaimedOfWindow(t *testing.T) {
	for _, hook := range []string{"repos/acme/shop/hooks/42", "orgs/acme/hooks/7"} {
		t.Run(hook, func(t *testing.T) {
			hist := ghHistory(500)
			f, srv := newFakeGitHub(t, hook, hist)
			g := mustGitHub(t, GitHubConfig{Options: testOptions(srv.URL, f.token), Hook: hook})
			from, to := hist[259].DeliveredAt, hist[30].DeliveredAt // inclusive
			claimedGUIDs := map[string]bool{}
			for i := 30; i < 260; i += 4 {
				claimedGUIDs[hist[i].GUID] = true
			}
			asked := map[string]int{}
			rep, err := g.Redeliver(context.Background(), from, to, func(id string) (bool, error) {
				asked[id]++
				return claimedGUIDs[id], nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wantGUIDs := map[string]bool{}
			for _, d := range hist[30:260] {
				wantGUIDs[d.GUID] = true
			}
			for id, n := range asked {
				if n != 1 || !wantGUIDs[id] {
					t.Errorf("guid %s asked %d times (in window: %v)", id, n, wantGUIDs[id])
				}
			}
			if len(asked) != len(wantGUIDs) || rep.Listed != len(wantGUIDs) {
				t.Errorf("asked %d guids, listed %d; want %d", len(asked), rep.Listed, len(wantGUIDs))
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			byID := map[int64]string{}
			for _, d := range hist {
				byID[d.ID] = d.GUID
			}
			got := map[string]bool{}
			for _, id := range f.redeliver {
				gu := byID[id]
				if got[gu] || claimedGUIDs[gu] || !wantGUIDs[gu] {
					t.Errorf("redelivery of %s (delivery %d): twice %v, claimed %v, in window %v", gu, id, got[gu], claimedGUIDs[gu], wantGUIDs[gu])
				}
				got[gu] = true
			}
			want := len(wantGUIDs) - rep.AlreadyClaimed
			if len(f.redeliver) != want || rep.Requested != want || rep.AlreadyClaimed == 0 {
				t.Errorf("%d redeliveries, report %+v; want %d", len(f.redeliver), rep, want)
			}
			// Page 3 (deliveries 200..299) holds the window's start: the walk stops there.
			if f.gets != 3 || rep.Pages != 3 {
				t.Errorf("%d pages fetched (report %d), want 3: the walk must stop before the window", f.gets, rep.Pages)
			}
		})
	}
}

func TestGitHubBeyondRedeliveryHistory(t *testing.T) {
	f, srv := newFakeGitHub(t, "repos/a/b/hooks/1", ghHistory(20))
	g := mustGitHub(t, GitHubConfig{Options: testOptions(srv.URL, f.token), Hook: "repos/a/b/hooks/1"})
	from := testNow.Add(-5 * 24 * time.Hour)
	rep, err := g.Redeliver(context.Background(), from, testNow, func(string) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	if rep.BeyondHistory == nil || !rep.BeyondHistory.From.Equal(from) || !rep.BeyondHistory.To.Equal(testNow.Add(-GitHubHistory)) {
		t.Errorf("beyond history %+v", rep.BeyondHistory)
	}
	if rep.Requested != 19 { // 20 deliveries, one a redelivery of a guid already seen
		t.Errorf("report %+v, want 19 requested", rep)
	}
}

func TestGitHubRefusalsAndRetries(t *testing.T) {
	hist := ghHistory(150)
	f, srv := newFakeGitHub(t, "repos/a/b/hooks/1", hist)
	f.refuse[hist[0].ID] = true
	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		switch n {
		case 2: // secondary rate limit, as GitHub sends it
			w.Header().Set("Retry-After", "1")
			ghError(w, 403, "You have exceeded a secondary rate limit")
			return true
		case 3:
			ghError(w, 502, "Server Error")
			return true
		}
		return false
	})
	g := mustGitHub(t, GitHubConfig{Options: testOptions(srv.URL, f.token), Hook: "repos/a/b/hooks/1"})
	rep, err := g.Redeliver(context.Background(), testNow.Add(-24*time.Hour), testNow, func(string) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed != 1 || rep.FailedBy["redelivery_refused"] != 1 || rep.Requested != rep.Listed-1 || rep.Listed != 136 {
		t.Errorf("report %+v; want 136 listed, 1 refused, the rest requested", rep)
	}

	g = mustGitHub(t, GitHubConfig{Options: testOptions(srv.URL, "ghp_wrong"), Hook: "repos/a/b/hooks/1"})
	f.setFault(nil)
	_, err = g.Redeliver(context.Background(), testNow.Add(-24*time.Hour), testNow, func(string) (bool, error) { return false, nil })
	if !errors.Is(err, ErrKeyRefused) {
		t.Errorf("wrong token: err %v, want ErrKeyRefused", err)
	}
}

func TestGitHubMalformedPage(t *testing.T) {
	hist := ghHistory(150)
	f, srv := newFakeGitHub(t, "repos/a/b/hooks/1", hist)
	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && r.URL.Query().Get("cursor") != "" {
			fmt.Fprintf(w, `[{"id":5,"guid":"g","delivered_at":"%s"},{"id":6,"delivered_at":"%s"}]`,
				testNow.Add(-2*time.Hour).Format(time.RFC3339), testNow.Add(-2*time.Hour).Format(time.RFC3339))
			return true
		}
		return false
	})
	g := mustGitHub(t, GitHubConfig{Options: testOptions(srv.URL, f.token), Hook: "repos/a/b/hooks/1"})
	var asked []string
	_, err := g.Redeliver(context.Background(), testNow.Add(-24*time.Hour), testNow, func(id string) (bool, error) {
		asked = append(asked, id)
		return true, nil
	})
	var pe *PageError
	if !errors.Is(err, ErrMalformedPage) || !errors.As(err, &pe) || pe.Page != 2 || pe.Cursor != "v1_100" {
		t.Fatalf("err %v, want a malformed page 2 with cursor v1_100", err)
	}
	for _, id := range asked {
		if id == "g" {
			t.Errorf("a delivery of the malformed page was used")
		}
	}
}

func TestGitHubForeignNextLinkRefused(t *testing.T) {
	f, srv := newFakeGitHub(t, "repos/a/b/hooks/1", ghHistory(5))
	f.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet {
			return false
		}
		w.Header().Set("Link", `<https://evil.example/repos/a/b/hooks/1/deliveries?cursor=x>; rel="next"`)
		w.Write([]byte(`[]`))
		return true
	})
	g := mustGitHub(t, GitHubConfig{Options: testOptions(srv.URL, f.token), Hook: "repos/a/b/hooks/1"})
	_, err := g.Redeliver(context.Background(), testNow.Add(-24*time.Hour), testNow, func(string) (bool, error) { return false, nil })
	if !errors.Is(err, ErrInsecureBase) {
		t.Errorf("err %v, want ErrInsecureBase for a next link to another origin", err)
	}
}

func TestParseHook(t *testing.T) {
	for _, ok := range []string{"repos/o/r/hooks/1", "/orgs/o/hooks/99/"} {
		if _, err := parseHook(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "repos/o/r/hooks/x", "repos/o/hooks/1", "orgs/../hooks/1", "users/u/hooks/1", "repos/o/r/hooks/0", "orgs/o%2f/hooks/1"} {
		if _, err := parseHook(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
