package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/signature"
)

const (
	bfStripeSecret = "whsec_backfill_stripe_endpoint_secret"
	bfGitHubSecret = "gh-webhook-secret-for-backfill"
)

// bfSetup is a configuration for the backfill tests: sources is the YAML
// of the sources list, each delivering to dest.
type bfSetup struct {
	cfg, db, hook, adm string
}

func newBFSetup(t *testing.T, sources string) bfSetup { return newBFSetupAt(t, freeAddr(t), sources) }

// newBFSetupAt is newBFSetup with the receiver at hook.
func newBFSetupAt(t *testing.T, hook, sources string) bfSetup {
	t.Helper()
	dir := t.TempDir()
	s := bfSetup{cfg: filepath.Join(dir, "config.yaml"), db: filepath.Join(dir, "hw.db"), hook: hook, adm: freeAddr(t)}
	doc := fmt.Sprintf("listen: %q\nadmin: { listen: %q }\ndatabase: { path: %q }\nlog: { level: info }\nsources:\n%s",
		s.hook, s.adm, s.db, sources)
	if err := os.WriteFile(s.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// stripeSource is the YAML of a stripe source with backfill against api.
func stripeSource(name, key, api, dest, extra string) string {
	return fmt.Sprintf(`  - name: %s
    scheme: stripe
    secrets: [%q]
    backfill: { api_key: %q, api_base: %q%s }
    destinations:
      - { name: app, url: %q, concurrency: 2, backoff: { initial: 20ms, max: 200ms } }
`, name, bfStripeSecret, key, api, extra, dest)
}

// postStripe sends a live, signed Stripe webhook of e to source.
func postStripe(t *testing.T, hook, source string, e fakeStripeEvent) (answerT, error) {
	body := e.liveBody()
	h, err := signature.Sign(signature.Params{Scheme: "stripe", Secrets: []string{bfStripeSecret}}, body, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+hook+"/hooks/"+source, bytes.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answerT{}, err
	}
	defer resp.Body.Close()
	var a struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return answerT{Code: resp.StatusCode, Status: a.Status}, nil
}

func mustPostStripe(t *testing.T, hook, source string, e fakeStripeEvent, want string) {
	t.Helper()
	a, err := postStripe(t, hook, source, e)
	if err != nil || a.Code != 200 || a.Status != want {
		t.Fatalf("live %s: %+v %v; want 200 %s", e.ID, a, err, want)
	}
}

// backfillLines runs `backfill ... --json` and parses its lines.
func backfillLines(t *testing.T, args ...string) (int, []backfillLine, string) {
	t.Helper()
	code, out, errOut := runBin(t, append([]string{"backfill"}, append(args, "--json")...)...)
	var lines []backfillLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var bl backfillLine
		if err := json.Unmarshal([]byte(l), &bl); err != nil {
			t.Fatalf("backfill output %q: %v", l, err)
		}
		lines = append(lines, bl)
	}
	return code, lines, errOut
}

func intOf(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// keys counts the deliveries per Idempotency-Key.
func (s *sink) keys() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for _, r := range s.reqs {
		m[r.Header.Get("Idempotency-Key")]++
	}
	return m
}

// waitKeys waits until every key has arrived.
func (s *sink) waitKeys(t *testing.T, want []string) map[string]int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := s.keys()
		var missing []string
		for _, k := range want {
			if got[k] == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events never reached the app (%d keys arrived), e.g. %v", len(missing), len(want), len(got),
				missing[:min(5, len(missing))])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stripeHistory(prefix string, n int, newest time.Time) []fakeStripeEvent {
	var evs []fakeStripeEvent
	for i := 1; i <= n; i++ {
		evs = append(evs, fakeStripeEvent{ID: fmt.Sprintf("evt_%s%02d", prefix, i), Type: "invoice.paid",
			Created: newest.Add(-time.Duration(n-i) * time.Minute).Truncate(time.Second)})
	}
	return evs
}

func keysOf(source string, evs []fakeStripeEvent) []string {
	var ks []string
	for _, e := range evs {
		ks = append(ks, hookwarden.IdempotencyKey(source, e.ID))
	}
	return ks
}

// TestBackfillStripeThroughTheBinary: three of ten events arrived live; the
// real binary's backfill lists the ten over four pages, records exactly the
// seven missing with the API's bytes, the app gets each of the ten once
// with its Idempotency-Key; a second run recovers nothing; a late live copy
// of a recovered event is a plain duplicate.
func TestBackfillStripeThroughTheBinary(t *testing.T) {
	app := newSink(t)
	api := newFakeStripe(t, 3)
	hist := stripeHistory("", 10, time.Now().Add(-time.Minute))
	api.add(hist...)
	s := newBFSetup(t, stripeSource("stripe", fakeStripeKey, api.URL, app.URL, ""))
	startServe(t, s.cfg, s.hook, s.adm)
	for _, e := range hist[:3] {
		mustPostStripe(t, s.hook, "stripe", e, "accepted")
	}

	code, lines, errOut := backfillLines(t, "stripe", "--since", "2h", "--config", s.cfg)
	if code != 0 || len(lines) != 1 {
		t.Fatalf("backfill: exit %d, %d lines; stderr:\n%s", code, len(lines), errOut)
	}
	l := lines[0]
	if l.Source != "stripe" || l.DryRun || intOf(l.Listed) != 10 || intOf(l.AlreadyClaimed) != 3 || l.Recovered != 7 ||
		l.Failed != 0 || l.BeyondHistory != nil || l.Error != nil {
		t.Fatalf("backfill result %+v, want listed 10, already claimed 3, recovered 7, nothing failed", l)
	}
	got := app.waitKeys(t, keysOf("stripe", hist))
	app.mu.Lock()
	for _, r := range app.reqs {
		id := strings.TrimPrefix(r.Header.Get("Idempotency-Key"), "stripe:")
		recovered := id > hist[2].ID
		if recovered != bytes.Contains(r.Body, []byte(`"api_version"`)) {
			t.Errorf("%s delivered with body %s: want the API's bytes exactly for the recovered ones", id, r.Body)
		}
	}
	app.mu.Unlock()

	// Nothing is missing any more.
	code, lines, errOut = backfillLines(t, "stripe", "--since", "2h", "--config", s.cfg)
	if code != 0 || len(lines) != 1 || lines[0].Recovered != 0 || intOf(lines[0].AlreadyClaimed) != 10 {
		t.Fatalf("second backfill: exit %d %+v; want nothing recovered, 10 already claimed\n%s", code, lines, errOut)
	}
	// The webhook of a recovered event comes late: a duplicate, not flagged.
	mustPostStripe(t, s.hook, "stripe", hist[6], "duplicate")
	marker := fakeStripeEvent{ID: "evt_marker", Type: "invoice.paid", Created: time.Now()}
	mustPostStripe(t, s.hook, "stripe", marker, "accepted")
	got = app.waitKeys(t, append(keysOf("stripe", hist), "stripe:evt_marker"))
	for k, n := range got {
		if n != 1 {
			t.Errorf("%s reached the app %d times, want once", k, n)
		}
	}
	code, out, _ := runBin(t, "events", "show", "stripe", hist[6].ID, "--config", s.cfg)
	if code != 0 || !strings.Contains(out, "backfill") || strings.Contains(out, "divergent") {
		t.Errorf("events show of a recovered event: exit %d\n%s\nwant its backfill receipt and no divergent copy", code, out)
	}
	code, out, _ = runBin(t, "events", "show", "stripe", hist[6].ID, "--config", s.cfg, "--json")
	if code != 0 || !strings.Contains(out, `"action":"backfill"`) {
		t.Errorf("events show --json lacks the backfill's audit entry:\n%s", out)
	}
}

// TestBackfillStripeFaults: a malformed page records nothing from it and
// exits 1 naming the page; a 429 with Retry-After mid-way is waited out and
// the run completes; a refused key exits 2 naming its key path, and never
// shows the key.
func TestBackfillStripeFaults(t *testing.T) {
	app := newSink(t)
	api := newFakeStripe(t, 3)
	hist := stripeHistory("", 10, time.Now().Add(-time.Minute))
	api.add(hist...)
	s := newBFSetup(t, stripeSource("stripe", fakeStripeKey, api.URL, app.URL, "")+
		stripeSource("stripe-bad", "rk_test_revoked_key_value", api.URL, app.URL, ""))
	// The database exists once a serve ran; the backfills run without one.
	p := startServe(t, s.cfg, s.hook, s.adm)
	p.signal(syscall.SIGTERM)
	<-p.exited

	// Page 2 does not parse.
	api.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Query().Get("starting_after") == "" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"evt_x","object":"event"}],"has_more":true}`))
		return true
	})
	code, lines, errOut := backfillLines(t, "stripe", "--since", "2h", "--config", s.cfg)
	if code != 1 || len(lines) != 1 || lines[0].Error == nil || !strings.Contains(*lines[0].Error, "page 2") ||
		lines[0].Recovered != 3 {
		t.Fatalf("malformed page 2: exit %d %+v\n%s\nwant exit 1, the error naming page 2, page 1's 3 recovered", code, lines, errOut)
	}

	// Rate limited on page 2, once.
	var limited atomic.Int32
	api.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n != 2 || limited.Add(1) > 1 {
			return false
		}
		w.Header().Set("Retry-After", "1")
		stripeError(w, http.StatusTooManyRequests, "rate_limit_error", "Too many requests hit the API too quickly.")
		return true
	})
	code, lines, errOut = backfillLines(t, "stripe", "--since", "2h", "--config", s.cfg)
	if code != 0 || len(lines) != 1 || lines[0].Recovered != 7 || intOf(lines[0].AlreadyClaimed) != 3 || lines[0].Error != nil {
		t.Fatalf("429 mid-way: exit %d %+v\n%s\nwant exit 0, the other 7 recovered", code, lines, errOut)
	}
	api.mu.Lock()
	reqs := append([]string(nil), api.requests...)
	api.mu.Unlock()
	if len(reqs) < 3 || reqs[1] != reqs[2] {
		t.Errorf("requests %q: want page 2 asked again after the 429", reqs)
	}

	// A revoked key.
	code, out, errOut := runBin(t, "backfill", "stripe-bad", "--since", "2h", "--config", s.cfg)
	if code != 2 || !strings.Contains(errOut, "sources[1].backfill.api_key") || strings.Contains(out+errOut, "revoked_key_value") {
		t.Fatalf("refused key: exit %d\n%s%s\nwant exit 2 naming sources[1].backfill.api_key, never the key", code, out, errOut)
	}
	// No backfill: for the source at all: exit 2 as well.
	if code, _, errOut := runBin(t, "backfill", "nosuch", "--since", "2h", "--config", s.cfg); code != 2 {
		t.Fatalf("unknown source: exit %d: %s", code, errOut)
	}

	// The recovered events wait in the store for the next serve.
	startServe(t, s.cfg, s.hook, s.adm)
	for k, n := range app.waitKeys(t, keysOf("stripe", hist)) {
		if n != 1 {
			t.Errorf("%s reached the app %d times, want once", k, n)
		}
	}
}

// TestBackfillGitHubRedeliversThroughTheReceiver: GitHub's flow end to end.
// Two of six deliveries of the last hour arrived; backfill asks GitHub to
// redeliver the four others, which arrive signed through the receiver; the
// app gets all six once; a second run asks for nothing.
func TestBackfillGitHubRedeliversThroughTheReceiver(t *testing.T) {
	app := newSink(t)
	hook := freeAddr(t)
	gh := newFakeGitHub(t, "http://"+hook+"/hooks/gh", bfGitHubSecret, 4)
	now := time.Now()
	for i := 1; i <= 7; i++ {
		at := now.Add(-time.Duration(i) * 5 * time.Minute)
		if i == 7 {
			at = now.Add(-3 * time.Hour) // before the window
		}
		guid := fmt.Sprintf("5f0c3a00-0000-11ee-8000-00000000000%d", i)
		gh.deliveries = append(gh.deliveries, fakeDelivery{ID: int64(9000 + i), GUID: guid, DeliveredAt: at, Event: "push",
			Body: []byte(fmt.Sprintf(`{"ref":"refs/heads/main","after":"%040d","repository":{"id":42}}`, i))})
	}
	s := newBFSetupAt(t, hook, fmt.Sprintf(`  - name: gh
    scheme: github
    secrets: [%q]
    backfill: { api_key: %q, api_base: %q, hook: %q }
    destinations:
      - { name: app, url: %q, backoff: { initial: 20ms, max: 200ms } }
