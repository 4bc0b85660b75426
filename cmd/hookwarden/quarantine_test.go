package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
)

const (
	ghSecret = "gh-secret-for-tests"
	hmSecret = "hm-secret-for-tests"
	mgSecret = "mg-signing-key-for-tests"
)

// newDoorChild is a serve process with the sources whose signature does not
// cover the event id (github, hmac with a header id), one whose does (hmac
// with a json id), and mailgun, all delivering to destURL.
func newDoorChild(t *testing.T, destURL string) *child {
	t.Helper()
	dir := t.TempDir()
	c := &child{t: t, cfg: filepath.Join(dir, "config.yaml"), hook: freeAddr(t), adm: freeAddr(t)}
	dest := fmt.Sprintf(`[{ name: app, url: %q, backoff: { initial: 20ms, max: 200ms } }]`, destURL)
	doc := fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: %q }
log: { level: warn }
sources:
  - name: gh
    scheme: github
    secrets: [%q]
    destinations: %s
  - name: hh
    scheme: hmac
    secrets: [%q]
    hmac: { header: X-Sig }
    event_id: "header:X-Id"
    destinations: %s
  - name: hj
    scheme: hmac
    secrets: [%q]
    hmac: { header: X-Sig }
    event_id: "json:id"
    destinations: %s
  - name: mg
    scheme: mailgun
    secrets: [%q]
    destinations: %s
