package admin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/admin"
)

// fakeDashStore is a DashboardStore made of function fields; nil ones
// answer empty.
type fakeDashStore struct {
	outbox func(ctx context.Context, dests []string) ([]hookwarden.OutboxStat, error)
	dead   func(ctx context.Context, f hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error)
	events func(ctx context.Context, f hookwarden.EventFilter) ([]hookwarden.EventSummary, int64, error)
	hourly func(sources []string, since time.Time) map[string][]hookwarden.HourCount
	gaps   func(ctx context.Context, opt hookwarden.GapOptions) (hookwarden.GapReport, error)
	replay func(ctx context.Context, sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) (hookwarden.ReplayResult, error)
}

var _ admin.DashboardStore = (*fakeDashStore)(nil)

func (f *fakeDashStore) OutboxStats(ctx context.Context, dests []string) ([]hookwarden.OutboxStat, error) {
	if f.outbox == nil {
		return nil, nil
	}
	return f.outbox(ctx, dests)
}

func (f *fakeDashStore) LastAccepted(context.Context, []string) (map[string]time.Time, error) {
	return map[string]time.Time{}, nil
}

func (f *fakeDashStore) Hourly(_ context.Context, sources []string, since time.Time) (map[string][]hookwarden.HourCount, error) {
	if f.hourly == nil {
		return map[string][]hookwarden.HourCount{}, nil
	}
	return f.hourly(sources, since), nil
}

func (f *fakeDashStore) RecentCounts(context.Context, []string, time.Time, time.Time) (map[string][2]hookwarden.WindowCounts, error) {
	return map[string][2]hookwarden.WindowCounts{"stripe": {{Accepted: 7, Duplicates: 2}, {Accepted: 70, Duplicates: 20}}}, nil
}

func (f *fakeDashStore) ListDead(ctx context.Context, fl hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error) {
	if f.dead == nil {
		return nil, 0, nil
	}
	return f.dead(ctx, fl)
}

func (f *fakeDashStore) ListEvents(ctx context.Context, fl hookwarden.EventFilter) ([]hookwarden.EventSummary, int64, error) {
	if f.events == nil {
		return nil, 0, nil
	}
	return f.events(ctx, fl)
}

func (f *fakeDashStore) Gaps(ctx context.Context, opt hookwarden.GapOptions) (hookwarden.GapReport, error) {
	if f.gaps == nil {
		return hookwarden.GapReport{}, nil
	}
	return f.gaps(ctx, opt)
}

func (f *fakeDashStore) BackfillRuns(context.Context, []string, time.Time) ([]hookwarden.BackfillRun, error) {
	return nil, nil
}

func (f *fakeDashStore) Replay(ctx context.Context, sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) (hookwarden.ReplayResult, error) {
	if f.replay == nil {
		return hookwarden.ReplayResult{}, errors.New("no replay")
	}
	return f.replay(ctx, sel, opt)
}

type dashFixture struct {
	t        *testing.T
	store    *fakeDashStore
	srv      *httptest.Server
	backfill func(source string, from, to time.Time, audit *hookwarden.AuditEntry) (int64, error)
}

