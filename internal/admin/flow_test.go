package admin

import (
	"context"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestAPIPauseResume: pause and resume through the API on a real store:
// idempotent, 200 with the destination's state, 404 for an unknown one,
// the replay route's cross-site guards, one audit entry per call, and the
// state in GET /api/destinations with the configured rate.
func TestAPIPauseResume(t *testing.T) {
	f := setupAPI(t)
	var list page[hookwarden.DestinationState]
	if code := f.call("GET", "/api/destinations", testToken, "", &list); code != 200 || len(list.Items) != 1 {
		t.Fatalf("GET /api/destinations: %d %+v", code, list)
	}
	if d := list.Items[0]; d.Destination != "std/app" || d.Paused || d.Pause != nil || d.Pending != 4 || d.InFlight != 0 ||
		d.Rate == nil || *d.Rate != "20/s" || d.BlockedKeys == nil {
		t.Fatalf("destination before a pause: %+v", d)
	}
	if code := f.call("GET", "/api/destinations", "", "", nil); code != 401 {
		t.Fatalf("without the token: %d, want 401", code)
	}
	if code := f.call("POST", "/api/destinations/std/app/pause", testToken, `{}`, nil, "Sec-Fetch-Site", "cross-site"); code != 403 {
		t.Fatalf("cross-site pause: %d, want 403", code)
	}
	if code := f.call("POST", "/api/destinations/std/app/pause", testToken, `{}`, nil, "Content-Type", "text/plain"); code != 415 {
		t.Fatalf("pause without JSON: %d, want 415", code)
	}
	if code := f.call("POST", "/api/destinations/std/nope/pause", testToken, `{}`, nil); code != 404 {
		t.Fatalf("pause of an unknown destination: %d, want 404", code)
	}
	for range 2 {
		var st hookwarden.DestinationState
		if code := f.call("POST", "/api/destinations/std/app/pause", testToken, `{}`, &st); code != 200 ||
			!st.Paused || st.Pause == nil || *st.Pause != hookwarden.PauseManual || st.Destination != "std/app" {
			t.Fatalf("pause: %d %+v", code, st)
		}
	}
	if jobs, err := f.store.Lease(context.Background(), "std/app", 10, time.Minute); err != nil || len(jobs) != 0 {
		t.Fatalf("paused through the API, a lease took %d (%v)", len(jobs), err)
	}
	var st hookwarden.DestinationState
	if code := f.call("POST", "/api/destinations/std/app/resume", testToken, `{}`, &st); code != 200 || st.Paused || st.Pause != nil {
		t.Fatalf("resume: %d %+v", code, st)
	}
	var n int
	if err := f.store.DB().QueryRow(`SELECT count(*) FROM audit WHERE origin = 'api' AND action IN ('pause', 'resume')
		AND args = '{"destination":"std/app"}'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("audit entries: %d (%v), want 3 (two pauses, one resume)", n, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.notified) != 1 || f.notified[0] != "std/app" {
		t.Fatalf("notified %v, want the resumed destination", f.notified)
	}
}