`, c.hook, c.adm, filepath.Join(dir, "hw.db"), ghSecret, dest, hmSecret, dest, hmSecret, dest, mgSecret, dest)
	if err := os.WriteFile(c.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// post sends a signed request to source name and returns the answer.
func (c *child) post(t *testing.T, name string, p signature.Params, body []byte, msgID string, edit func(http.Header)) answerT {
	t.Helper()
	h, nb, err := signature.SignBody(p, body, time.Now(), msgID)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+c.hook+"/hooks/"+name, bytes.NewReader(nb))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if edit != nil {
		edit(req.Header)
	}
	return do(t, req)
}

func (c *child) metric(t *testing.T, series string) int {
	t.Helper()
	if v, ok := scrapeAll(t, c.adm)[series]; ok {
		return int(v)
	}
	return -1
}

func heldList(t *testing.T, args ...string) []hookwarden.Held {
	t.Helper()
	code, out, errOut := runBin(t, append([]string{"quarantine", "list", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("quarantine list: exit %d: %s", code, errOut)
	}
	var items []hookwarden.Held
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var h hookwarden.Held
		if err := json.Unmarshal([]byte(line), &h); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		items = append(items, h)
	}
	return items
}

func eventIDs(s *sink) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, r := range s.reqs {
		ids = append(ids, r.Header.Get("Hookwarden-Source")+"/"+r.Header.Get("Hookwarden-Event-Id")+":"+r.Header.Get("Hookwarden-Event-Type"))
	}
	sort.Strings(ids) // destinations deliver concurrently
	return ids
}

// TestBodyReplayQuarantinedThroughTheBinary is issue 13 point 2 at the door:
// a captured github request sent again under a fresh X-GitHub-Delivery (and
// with another X-GitHub-Event) is held, never delivered; an operator can
// look, release or drop it.
func TestBodyReplayQuarantinedThroughTheBinary(t *testing.T) {
	app := newSink(t)
	c := newDoorChild(t, app.URL)
	c.start()
	defer c.stop()
	gh := signature.Params{Scheme: "github", Secrets: []string{ghSecret}}
	ping := []byte(`{"zen":"Design for failure.","hook_id":1}`)

	if got := c.post(t, "gh", gh, ping, "d-1", nil); got.Code != 200 || got.Status != "accepted" {
		t.Fatalf("first delivery: %+v", got)
	}
	app.wait(t)
	if got := c.post(t, "gh", gh, ping, "d-2", nil); got.Code != 200 || got.Status != "quarantined" {
		t.Fatalf("same body, fresh delivery id: %+v, want 200 quarantined", got)
	}
	release := func(h http.Header) { h.Set("X-GitHub-Event", "release") }
	if got := c.post(t, "gh", gh, ping, "d-3", release); got.Code != 200 || got.Status != "quarantined" {
		t.Fatalf("fresh id and another event type: %+v, want 200 quarantined", got)
	}
	// GitHub redelivering d-1 is a plain duplicate.
	if got := c.post(t, "gh", gh, ping, "d-1", nil); got.Code != 200 || got.Status != "duplicate" {
		t.Fatalf("same id, same body: %+v, want duplicate", got)
	}
	// hmac with a header id gets the check; with a json id it does not apply
	// (the id is inside the signed body: a new id is a new body).
	hm := signature.Params{Scheme: "hmac", Secrets: []string{hmSecret}, HMAC: signature.HMACParams{Header: "X-Sig"}}
	hbody := []byte(`{"id":"j-1","n":1}`)
	withID := func(id string) func(http.Header) { return func(h http.Header) { h.Set("X-Id", id) } }
	if got := c.post(t, "hh", hm, hbody, "", withID("h-1")); got.Status != "accepted" {
		t.Fatalf("hh first: %+v", got)
	}
	if got := c.post(t, "hh", hm, hbody, "", withID("h-2")); got.Status != "quarantined" {
		t.Fatalf("hh same body under another header id: %+v, want quarantined", got)
	}
	if got := c.post(t, "hj", hm, hbody, "", withID("h-2")); got.Status != "accepted" {
		t.Fatalf("hj first: %+v", got)
	}
	if got := c.post(t, "hj", hm, hbody, "", withID("h-3")); got.Status != "duplicate" {
		t.Fatalf("hj same body (same json id): %+v, want duplicate", got)
	}
	app.wait(t)
	app.wait(t)
	time.Sleep(1500 * time.Millisecond) // more than a worker poll: a wrong delivery would show up
	if got := fmt.Sprint(eventIDs(app)); got != "[gh/d-1:ping hh/h-1: hj/j-1:]" {
		t.Fatalf("delivered %s, want only the first copies", got)
	}
	var n int
	db, err := sql.Open("sqlite", "file:"+c.db()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT count(*) FROM body_keys WHERE source = 'hj'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("body keys of a source whose signature covers the id: %d %v, want none", n, err)
	}

	// Shown: list, API and metric.
	held := heldList(t, "--db", c.db(), "--source", "gh")
	if len(held) != 1 {
		t.Fatalf("held: %+v", held)
	}
	h := held[0]
	if h.Reason != "body_replayed" || h.CandidateEventID != "d-2" || h.OriginalEventID != "d-1" || h.Repeats != 1 ||
		h.ReleasedAt != nil || h.Source != "gh" {
		t.Fatalf("held request: %+v", h)
	}
	resp, err := http.Get("http://" + c.adm + "/api/quarantine?source=gh")
	if err != nil {
		t.Fatal(err)
	}
	var pg struct{ Items []map[string]any }
	_ = json.NewDecoder(resp.Body).Decode(&pg)
	resp.Body.Close()
	if len(pg.Items) != 1 {
		t.Fatalf("/api/quarantine: %+v", pg)
	}
	for _, k := range []string{"receipt_id", "source", "received_at", "reason", "candidate_event_id", "original_event_id", "repeats", "released_at"} {
		if _, ok := pg.Items[0][k]; !ok {
			t.Errorf("/api/quarantine item lacks %s: %v", k, pg.Items[0])
		}
	}
	if pg.Items[0]["receipt_id"] != float64(h.ReceiptID) || pg.Items[0]["reason"] != "body_replayed" {
		t.Errorf("/api/quarantine item: %v", pg.Items[0])
	}
	if got := c.metric(t, `hookwarden_quarantined_total{reason="body_replayed",source="gh"}`); got != 2 {
		t.Errorf("quarantined_total body_replayed gh: %d, want 2", got)
	}
	if got := c.metric(t, `hookwarden_quarantined_total{reason="body_replayed",source="hh"}`); got != 1 {
		t.Errorf("quarantined_total body_replayed hh: %d, want 1", got)
	}
	code, out, _ := runBin(t, "quarantine", "show", strconv.FormatInt(h.ReceiptID, 10), "--db", c.db())
	if code != 0 || !strings.Contains(out, "body_replayed") || !strings.Contains(out, "X-Github-Delivery: d-2") ||
		!strings.Contains(out, "Design for failure.") {
		t.Fatalf("quarantine show: exit %d\n%s", code, out)
	}

	// Release under an id already claimed: exit 1, still held.
	id := strconv.FormatInt(h.ReceiptID, 10)
	code, _, errOut := runBin(t, "quarantine", "release", id, "--event-id", "d-1", "--config", c.cfg)
	if code != 1 || !strings.Contains(errOut, "already claimed") {
		t.Fatalf("release as d-1: exit %d %s, want 1 and already claimed", code, errOut)
	}
	if h := heldList(t, "--db", c.db(), "--source", "gh"); len(h) != 1 || h[0].ReleasedAt != nil {
		t.Fatalf("after a refused release: %+v", h)
	}
	// Release under its candidate id: claimed, delivered by the running serve.
	code, out, errOut = runBin(t, "quarantine", "release", id, "--config", c.cfg)
	if code != 0 || !strings.Contains(out, "gh/d-2") {
		t.Fatalf("release: exit %d\n%s%s", code, out, errOut)
	}
	if r := app.wait(t); r.Header.Get("Hookwarden-Event-Id") != "d-2" || r.Header.Get("Idempotency-Key") != "gh:d-2" {
		t.Fatalf("released delivery: %v", r.Header)
	}
	if h := heldList(t, "--db", c.db(), "--source", "gh"); len(h) != 1 || h[0].ReleasedAt == nil || h[0].ReleasedEventID != "d-2" {
		t.Fatalf("after release: %+v", h)
	}
	// The release is in the audit log, shown with the event it released.
	if code, out, errOut := runBin(t, "events", "show", "gh", "d-2", "--json", "--db", c.db()); code != 0 ||
		!strings.Contains(out, `"action":"release"`) || !strings.Contains(out, `"origin":"cli"`) {
		t.Fatalf("events show after release: exit %d, want an audit entry for the release\n%s%s", code, out, errOut)
	}

	// No event id at all: no_event_id; release needs --event-id.
	if got := c.post(t, "gh", gh, []byte(`{"no":"delivery header"}`), "", nil); got.Status != "quarantined" {
		t.Fatalf("no id: %+v", got)
	}
	if got := c.metric(t, `hookwarden_quarantined_total{reason="no_event_id",source="gh"}`); got != 1 {
		t.Errorf("quarantined_total no_event_id gh: %d, want 1", got)
	}
	noID := heldList(t, "--db", c.db(), "--source", "gh")[0]
	if noID.Reason != "no_event_id" || noID.CandidateEventID != "" {
		t.Fatalf("no id held: %+v", noID)
	}
	nid := strconv.FormatInt(noID.ReceiptID, 10)
	if code, _, errOut := runBin(t, "quarantine", "release", nid, "--config", c.cfg); code != 2 || !strings.Contains(errOut, "--event-id") {
		t.Fatalf("release without --event-id: exit %d %s, want 2", code, errOut)
	}
	if code, out, errOut := runBin(t, "quarantine", "release", nid, "--event-id", "manual-1", "--config", c.cfg); code != 0 {
		t.Fatalf("release --event-id: exit %d\n%s%s", code, out, errOut)
	}
	if r := app.wait(t); r.Header.Get("Hookwarden-Event-Id") != "manual-1" {
		t.Fatalf("released delivery: %v", r.Header)
	}

	// Drop the hh one.
	hh := heldList(t, "--db", c.db(), "--source", "hh")
	if len(hh) != 1 {
		t.Fatalf("hh held: %+v", hh)
	}
	did := strconv.FormatInt(hh[0].ReceiptID, 10)
	// A copy no serve owns is not changed without --write.
	cp := filepath.Join(t.TempDir(), "copy.db")
	if code, _, errOut := runBin(t, "backup", cp, "--db", c.db()); code != 0 {
		t.Fatalf("backup: exit %d %s", code, errOut)
	}
	for _, args := range [][]string{{"drop", did}, {"release", did, "--event-id", "x"}} {
		if code, _, errOut := runBin(t, append(append([]string{"quarantine"}, args...), "--db", cp)...); code != 2 || !strings.Contains(errOut, "--write") {
			t.Fatalf("quarantine %v on a copy: exit %d %s, want 2 naming --write", args, code, errOut)
		}
	}
	if code, _, errOut := runBin(t, "quarantine", "drop", did, "--config", c.cfg); code != 0 {
		t.Fatalf("drop: exit %d %s", code, errOut)
	}
	if code, _, _ := runBin(t, "quarantine", "show", did, "--db", c.db()); code != 1 {
		t.Fatalf("show after drop: exit %d, want 1", code)
	}
	if h := heldList(t, "--db", c.db(), "--source", "hh"); len(h) != 0 {
		t.Fatalf("after drop: %+v", h)
	}
	adb, err := sql.Open("sqlite", "file:"+c.db()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer adb.Close()
	var drops int
	if err := adb.QueryRow(`SELECT count(*) FROM audit WHERE action = 'drop' AND origin = 'cli' AND receipt_id = ?`, hh[0].ReceiptID).Scan(&drops); err != nil || drops != 1 {
		t.Fatalf("audit entries for the drop: %d (%v), want 1", drops, err)
	}
}

// 64 copies of one signed body under 64 ids at once: one is delivered.
func TestConcurrentBodyReplaysThroughTheBinary(t *testing.T) {
	app := newSink(t)
	c := newDoorChild(t, app.URL)
	c.start()
	defer c.stop()
	gh := signature.Params{Scheme: "github", Secrets: []string{ghSecret}}
	body := []byte(`{"action":"published","release":{"id":7}}`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]int{}
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := c.post(t, "gh", gh, body, fmt.Sprintf("d-%d", i), nil)
			mu.Lock()
			got[fmt.Sprintf("%d %s", a.Code, a.Status)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if got["200 accepted"] != 1 || got["200 quarantined"] != 63 {
		t.Fatalf("answers %v, want 1 accepted and 63 quarantined", got)
	}
	app.wait(t)
	time.Sleep(1500 * time.Millisecond)
	if n := app.count(); n != 1 {
		t.Fatalf("deliveries: %d, want 1", n)
	}
	if h := heldList(t, "--db", c.db()); len(h) != 1 || h[0].Repeats != 62 {
		t.Fatalf("held: %+v, want one request with 62 repeats", h)
	}
}

// TestCheckWarnsTypeFilterOnUnsignedHeader: github's event type comes from
// X-GitHub-Event, which its signature does not cover.
func TestCheckWarnsTypeFilterOnUnsignedHeader(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	// Port 0: check binds the listen addresses, and 8080 may be taken here.
	doc := fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
sources:
  - name: gh
    scheme: github
    secrets: ["s3cret"]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/", types: ["release"] }]
  - name: std
    scheme: standard
    secrets: [%q]
    destinations: [{ name: app, url: "http://127.0.0.1:3000/", types: ["invoice.*"] }]
`, filepath.Join(dir, "hw.db"), testSecret)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runBin(t, "check", "--config", cfg)
	if code != 0 {
		t.Fatalf("check: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "sources[0].destinations[0].types") || !strings.Contains(out, "X-GitHub-Event") || !strings.Contains(out, "warning") {
		t.Fatalf("check output lacks the warning:\n%s", out)
	}
	if strings.Contains(out, "sources[1].destinations[0].types") {
		t.Fatalf("check warns about a type from the signed body:\n%s", out)
	}
}