`, bfGitHubSecret, fakeGitHubToken, gh.URL, strings.TrimPrefix(fakeHookPath, "/"), app.URL))
	startServe(t, s.cfg, s.hook, s.adm)
	for _, d := range gh.deliveries[:2] {
		if err := sendGitHub(gh.hookURL, bfGitHubSecret, d); err != nil {
			t.Fatal(err)
		}
	}
	code, lines, errOut := backfillLines(t, "gh", "--since", "1h", "--config", s.cfg)
	if code != 0 || len(lines) != 1 || intOf(lines[0].Listed) != 6 || intOf(lines[0].AlreadyClaimed) != 2 || lines[0].Requested != 4 {
		t.Fatalf("github backfill: exit %d %+v\n%s\nwant 6 listed, 2 claimed, 4 redeliveries requested", code, lines, errOut)
	}
	var want []string
	for _, d := range gh.deliveries[:6] {
		want = append(want, "gh:"+d.GUID)
	}
	got := app.waitKeys(t, want)
	code, lines, errOut = backfillLines(t, "gh", "--since", "1h", "--config", s.cfg)
	if code != 0 || len(lines) != 1 || lines[0].Requested != 0 || intOf(lines[0].AlreadyClaimed) != 6 {
		t.Fatalf("second github backfill: exit %d %+v\n%s", code, lines, errOut)
	}
	got = app.keys()
	for _, k := range want {
		if got[k] != 1 {
			t.Errorf("%s reached the app %d times, want once", k, got[k])
		}
	}
	if len(got) != 6 {
		t.Errorf("the app got %v; the delivery before the window must not be asked for", got)
	}
	gh.mu.Lock()
	defer gh.mu.Unlock()
	if len(gh.redelivered) != 4 {
		t.Errorf("redelivered %v, want the 4 missing once each", gh.redelivered)
	}
}

// TestAutoBackfillAfterKill9: a provider sends a steady stream of events;
// serve is killed with SIGKILL and the provider keeps "sending" into the
// void; on restart serve finds the outage window and backfills it on its
// own, and every event of the provider's history reaches the app, once as
// the app sees it (the Idempotency-Key), the only repeats being deliveries
// in flight at the kill.
func TestAutoBackfillAfterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts serve")
	}
	app := newSink(t)
	api := newFakeStripe(t, 50)
	s := newBFSetup(t, stripeSource("stripe", fakeStripeKey, api.URL, app.URL, ", auto: true"))
	p := startServe(t, s.cfg, s.hook, s.adm)

	var sent, void atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			e := fakeStripeEvent{ID: fmt.Sprintf("evt_auto%06d", i), Type: "invoice.paid", Created: time.Now().Truncate(time.Second)}
			api.add(e)
			if a, err := postStripe(t, s.hook, "stripe", e); err != nil || a.Code != 200 {
				void.Add(1) // the provider would retry later; here it gives up
			} else {
				sent.Add(1)
			}
		}
	})
	waitFor(t, "events accepted before the kill", func() bool { return sent.Load() >= 100 })
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	waitFor(t, "events sent into the void", func() bool { return void.Load() >= 100 })
	before := sent.Load()
	startServe(t, s.cfg, s.hook, s.adm)
	waitFor(t, "events accepted after the restart", func() bool { return sent.Load() >= before+100 })
	close(stop)
	wg.Wait()

	hist := api.history()
	got := app.waitKeys(t, keysOf("stripe", hist))
	repeats := 0
	for _, n := range got {
		repeats += n - 1
	}
	if len(got) != len(hist) || repeats > 2 { // concurrency 2: at most 2 in flight at the kill
		t.Errorf("the app got %d keys for %d events with %d repeats; want each once (repeats only of the 2 in flight)",
			len(got), len(hist), repeats)
	}
	t.Logf("%d events: %d lost to the void and recovered by the automatic backfill", len(hist), void.Load())

	code, out, errOut := runBin(t, "gaps", "--json", "--config", s.cfg)
	if code != 0 {
		t.Fatalf("gaps: exit %d: %s", code, errOut)
	}
	var o struct {
		Crash   bool                        `json:"crash"`
		Sources []hookwarden.SourceRecovery `json:"sources"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &o); err != nil {
		t.Fatalf("gaps --json %q: %v", out, err)
	}
	if !o.Crash || len(o.Sources) != 1 || o.Sources[0].Recovery != hookwarden.RecoveryRecovered ||
		o.Sources[0].Backfill == nil || !o.Sources[0].Backfill.Auto || o.Sources[0].Backfill.Recovered == 0 {
		t.Errorf("gaps: %s\nwant the crash window recovered by an automatic run", out)
	}
}