// setupDashboard serves the admin handler with the dashboard mounted as
// cmd/hookwarden mounts it, on a fake store.
func setupDashboard(t *testing.T, token string) *dashFixture {
	t.Helper()
	f := &dashFixture{t: t, store: &fakeDashStore{}}
	log := slog.New(slog.DiscardHandler)
	adm := admin.New(admin.Options{Token: token, Logger: log})
	d, err := admin.NewDashboard(admin.DashboardOptions{
		Store: f.store,
		Sources: func() []admin.DashboardSource {
			return []admin.DashboardSource{{Name: "stripe", ExpectWithin: time.Hour, RetryHorizon: 72 * time.Hour,
				RetentionMargin: -24 * time.Hour, Backfill: hookwarden.BackfillPolicy{Method: "list", History: 30 * 24 * time.Hour}}}
		},
		Backfill: func(_ context.Context, source string, from, to time.Time, audit *hookwarden.AuditEntry) (int64, error) {
			if f.backfill == nil {
				return 0, errors.New("no backfill")
			}
			return f.backfill(source, from, to, audit)
		},
		Destinations:  func() []string { return []string{"stripe/app"} },
		Refused:       func(string, time.Duration) (int, int) { return 3, 1 },
		CountingSince: time.Now().Add(-2 * time.Hour),
		Authorized:    adm.Authorized,
		TokenSet:      token != "",
		Sessions:      adm,
		Logger:        log,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.Register(adm.Router())
	f.srv = httptest.NewServer(d.Front(adm))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *dashFixture) get(path string) (int, string) {
	f.t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var formTokenRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// post submits a same-origin form and returns the status and the redirect.
func (f *dashFixture) post(path string, form url.Values) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

func (f *dashFixture) formToken() string {
	f.t.Helper()
	_, page := f.get("/")
	m := formTokenRE.FindStringSubmatch(page)
	if m == nil {
		f.t.Fatalf("no form token in:\n%s", page)
	}
	return m[1]
}

func TestDashboardRendersEverySection(t *testing.T) {
	f := setupDashboard(t, "")
	now := time.Now()
	f.store.outbox = func(context.Context, []string) ([]hookwarden.OutboxStat, error) {
		return []hookwarden.OutboxStat{{Destination: "stripe/app", Pending: 12, OldestPendingAge: 45 * time.Minute, Dead: 2}}, nil
	}
	f.store.dead = func(_ context.Context, fl hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error) {
		if fl.Limit <= 0 || fl.Limit > 100 {
			t.Errorf("dead letters asked with limit %d: want a bounded page", fl.Limit)
		}
		return []hookwarden.DeadLetter{
			{JobID: 41, Source: "stripe", EventID: `evt_<script>alert(1)</script>`, Destination: "stripe/app",
				Attempts: 1, DeadCount: 1, LastError: "HTTP 422 Unprocessable Entity", DeadAt: now.Add(-time.Minute)},
			{JobID: 42, Source: "stripe", EventID: "evt_thrice", Destination: "stripe/app",
				Attempts: 12, DeadCount: 3, LastError: "giving up after 12 attempts", DeadAt: now},
		}, 7, nil
	}
	f.store.events = func(_ context.Context, fl hookwarden.EventFilter) ([]hookwarden.EventSummary, int64, error) {
		if fl.Status != hookwarden.StatusQuarantined {
			t.Errorf("events asked with status %q, want quarantined", fl.Status)
		}
		return []hookwarden.EventSummary{{Source: "stripe", Receipt: 9, Reason: "no event id found", Count: 4, LastAt: now}}, 0, nil
	}
	f.store.gaps = func(context.Context, hookwarden.GapOptions) (hookwarden.GapReport, error) {
		return hookwarden.GapReport{Outages: []hookwarden.Outage{{Start: now.Add(-5 * 24 * time.Hour), End: now.Add(-4 * 24 * time.Hour),
			Length: 24 * time.Hour, Crash: true, BeyondRetryHorizon: []string{"github"}}}}, nil
	}
	code, page := f.get("/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d", code)
	}
	for _, want := range []string{
		"(2 dead) Hookwarden",                       // the title counts dead letters
		"evt_&lt;script&gt;alert(1)&lt;/script&gt;", // provider data is escaped
		`name="job" value="41"`, ">Replay</button>", // one button per dead letter
		`name="force" value="1"`, "Replay anyway", // three strikes: the forced button
		"Replay all for stripe/app</button> <small>except those refused too often", // the bulk button (more than shown)
		"The newest 2 are shown",                              // more than one page
		`<td class="n">12</td>`, `<td class="n bad">45m</td>`, // outbox depth, stale age
		`<td class="n">7</td><td class="n">2</td><td class="n">3</td>`,   // last hour
		`<td class="n">70</td><td class="n">20</td><td class="n">3</td>`, // last day
		"1 request(s) answered 503", "below zero", "silent too long",     // source warnings
		"no event id found", "after a crash", "retry horizon of github", // quarantine, outage
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Error("unescaped provider data in the page")
	}
}

func TestDashboardShowsWhatItCouldNotRead(t *testing.T) {
	f := setupDashboard(t, "")
	f.store.dead = func(context.Context, hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error) {
		return nil, 0, errors.New("database is locked")
	}
	code, page := f.get("/")
	if code != http.StatusOK || !strings.Contains(page, "Could not read: dead letters") {
		t.Fatalf("a failed section: %d, want 200 and the failure named", code)
	}
	if strings.Contains(page, "database is locked") {
		t.Error("an internal error reached the page")
	}
}

func TestDashboardReplayGoesThroughStoreReplay(t *testing.T) {
	f := setupDashboard(t, "")
	var got []hookwarden.ReplaySelector
	var forced []bool
	f.store.replay = func(_ context.Context, sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) (hookwarden.ReplayResult, error) {
		got, forced = append(got, sel), append(forced, opt.Force)
		if len(sel.JobIDs) == 1 && sel.JobIDs[0] == 42 && !opt.Force {
			return hookwarden.ReplayResult{Selected: 1, Skipped: []hookwarden.ReplaySkip{{JobID: 42, Reason: hookwarden.SkipNeedsForce}}}, nil
		}
		return hookwarden.ReplayResult{Selected: 1, Replayed: 1, Destinations: []string{"stripe/app"}}, nil
	}
	f.store.dead = func(context.Context, hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error) {
		return []hookwarden.DeadLetter{{JobID: 41, Source: "stripe", EventID: "evt_1", Destination: "stripe/app", DeadCount: 1}}, 0, nil
	}
	tok := f.formToken()
	for _, c := range []struct {
		form url.Values
		loc  string
	}{
		{url.Values{"job": {"41"}}, "/?replayed=1"},
		{url.Values{"job": {"42"}}, "/?reason=needs_force&replayed=0&skipped=1"},
		{url.Values{"job": {"42"}, "force": {"1"}}, "/?replayed=1"},
		{url.Values{"all": {"1"}, "destination": {"stripe/app"}}, "/?replayed=1"},
	} {
		c.form.Set("csrf", tok)
		if code, loc := f.post("/dashboard/replay", c.form); code != http.StatusSeeOther || loc != c.loc {
			t.Errorf("replay %v: %d %q, want 303 %q", c.form, code, loc, c.loc)
		}
	}
	want := []hookwarden.ReplaySelector{{JobIDs: []int64{41}}, {JobIDs: []int64{42}}, {JobIDs: []int64{42}},
		{Dead: true, Destination: "stripe/app"}}
	if len(got) != len(want) {
		t.Fatalf("replays: %+v", got)
	}
	for i := range want {
		if got[i].Dead != want[i].Dead || got[i].Destination != want[i].Destination ||
			len(got[i].JobIDs) != len(want[i].JobIDs) || (len(want[i].JobIDs) == 1 && got[i].JobIDs[0] != want[i].JobIDs[0]) {
			t.Errorf("replay %d selected %+v, want %+v", i, got[i], want[i])
		}
	}
	if forced[1] || !forced[2] {
		t.Errorf("force = %v: only the explicit Replay anyway may force", forced)
	}
	_, page := f.get("/?reason=needs_force&replayed=0&skipped=1")
	if !strings.Contains(page, "1 not replayed: dead-lettered 3 times or more") {
		t.Error("the skip reason is not explained")
	}
	if _, page = f.get("/?replayed=1&reason=%3Cb%3Einjected"); strings.Contains(page, "injected") {
		t.Error("text from the URL is shown on the page")
	}
	if code, _ := f.post("/dashboard/replay", url.Values{"csrf": {tok}, "job": {"x"}}); code != http.StatusBadRequest {
		t.Errorf("bad job id: %d, want 400", code)
	}
}

func TestDashboardWithTokenNeedsLogin(t *testing.T) {
	f := setupDashboard(t, "s3cr3t-token")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(f.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("GET / without token: %d %q, want 303 /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, _ := f.post("/dashboard/replay", url.Values{"job": {"1"}}); code != http.StatusUnauthorized {
		t.Errorf("replay without token: %d, want 401", code)
	}
	if code, css := f.get("/dashboard.css"); code != http.StatusOK || !strings.Contains(css, "body") {
		t.Errorf("stylesheet without token: %d", code)
	}
	if code, page := f.get("/login"); code != http.StatusOK || !strings.Contains(page, `type="password"`) {
		t.Errorf("login form: %d", code)
	}
}

func TestDashboardDuration(t *testing.T) {
	// Through the page: the retention margin of -24h is printed as "-1d".
	f := setupDashboard(t, "")
	_, page := f.get("/")
	if !strings.Contains(page, "claims retention margin -1d") {
		t.Error(`negative margin not printed as "-1d"`)
	}
	// The margin is explained where it is shown.
	if !strings.Contains(page, "How much longer event ids are remembered") {
		t.Error("the claims retention margin has no explanation on the page")
	}
}

// The flow half of the fake: nothing paused, nothing to pause.
func (f *fakeDashStore) Destinations(_ context.Context, names []string) ([]hookwarden.DestinationState, error) {
	out := make([]hookwarden.DestinationState, len(names))
	for i, n := range names {
		out[i] = hookwarden.DestinationState{Destination: n, BlockedKeys: []hookwarden.BlockedKey{}}
	}
	return out, nil
}

func (f *fakeDashStore) Pause(context.Context, string, *hookwarden.AuditEntry) (bool, error) {
	return false, errors.New("no pause")
}

func (f *fakeDashStore) Resume(context.Context, string, *hookwarden.AuditEntry) (bool, error) {
	return false, errors.New("no resume")
}

// TestDashboardBackfillButton: a recoverable window gets a Backfill button
// carrying the window; its POST needs the form token and starts the run
// through the same function as POST /api/backfill; a run going on is said.
func TestDashboardBackfillButton(t *testing.T) {
	f := setupDashboard(t, "")
	start, end := time.Now().Add(-3*time.Hour).UTC(), time.Now().Add(-2*time.Hour).UTC()
	f.store.gaps = func(context.Context, hookwarden.GapOptions) (hookwarden.GapReport, error) {
		return hookwarden.GapReport{Now: time.Now(), Outages: []hookwarden.Outage{{Kind: "outage", Start: start, End: end, Length: time.Hour}}}, nil
	}
	_, page := f.get("/")
	for _, want := range []string{`action="/dashboard/backfill"`, `name="source" value="stripe"`,
		`name="from" value="` + start.Format(time.RFC3339Nano) + `"`, "stripe: recoverable", ">Backfill</button>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	var got []string
	f.backfill = func(source string, from, to time.Time, audit *hookwarden.AuditEntry) (int64, error) {
		got = append(got, fmt.Sprintf("%s %s %s %s", source, from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano), audit.Origin))
		if len(got) > 1 {
			return 0, hookwarden.ErrBackfillRunning
		}
		return 7, nil
	}
	form := url.Values{"source": {"stripe"}, "from": {start.Format(time.RFC3339Nano)}, "to": {end.Format(time.RFC3339Nano)}}
	if code, _ := f.post("/dashboard/backfill", form); code != http.StatusForbidden {
		t.Errorf("without the form token: %d, want 403", code)
	}
	form.Set("csrf", f.formToken())
	if code, loc := f.post("/dashboard/backfill", form); code != http.StatusSeeOther || loc != "/?backfill=7#gaps" {
		t.Errorf("backfill: %d %q, want 303 to /?backfill=7#gaps", code, loc)
	}
	if code, loc := f.post("/dashboard/backfill", form); code != http.StatusSeeOther || loc != "/?error=backfill_running#gaps" {
		t.Errorf("while one runs: %d %q", code, loc)
	}
	want := fmt.Sprintf("stripe %s %s dashboard", start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	if len(got) != 2 || got[0] != want {
		t.Errorf("backfills started %q, want %q", got, want)
	}
	if _, page := f.get("/?backfill=7"); !strings.Contains(page, "Backfill run 7 started") {
		t.Error("no word of the started run")
	}
}

// TestDashboardChart: each source gets an inline SVG of its last 7 days,
// drawn on the server: a bar per hour with traffic (accepted, and
// duplicates beside it), the outage windows and the source's silences
// shaded, hours outside the span left out, and no script; the page's
// Content-Security-Policy is the one without script.
func TestDashboardChart(t *testing.T) {
	f := setupDashboard(t, "")
	now := time.Now().UTC()
	this := now.Truncate(time.Hour)
	var asked time.Time
	f.store.hourly = func(sources []string, since time.Time) map[string][]hookwarden.HourCount {
		asked = since
		return map[string][]hookwarden.HourCount{"stripe": {
			{Hour: this.Add(-9 * 24 * time.Hour), Accepted: 1000}, // outside the span: not drawn
			{Hour: this.Add(-30 * time.Hour), Accepted: 40, Duplicates: 4},
			{Hour: this.Add(-2 * time.Hour), Accepted: 3},
			{Hour: this, Accepted: 10, Duplicates: 1},
		}}
	}
	f.store.gaps = func(context.Context, hookwarden.GapOptions) (hookwarden.GapReport, error) {
		return hookwarden.GapReport{
			Outages: []hookwarden.Outage{{Kind: "outage", Start: now.Add(-20 * time.Hour), End: now.Add(-18 * time.Hour), Length: 2 * time.Hour, Crash: true}},
			Silences: []hookwarden.Silence{
				{Source: "stripe", Start: now.Add(-10 * time.Hour), End: now.Add(-5 * time.Hour), Length: 5 * time.Hour},
				{Source: "github", Start: now.Add(-10 * time.Hour), Length: 10 * time.Hour, Open: true}, // another source's
			}}, nil
	}
	resp, err := http.Get(f.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script") {
		t.Errorf("Content-Security-Policy %q, want the one without script", csp)
	}
	if d := now.Sub(asked); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour+time.Minute {
		t.Errorf("hourly asked since %v before now, want 7 days", d)
	}
	for _, want := range []string{
		`<svg class="chart" viewBox="0 0 336 62"`,
		`class="acc"`, `class="dup"`,
		": 40 accepted</title>", ": 4 duplicates</title>", ": 10 accepted</title>",
		`<rect class="outage"`, "Hookwarden down",
		`<rect class="silence"`, "stripe silent",
		"53 accepted, 5 duplicates; 2 outage or silence window(s) shaded",
		"the tallest bar is 40 an hour", // the scale names both series' maximum
		`<span class="key outage recovered"></span>outage, recovered`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	chart := page[strings.Index(page, "<svg"):strings.Index(page, "</svg>")]
	for _, bad := range []string{"1000 accepted", "github silent", "<script"} {
		if strings.Contains(chart, bad) {
			t.Errorf("the chart has %q", bad)
		}
	}
	if n := strings.Count(page, `class="acc"`); n != 3 {
		t.Errorf("%d accepted bars, want 3 (one per hour with traffic in the span)", n)
	}
}

// The bulk button offers only what it would replay: a dead letter dead
// ForceAfter times is skipped by it, so with only such ones there is none.
func TestDashboardBulkReplayCountsWhatItReplays(t *testing.T) {
	f := setupDashboard(t, "")
	now := time.Now()
	dead := []hookwarden.DeadLetter{{JobID: 42, Source: "stripe", EventID: "evt_thrice", Destination: "stripe/app",
		Attempts: 12, DeadCount: 3, DeadAt: now}}
	f.store.outbox = func(context.Context, []string) ([]hookwarden.OutboxStat, error) {
		return []hookwarden.OutboxStat{{Destination: "stripe/app", Dead: len(dead)}}, nil
	}
	f.store.dead = func(context.Context, hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error) {
		return dead, 0, nil
	}
	_, page := f.get("/")
	if strings.Contains(page, `name="all" value="1"`) || !strings.Contains(page, "each refused too often for a bulk replay") {
		t.Errorf("one dead letter needing --force: the page offers a bulk replay:\n%s", page)
	}
	dead = append(dead, hookwarden.DeadLetter{JobID: 43, Source: "stripe", EventID: "evt_once", Destination: "stripe/app",
		Attempts: 1, DeadCount: 1, DeadAt: now})
	if _, page = f.get("/"); !strings.Contains(page, "Replay 1 of 2 for stripe/app") {
		t.Errorf("one of two needs --force: want \"Replay 1 of 2\":\n%s", page)
	}
}