// forgeMailgun pastes the signature block of a signed Mailgun body onto
// other event data, as an attacker holding one captured request would.
func forgeMailgun(t *testing.T, signed []byte, event string) []byte {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(signed, &obj); err != nil {
		t.Fatal(err)
	}
	obj["event-data"] = json.RawMessage(fmt.Sprintf(`{"id":"forged-%s","event":%q}`, event, event))
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (c *child) postRaw(t *testing.T, name string, body []byte) answerT {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+c.hook+"/hooks/"+name, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return do(t, req)
}

// TestMailgunTokenSurvivesRestartAndReload is issue 13 point 3: the seen
// tokens are in the store, so neither a restart nor a SIGHUP forgets one.
func TestMailgunTokenSurvivesRestartAndReload(t *testing.T) {
	app := newSink(t)
	c := newDoorChild(t, app.URL)
	c.start()
	mg := signature.Params{Scheme: "mailgun", Secrets: []string{mgSecret}}
	sign := func(token, id string) []byte {
		_, b, err := signature.SignBody(mg, []byte(fmt.Sprintf(`{"event-data":{"id":%q,"event":"delivered"}}`, id)), time.Now(), token)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := sign("tok-restart-0123456789abcdef0123456789abcdef0123", "ev-1")
	if got := c.postRaw(t, "mg", first); got.Status != "accepted" {
		t.Fatalf("first: %+v", got)
	}
	app.wait(t)
	c.stop()
	c.start()
	defer c.stop()
	if got := c.postRaw(t, "mg", forgeMailgun(t, first, "failed")); got.Code != 401 || got.Status != "unauthorized" {
		t.Fatalf("captured block on forged data after a restart: %+v, want 401", got)
	}
	if got := c.postRaw(t, "mg", first); got.Code != 200 || got.Status != "duplicate" {
		t.Fatalf("exact resend: %+v, want 200 duplicate", got)
	}

	second := sign("tok-reload-0123456789abcdef0123456789abcdef01234", "ev-2")
	if got := c.postRaw(t, "mg", second); got.Status != "accepted" {
		t.Fatalf("second: %+v", got)
	}
	app.wait(t)
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Whether or not the reload has finished, the forged copy is refused.
	for range 5 {
		if got := c.postRaw(t, "mg", forgeMailgun(t, second, "opened")); got.Code != 401 {
			t.Fatalf("captured block on forged data after SIGHUP: %+v, want 401", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := c.metric(t, `hookwarden_unauthorized_total{reason="replayed",source="mg"}`); got != 6 {
		t.Errorf("unauthorized_total replayed: %d, want 6 since the restart", got)
	}
	time.Sleep(1500 * time.Millisecond)
	if got := fmt.Sprint(eventIDs(app)); got != "[mg/ev-1:delivered mg/ev-2:delivered]" {
		t.Fatalf("delivered %s, want only the genuine events", got)
	}

	// An expired token row goes with prune; live ones stay.
	w, err := sql.Open("sqlite", "file:"+c.db()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Exec(`INSERT INTO seen_tokens (source, token_sha256, body_sha256, expires_at) VALUES ('mg', x'01', x'02', '2020-01-01T00:00:00.000000Z')`); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runBin(t, "prune", "--config", c.cfg); code != 0 {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errOut)
	}
	var expired, live int
	if err := w.QueryRow(`SELECT count(*) FILTER (WHERE expires_at < '2021'), count(*) FILTER (WHERE expires_at > '2021') FROM seen_tokens`).Scan(&expired, &live); err != nil {
		t.Fatal(err)
	}
	if expired != 0 || live != 2 {
		t.Fatalf("after prune: %d expired and %d live token rows, want 0 and 2", expired, live)
	}
}
