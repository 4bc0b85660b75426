package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/hookwarden/hookwarden/internal/metrics"
)

// metricValue reads one series from the app's registry, as a scrape would:
// a counter's or gauge's value, or a histogram's sample count. ok is false
// when no series has these labels.
func (a *testApp) metricValue(name string, labels ...string) (v float64, ok bool) {
	a.t.Helper()
	mfs, err := a.Metrics.Registry.Gather()
	if err != nil {
		a.t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue next
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue(), true
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue(), true
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func (a *testApp) metric(name string, labels ...string) float64 {
	a.t.Helper()
	v, ok := a.metricValue(name, labels...)
	if !ok {
		a.t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

func TestMetricsAfterRealTraffic(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "")
	if got := a.metric("hookwarden_ready"); got != 1 {
		t.Errorf("ready = %v, want 1", got)
	}
	std := a.cfg.Sources[0]
	if got, want := a.metric("hookwarden_retention_margin_seconds", "source", "std"),
		(a.cfg.Retention.Claims.D() - std.RetryHorizon.D() - std.RedriveWindow.D()).Seconds(); got != want || want <= 0 {
		t.Errorf("retention_margin = %v, want claims - (horizon + redrive) = %v", got, want)
	}
	if _, ok := a.metricValue("hookwarden_last_accepted_timestamp_seconds", "source", "std"); ok {
		t.Error("last_accepted present on an empty database")
	}

	// MaxTypes+2 distinct types, each sent twice: the second copy of each is
	// a duplicate, and the last two types fold into "other".
	types := metrics.MaxTypes + 2
	var lastSeen float64
	for i := range types {
		body := fmt.Sprintf(`{"type":"t.%02d"}`, i)
		if got := a.post(fmt.Sprintf("msg_%d", i), body); got.Status != "accepted" {
			t.Fatalf("post %d: %+v", i, got)
		}
		if i == 0 {
			lastSeen = a.metric("hookwarden_last_accepted_timestamp_seconds", "source", "std")
			if now := float64(time.Now().Unix()); lastSeen < now-5 || lastSeen > now+1 {
				t.Fatalf("last_accepted = %v, want about %v", lastSeen, now)
			}
		}
	}
	time.Sleep(20 * time.Millisecond)
	for i := range types {
		body := fmt.Sprintf(`{"type":"t.%02d"}`, i)
		if got := a.post(fmt.Sprintf("msg_%d", i), body); got.Status != "duplicate" {
			t.Fatalf("repeat %d: %+v", i, got)
		}
	}
	if got := a.metric("hookwarden_last_accepted_timestamp_seconds", "source", "std"); got <= lastSeen {
		t.Errorf("last_accepted did not move: %v after %v", got, lastSeen)
	}
	// Each accepted id is a new claim in serve's memory; duplicates add none.
	if got := a.metric("hookwarden_claims_in_memory"); got != float64(types) {
		t.Errorf("claims_in_memory = %v after %d ids, each sent twice; want %d", got, types, types)
	}
	// Refusals, each with its outcome.
	url := a.hookURL()
	do(t, signed(t, url, "msg_bad", []byte(`{}`), time.Now(), "whsec_d3JvbmctY29tcGxldGVseS13cm9uZw=="))
	do(t, signed(t, url, "msg_big", bytes.Repeat([]byte("a"), 5000), time.Now(), testSecret))
	do(t, signed(t, "http://"+a.HookAddr()+"/hooks/nope", "msg_u", []byte(`{}`), time.Now(), testSecret))

	for _, c := range []struct {
		source, outcome string
		want            float64
	}{
		{"std", "accepted", float64(types)},
		{"std", "duplicate", float64(types)},
		{"std", "unauthorized", 1},
		{"std", "too_large", 1},
		{"std", "quarantined", 0},
		{"", "not_found", 1}, // the unknown name is never a label value
	} {
		if got := a.metric("hookwarden_requests_total", "source", c.source, "outcome", c.outcome); got != c.want {
			t.Errorf("requests_total{source=%q,outcome=%q} = %v, want %v", c.source, c.outcome, got, c.want)
		}
	}
	if got := a.metric("hookwarden_unauthorized_total", "source", "std", "reason", "mismatch"); got != 1 {
		t.Errorf("unauthorized_total{reason=mismatch} = %v, want 1", got)
	}
	for i := range metrics.MaxTypes {
		if got := a.metric("hookwarden_duplicates_total", "source", "std", "type", fmt.Sprintf("t.%02d", i)); got != 1 {
			t.Errorf("duplicates_total{type=t.%02d} = %v, want 1", i, got)
		}
	}
	if got := a.metric("hookwarden_duplicates_total", "source", "std", "type", "other"); got != 2 {
		t.Errorf(`duplicates_total{type="other"} = %v, want 2 (types past MaxTypes fold)`, got)
	}
	// Every request to the source is timed, refused ones included.
	if got, want := a.metric("hookwarden_ack_duration_seconds", "source", "std"), float64(2*types+2); got != want {
		t.Errorf("ack_duration_seconds count = %v, want %v", got, want)
	}
	eventually(t, "every event delivered", func() bool {
		v, _ := a.metricValue("hookwarden_deliveries_total", "destination", "std/app", "outcome", "delivered")
		return v == float64(types)
	})
	if got := a.metric("hookwarden_delivery_duration_seconds", "destination", "std/app"); got != float64(types) {
		t.Errorf("delivery_duration count = %v, want %v", got, types)
	}
	// The outbox gauges come from a snapshot refreshed every outboxRefresh.
	eventually(t, "outbox_pending back to 0 after delivery", func() bool {
		v, _ := a.metricValue("hookwarden_outbox_pending", "destination", "std/app")
		return v == 0
	})
	if got := a.metric("hookwarden_store_batch_size"); got == 0 {
		t.Error("store_batch_size saw no commit")
	}
	// The dashboard's in-memory counts of what the database does not keep.
	if got := a.Metrics.Recent("std", time.Hour, "unauthorized", "too_large"); got != 2 {
		t.Errorf("Recent rejected = %d, want 2", got)
	}
}

func TestDeadLettersGaugeUpOnPoisonDownOnReplay(t *testing.T) {
	app := newSink(t, 422) // poison once, then 204
	a := startApp(t, app.URL, "")
	if got := a.metric("hookwarden_dead_letters", "destination", "std/app"); got != 0 {
		t.Fatalf("dead_letters = %v at start, want 0 (present, not absent)", got)
	}
	a.post("msg_poison", `{"type":"x"}`)
	eventually(t, "dead_letters = 1", func() bool {
		v, _ := a.metricValue("hookwarden_dead_letters", "destination", "std/app")
		return v == 1
	})
	if got := a.metric("hookwarden_deliveries_total", "destination", "std/app", "outcome", "dead"); got != 1 {
		t.Errorf("deliveries_total{outcome=dead} = %v, want 1", got)
	}
	// The CLI's and the API's replay path.
	res, err := a.Store.Replay(context.Background(), hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{})
	if err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	a.Workers.Notify(res.Destinations...)
	eventually(t, "dead_letters back to 0 and delivered", func() bool {
		d, _ := a.metricValue("hookwarden_dead_letters", "destination", "std/app")
		ok, _ := a.metricValue("hookwarden_deliveries_total", "destination", "std/app", "outcome", "delivered")
		return d == 0 && ok == 1
	})
}

// TestLastAcceptedSurvivesRestart: the absence alert's clock is seeded from
// the file, so a restart neither resets it nor leaves it absent.
func TestLastAcceptedSurvivesRestart(t *testing.T) {
	app := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	doc := fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    expect_within: 6h
    destinations: [{ name: app, url: %q }]
  - name: quiet
    scheme: standard
    secrets: [%q]
    destinations: [{ name: app, url: %q }]
`, db, testSecret, app.URL, testSecret, app.URL)
	a, stop := startAppLogged(t, doc, db, io.Discard)
	a.post("msg_1", `{"type":"x"}`)
	first := a.metric("hookwarden_last_accepted_timestamp_seconds", "source", "std")
	if got := a.metric("hookwarden_source_expect_within_seconds", "source", "std"); got != 6*3600 {
		t.Errorf("expect_within = %v, want 21600", got)
	}
	if _, ok := a.metricValue("hookwarden_source_expect_within_seconds", "source", "quiet"); ok {
		t.Error("a source without expect_within has an expect_within series")
	}
	stop()
	b := startAppYAML(t, doc, db)
	// The seed is the claim's time in the file: a moment before the live
	// gauge was set (after the commit), and before the restart.
	got := b.metric("hookwarden_last_accepted_timestamp_seconds", "source", "std")
	if got > first || got < first-2 {
		t.Errorf("after restart last_accepted = %v, want the claim time, just before %v (seeded from the file)", got, first)
	}
	if _, ok := b.metricValue("hookwarden_last_accepted_timestamp_seconds", "source", "quiet"); ok {
		t.Error("a source that never accepted got a last_accepted after restart")
	}
}

// startAppLogged boots the app like startAppYAML with a JSON debug logger
// writing to w (what serve logs under systemd, at its most talkative), and
// returns a stop the test may call before its cleanup does.
func startAppLogged(t *testing.T, doc, db string, w io.Writer) (*testApp, func()) {
	t.Helper()
	cfg, problems, err := loadConfig([]byte(doc), "test")
	if err != nil || cfg == nil {
		t.Fatalf("config: %v %v", err, problems)
	}
	app := NewApp(cfg, slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := app.Open(context.Background()); err != nil {
		t.Fatalf("start: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := app.Stop(ctx); err != nil {
				t.Errorf("stop: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &testApp{App: app, t: t, dbPath: db}, stop
}

// TestLogsTieReceiptToAttemptsAndHoldNoSecret runs a full cycle (accept,
// duplicate, forged and oversized requests, retry, poison, replay from the
// dashboard, a failed and a good dashboard login) with debug JSON logs, then
// checks that (1) one line per event ties the receipt to the event id that
// the attempt lines carry, and (2) no secret, token, signature or body is
// anywhere in the log.
func TestLogsTieReceiptToAttemptsAndHoldNoSecret(t *testing.T) {
	const (
		adminToken = "adm-Zq8vX3kP0wLr7Tn2Yb5Hc9Jd"
		bodyMarker = "card_4242_SECRET_PAYLOAD_MARKER"
	)
	app := newSink(t, 503, 422) // event 1: a retry, then poison; then 204
	var logs logBuffer
	db := filepath.Join(t.TempDir(), "hw.db")
	doc := stdConfig(db, adminToken, app.URL, "")
	a, stop := startAppLogged(t, doc, db, &logs)

	body := `{"type":"invoice.paid","card":"` + bodyMarker + `"}`
	req := signed(t, a.hookURL(), "msg_log", []byte(body), time.Now(), testSecret)
	sig := req.Header.Get("Webhook-Signature")
	if got := do(t, req); got.Status != "accepted" {
		t.Fatalf("post: %+v", got)
	}
	a.post("msg_log", body) // duplicate
	do(t, signed(t, a.hookURL(), "msg_forged", []byte(body), time.Now(), "whsec_d3JvbmctY29tcGxldGVseS13cm9uZw=="))
	do(t, signed(t, a.hookURL(), "msg_big", []byte(strings.Repeat(bodyMarker, 200)), time.Now(), testSecret))
	eventually(t, "dead letter", func() bool { return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`) == 1 })

	// The dashboard: a wrong token, the right one, then Replay.
	c := newBrowserClient(t, a)
	if code := c.login("not-the-token"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", code)
	}
	if code := c.login(adminToken); code != http.StatusOK {
		t.Fatalf("login: %d, want 200", code)
	}
	c.replayFirstDead()
	eventually(t, "delivered after replay", func() bool {
		return a.count(`SELECT count(*) FROM jobs WHERE state = 'delivered'`) == 1
	})
	stop()

	out := logs.String()
	for name, secret := range map[string]string{
		"source secret":          testSecret,
		"source secret key":      strings.TrimPrefix(testSecret, "whsec_"),
		"forged secret":          "d3JvbmctY29tcGxldGVseS13cm9uZw==",
		"destination secret":     testAppSecret,
		"destination secret key": strings.TrimPrefix(testAppSecret, "whsec_"),
		"admin token":            adminToken,
		"wrong token":            "not-the-token",
		"signature":              strings.TrimPrefix(sig, "v1,"),
		"body":                   bodyMarker,
	} {
		if strings.Contains(out, secret) {
			t.Errorf("the log contains the %s %q", name, secret)
		}
	}

	// Every line is JSON; find the receipt line and the attempt lines.
	var receipt float64
	attempts := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON log line: %q", sc.Text())
		}
		if l["event_id"] != "msg_log" {
			continue
		}
		switch l["msg"] {
		case "event recorded":
			if l["outcome"] == "accepted" {
				receipt, _ = l["receipt"].(float64)
				if l["key"] != "std:msg_log" || l["level"] != "DEBUG" {
					t.Errorf("event recorded line: %v", l)
				}
			}
		case "delivered", "delivery failed, will retry", "delivery dead-lettered":
			if l["source"] != "std" || l["job"] == nil {
				t.Errorf("attempt line without source or job: %v", l)
			}
			attempts[l["msg"].(string)] = true
		}
	}
	if receipt == 0 {
		t.Error(`no "event recorded" line with the receipt id for msg_log`)
	}
	for _, m := range []string{"delivery failed, will retry", "delivery dead-lettered", "delivered"} {
		if !attempts[m] {
			t.Errorf("no %q line carrying event_id msg_log", m)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", out)
	}
}