// TestCheckBackfillKeys: check names the key path of every backfill
// mistake, and refuses claims retention shorter than the provider's history.
func TestCheckBackfillKeys(t *testing.T) {
	t.Setenv("HW_BF_KEY", "rk_test_value_never_shown")
	p := writeConfig(t, `
retention: { claims: 20d, payloads: 7d }
sources:
  - name: stripe
    scheme: stripe
    secrets: ["whsec_x"]
    retry_horizon: 1d
    redrive_window: 1d
    backfill: { api_key: "env:HW_BF_KEY", api_base: "http://api.example.com", hook: "repos/o/r/hooks/1", tpyes: ["x"] }
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
  - name: gh
    scheme: github
    secrets: ["s"]
    backfill: { api_key: "env:HW_BF_UNSET", hook: "repos/o/r/1" }
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
  - name: svix
    scheme: standard
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
    backfill: { api_key: "env:HW_BF_KEY", app: "app_1" }
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
  - name: mail
    scheme: postmark
    secrets: ["user:pass"]
    backfill: { api_key: "env:HW_BF_KEY" }
    destinations: [{ name: app, url: "http://127.0.0.1:3000/" }]
`)
	code, out, _ := runMain(t, "check", "--config", p)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, out)
	}
	for _, want := range []string{
		`sources[0].backfill.tpyes: unknown key "tpyes" (did you mean "types"?)`,
		`sources[0].backfill.api_base: "http://api.example.com": http is allowed only on loopback`,
		`sources[0].backfill.hook: not used by scheme stripe`,
		`retention.claims: 20d is shorter than the stripe history source "stripe" backfills from (30d)`,
		`sources[1].backfill.api_key: secret env:HW_BF_UNSET: environment variable HW_BF_UNSET is not set`,
		`sources[1].backfill.hook: github hook "repos/o/r/1"`,
		`sources[2].backfill.endpoint: required for standard`,
		`sources[3].backfill: scheme postmark has no history to backfill from`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "value_never_shown") {
		t.Errorf("check printed the api key:\n%s", out)
	}
}

// TestBackfillAPIAndMetric: POST /api/backfill answers 202 with the run's
// id, 409 while it runs; the run recovers the window, counts
// hookwarden_backfill_events_total and is in the audit log and in gaps.
func TestBackfillAPIAndMetric(t *testing.T) {
	app := newSink(t)
	api := newFakeStripe(t, 2)
	hist := stripeHistory("", 5, time.Now().Add(-time.Minute))
	api.add(hist...)
	release := make(chan struct{})
	api.setFault(func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			<-release // the first page waits: the run is running meanwhile
		}
		return false
	})
	s := newBFSetup(t, stripeSource("stripe", fakeStripeKey, api.URL, app.URL, ""))
	startServe(t, s.cfg, s.hook, s.adm)
	mustPostStripe(t, s.hook, "stripe", hist[0], "accepted")
	post := func(body string) (int, map[string]any) {
		resp, err := http.Post("http://"+s.adm+"/api/backfill", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	window := fmt.Sprintf(`{"source":"stripe","from":%q,"to":%q}`,
		time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
	code, m := post(window)
	if code != http.StatusAccepted || m["status"] != "running" || m["id"] == nil {
		t.Fatalf("POST /api/backfill: %d %v, want 202 running with an id", code, m)
	}
	if code, m := post(window); code != http.StatusConflict {
		t.Errorf("second POST while one runs: %d %v, want 409", code, m)
	}
	if code, _ := post(`{"source":"nosuch","from":"2026-01-01T00:00:00Z","to":"2026-01-01T01:00:00Z"}`); code != http.StatusNotFound {
		t.Errorf("unknown source: %d, want 404", code)
	}
	if code, _ := post(`{"source":"stripe"}`); code != http.StatusBadRequest {
		t.Errorf("no window: %d, want 400", code)
	}
	close(release)
	for k, n := range app.waitKeys(t, keysOf("stripe", hist)) {
		if n != 1 {
			t.Errorf("%s reached the app %d times", k, n)
		}
	}
	waitFor(t, "the metric", func() bool {
		return scrapeAll(t, s.adm)[`hookwarden_backfill_events_total{outcome="recovered",source="stripe"}`] == 4
	})
	if v := scrapeAll(t, s.adm)[`hookwarden_backfill_events_total{outcome="already_claimed",source="stripe"}`]; v != 1 {
		t.Errorf("already_claimed = %v, want 1", v)
	}
	waitFor(t, "the run's end", func() bool {
		code, out, _ := runBin(t, "events", "show", "stripe", hist[3].ID, "--config", s.cfg, "--json")
		return code == 0 && strings.Contains(out, `"action":"backfill"`) && strings.Contains(out, `"origin":"api"`)
	})
}

// TestBackfillRefusesAForensicCopy: like every writing command, backfill on
// a --db file no serve owns needs --write.
func TestBackfillRefusesAForensicCopy(t *testing.T) {
	app := newSink(t)
	api := newFakeStripe(t, 10)
	api.add(stripeHistory("", 3, time.Now().Add(-time.Minute))...)
	s := newBFSetup(t, stripeSource("stripe", fakeStripeKey, api.URL, app.URL, ""))
	p := startServe(t, s.cfg, s.hook, s.adm)
	p.signal(syscall.SIGTERM)
	<-p.exited
	code, _, errOut := runBin(t, "backfill", "stripe", "--since", "1h", "--config", s.cfg, "--db", s.db)
	if code != 2 || !strings.Contains(errOut, "--write") {
		t.Fatalf("backfill on a --db file no serve owns: exit %d: %s; want 2 and the --write hint", code, errOut)
	}
	code, lines, errOut := backfillLines(t, "stripe", "--since", "1h", "--config", s.cfg, "--db", s.db, "--write")
	if code != 0 || len(lines) != 1 || lines[0].Recovered != 3 {
		t.Fatalf("with --write: exit %d %+v: %s", code, lines, errOut)
	}
	// A dry run changes nothing and says what it would do.
	api.add(fakeStripeEvent{ID: "evt_new", Type: "invoice.paid", Created: time.Now().Add(-time.Second).Truncate(time.Second)})
	code, lines, errOut = backfillLines(t, "stripe", "--since", "1h", "--config", s.cfg, "--dry-run")
	if code != 0 || len(lines) != 1 || !lines[0].DryRun || lines[0].Recovered != 1 || intOf(lines[0].AlreadyClaimed) != 3 {
		t.Fatalf("dry run: exit %d %+v: %s", code, lines, errOut)
	}
	code, lines, _ = backfillLines(t, "stripe", "--since", "1h", "--config", s.cfg)
	if code != 0 || len(lines) != 1 || lines[0].Recovered != 1 {
		t.Fatalf("after the dry run, the event is still missing: %+v", lines)
	}
}

// TestBackfillSvixRecover: a Standard Webhooks source sent by Svix asks
// Svix to recover the window; the counts are unknown (null), gaps says
// requested.
func TestBackfillSvixRecover(t *testing.T) {
	var mu sync.Mutex
	var asked []map[string]string
	svix := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer sk_svix_sender" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"code":"authentication_failed","detail":"Invalid token"}`))
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/app/app_shop/endpoint/ep_orders/recover" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"code":"not_found","detail":"Entity not found"}`))
			return
		}
		var in map[string]string
		_ = json.NewDecoder(r.Body).Decode(&in)
		mu.Lock()
		asked = append(asked, in)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"id":"qtask_1srOrx2ZWZBpBUvZwXKQmoEYga2","status":"running","task":"endpoint.recover"}`))
	}))
	t.Cleanup(svix.Close)
	app := newSink(t)
	s := newBFSetup(t, fmt.Sprintf(`  - name: orders
    scheme: standard
    secrets: [%q]
    backfill: { api_key: "sk_svix_sender", api_base: %q, app: app_shop, endpoint: ep_orders }
    destinations: [{ name: app, url: %q }]
`, testSecret, svix.URL, app.URL))
	p := startServe(t, s.cfg, s.hook, s.adm)
	p.signal(syscall.SIGTERM)
	<-p.exited
	from := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	to := time.Now().Add(-time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	code, lines, errOut := backfillLines(t, "orders", "--from", from, "--to", to, "--config", s.cfg)
	if code != 0 || len(lines) != 1 || lines[0].Listed != nil || lines[0].AlreadyClaimed != nil || lines[0].Error != nil {
		t.Fatalf("svix backfill: exit %d %+v: %s; want counts unknown (null) and no error", code, lines, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0]["since"] != from || asked[0]["until"] != to {
		t.Errorf("recover asked with %v, want the window as since/until", asked)
	}
}

// TestBackfillPaddleThroughTheBinary: Paddle's list (oldest first, the
// `after` cursor in meta.pagination.next, Bearer key) recovers the events
// that did not arrive; the app gets each once.
func TestBackfillPaddleThroughTheBinary(t *testing.T) {
	type ev struct {
		id string
		at time.Time
	}
	var evs []ev
	for i := 1; i <= 6; i++ {
		evs = append(evs, ev{fmt.Sprintf("evt_01hv8x2acma2gz6he7xk4b7p%02d", i), time.Now().Add(-time.Duration(70-10*i) * time.Minute).UTC()})
	}
	body := func(e ev) []byte {
		return []byte(fmt.Sprintf(`{"event_id":%q,"event_type":"transaction.completed","occurred_at":%q,"data":{"id":"txn_%s","status":"completed"}}`,
			e.id, e.at.Format(time.RFC3339Nano), e.id[len(e.id)-2:]))
	}
	var api *httptest.Server
	api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer pdl_live_apikey_reader" {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"type":"request_error","code":"forbidden","detail":"You aren't permitted to perform this request."},"meta":{"request_id":"r"}}`))
			return
		}
		if r.URL.Path != "/events" || r.URL.Query().Get("per_page") != "200" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"type":"request_error","code":"not_found","detail":"Not found"}}`))
			return
		}
		start := 0
		if after := r.URL.Query().Get("after"); after != "" {
			for i, e := range evs {
				if e.id == after {
					start = i + 1
				}
			}
		}
		end := min(start+4, len(evs)) // fewer than per_page: the docs allow it
		var b bytes.Buffer
		b.WriteString(`{"data":[`)
		for i, e := range evs[start:end] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(body(e))
		}
		more := end < len(evs)
		next := ""
		if more {
			next = fmt.Sprintf("%s/events?after=%s&per_page=200", api.URL, evs[end-1].id)
		}
		fmt.Fprintf(&b, `],"meta":{"request_id":"r","pagination":{"per_page":200,"next":%q,"has_more":%v,"estimated_total":%d}}}`,
			next, more, len(evs))
		w.Write(b.Bytes())
	}))
	t.Cleanup(api.Close)
	app := newSink(t)
	const secret = "pdl_ntfset_01hv8x2acma2gz6he7xk4b7ps1_secretkey"
	s := newBFSetup(t, fmt.Sprintf(`  - name: paddle
    scheme: paddle
    secrets: [%q]
    backfill: { api_key: "pdl_live_apikey_reader", api_base: %q }
    destinations: [{ name: app, url: %q }]
`, secret, api.URL, app.URL))
	startServe(t, s.cfg, s.hook, s.adm)
	for _, e := range evs[:2] {
		b := body(e)
		h, err := signature.Sign(signature.Params{Scheme: "paddle", Secrets: []string{secret}}, b, time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.hook+"/hooks/paddle", bytes.NewReader(b))
		for k, v := range h {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		if a := do(t, req); a.Code != 200 || a.Status != "accepted" {
			t.Fatalf("live %s: %+v", e.id, a)
		}
	}
	code, lines, errOut := backfillLines(t, "paddle", "--since", "2h", "--config", s.cfg)
	if code != 0 || len(lines) != 1 || intOf(lines[0].Listed) != 6 || intOf(lines[0].AlreadyClaimed) != 2 || lines[0].Recovered != 4 {
		t.Fatalf("paddle backfill: exit %d %+v: %s", code, lines, errOut)
	}
	var want []string
	for _, e := range evs {
		want = append(want, "paddle:"+e.id)
	}
	for k, n := range app.waitKeys(t, want) {
		if n != 1 {
			t.Errorf("%s reached the app %d times", k, n)
		}
	}
}
