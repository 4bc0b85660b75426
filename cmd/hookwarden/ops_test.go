package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/sqlitestore"
)

// runBin runs the real binary once (TestMain built it) and returns its exit
// code and output.
func runBin(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "HOOKWARDEN_CONFIG=")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	return code, o.String(), e.String()
}

func (c *child) db() string { return filepath.Join(filepath.Dir(c.cfg), "hw.db") }

// switchSink is a destination app whose answer the test changes ("the fix").
type switchSink struct {
	*httptest.Server
	status  atomic.Int32
	mu      sync.Mutex
	keys    []string
	attempt []string
	arrived chan time.Time
}

func newSwitchSink(t *testing.T, status int) *switchSink {
	s := &switchSink{arrived: make(chan time.Time, 100)}
	s.status.Store(int32(status))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		s.attempt = append(s.attempt, r.Header.Get("Hookwarden-Attempt"))
		s.mu.Unlock()
		w.WriteHeader(int(s.status.Load()))
		s.arrived <- time.Now()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *switchSink) wait(t *testing.T) time.Time {
	t.Helper()
	select {
	case at := <-s.arrived:
		return at
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
		return time.Time{}
	}
}

func deadLetters(t *testing.T, db string) []hookwarden.DeadLetter {
	t.Helper()
	code, out, errOut := runBin(t, "dead", "list", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("dead list: exit %d: %s", code, errOut)
	}
	var dl []hookwarden.DeadLetter
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var d hookwarden.DeadLetter
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("dead list --json line %q: %v", line, err)
		}
		dl = append(dl, d)
	}
	return dl
}

// TestPoisonReplayedAfterFixThroughTheBinary: a poison event is dead-lettered,
// listed by `dead list --json`, replayed (three strikes need --force) by the
// CLI while serve runs, picked up within the poll interval, and delivered once
// more with the same Idempotency-Key.
func TestPoisonReplayedAfterFixThroughTheBinary(t *testing.T) {
	app := newSwitchSink(t, http.StatusUnprocessableEntity)
	c := newChild(t, app.URL)
	c.start()
	defer c.stop()

	url := "http://" + c.hook + "/hooks/std"
	if got := do(t, signed(t, url, "msg_poison", []byte(`{"type":"order.created"}`), time.Now(), testSecret)); got.Status != "accepted" {
		t.Fatalf("post: %+v", got)
	}
	app.wait(t)
	var dl []hookwarden.DeadLetter
	eventually(t, "dead letter listed", func() bool { dl = deadLetters(t, c.db()); return len(dl) == 1 })
	if d := dl[0]; d.Source != "std" || d.EventID != "msg_poison" || d.Destination != "std/app" || d.DeadCount != 1 ||
		!strings.Contains(d.LastError, "422") {
		t.Fatalf("dead letter: %+v", d)
	}

	// Strikes two and three: replayed while the app still refuses.
	for strike := 2; strike <= 3; strike++ {
		if code, out, errOut := runBin(t, "replay", "std", "msg_poison", "--config", c.cfg); code != 0 {
			t.Fatalf("replay %d: exit %d\n%s%s", strike, code, out, errOut)
		}
		app.wait(t)
		eventually(t, "dead again", func() bool {
			dl = deadLetters(t, c.db())
			return len(dl) == 1 && dl[0].DeadCount == strike
		})
	}
	code, _, errOut := runBin(t, "replay", "std", "msg_poison", "--config", c.cfg)
	if code != 1 || !strings.Contains(errOut, "--force") || !strings.Contains(errOut, "3 times") {
		t.Fatalf("fourth replay without --force: exit %d, stderr %q; want 1 and a hint at --force", code, errOut)
	}
	time.Sleep(1500 * time.Millisecond) // more than a poll: a wrong replay would show up
	app.mu.Lock()
	n := len(app.keys)
	app.mu.Unlock()
	if n != 3 {
		t.Fatalf("deliveries after a refused replay: %d, want 3", n)
	}

	// The fix; then replay the dead letters with --force.
	app.status.Store(http.StatusNoContent)
	code, out, errOut := runBin(t, "replay", "--dead", "--source", "std", "--force", "--config", c.cfg)
	replayedAt := time.Now()
	if code != 0 || !strings.Contains(out, "replayed 1 of 1 job") {
		t.Fatalf("replay --dead --force: exit %d\n%s%s", code, out, errOut)
	}
	arrived := app.wait(t)
	if lag := arrived.Sub(replayedAt); lag > 2500*time.Millisecond {
		t.Errorf("the running serve took %s to pick up the replay, want about a second (its poll)", lag)
	}
	eventually(t, "delivered", func() bool {
		_, out, _ := runBin(t, "events", "show", "std", "msg_poison", "--json", "--db", c.db())
		var d hookwarden.EventDetail
		return json.Unmarshal([]byte(out), &d) == nil && d.Status == hookwarden.StatusDelivered
	})
	if dl := deadLetters(t, c.db()); len(dl) != 0 {
		t.Fatalf("dead letters after the delivery: %+v", dl)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	for i, k := range app.keys {
		if k != "std:msg_poison" {
			t.Errorf("delivery %d: Idempotency-Key %q, want std:msg_poison on every attempt and replay", i, k)
		}
	}
	if fmt.Sprint(app.attempt) != "[1 1 1 1]" {
		t.Errorf("Hookwarden-Attempt per delivery %v, want [1 1 1 1]: each replay gets the full max_attempts", app.attempt)
	}

	// The whole history is in events show.
	code, out, _ = runBin(t, "events", "show", "std", "msg_poison", "--db", c.db())
	if code != 0 || !strings.Contains(out, "delivered") || !strings.Contains(out, "dead-lettered 3 times") ||
		!strings.Contains(out, "HTTP 422") || !strings.Contains(out, "HTTP 204") {
		t.Fatalf("events show: exit %d\n%s", code, out)
	}
}

// TestGapsCoverKill9AndIgnoreCleanRestart: a kill -9 and a restart 3 s later
// is one window of about 3 s (its start is the last heartbeat, at most 2 s
// early); a clean stop and immediate start adds none.
func TestGapsCoverKill9AndIgnoreCleanRestart(t *testing.T) {
	app := newSink(t)
	c := newChild(t, app.URL)
	c.start()
	time.Sleep(2500 * time.Millisecond) // at least one heartbeat
	killedAt := time.Now()
	c.kill9()
	time.Sleep(3 * time.Second)
	restartAt := time.Now()
	c.start()
	c.stop() // clean stop...
	c.start()
	defer c.stop() // ...and an immediate start

	code, out, errOut := runBin(t, "gaps", "--json", "--db", c.db())
	if code != 0 {
		t.Fatalf("gaps: exit %d: %s", code, errOut)
	}
	var outages []struct {
		Kind          string  `json:"kind"`
		LengthSeconds float64 `json:"length_seconds"`
		Crash         bool    `json:"crash"`
		Open          bool    `json:"open"`
		Start, End    time.Time
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var o struct {
			Kind          string  `json:"kind"`
			LengthSeconds float64 `json:"length_seconds"`
			Crash         bool    `json:"crash"`
			Open          bool    `json:"open"`
			Start, End    time.Time
		}
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("gaps --json line %q: %v", line, err)
		}
		if o.Kind == "outage" {
			outages = append(outages, o)
		}
	}
	if len(outages) != 1 {
		t.Fatalf("outages: %+v\nwant exactly one (the kill -9); the clean restart must not show", outages)
	}
	o := outages[0]
	down := restartAt.Sub(killedAt).Seconds()
	if !o.Crash || o.Open || o.LengthSeconds < down-0.25 || o.LengthSeconds > down+2.5 {
		t.Fatalf("outage %+v: want a crash window of %.2fs (up to one 2s heartbeat more)", o, down)
	}
	if o.Start.After(killedAt) || o.End.Before(restartAt) {
		t.Fatalf("window %s..%s does not cover the kill at %s and the restart at %s", o.Start, o.End, killedAt, restartAt)
	}

	code, out, _ = runBin(t, "gaps", "--db", c.db())
	if code != 0 || !strings.Contains(out, "crash") || !strings.Contains(out, "? (no configuration)") {
		t.Fatalf("gaps (human, no config): exit %d\n%s", code, out)
	}
	code, out, _ = runBin(t, "gaps", "--config", c.cfg)
	if code != 0 || !strings.Contains(out, "crash") || strings.Contains(out, "no configuration") {
		t.Fatalf("gaps with the configuration: exit %d\n%s", code, out)
	}
}

// TestBackupUnderLoadIsConsistent: a backup taken through the binary while
// serve ingests passes integrity_check, and events show --db on it gives the
// raw body byte for byte.
func TestBackupUnderLoadIsConsistent(t *testing.T) {
	app := newSink(t)
	c := newChild(t, app.URL)
	c.start()
	defer c.stop()
	url := "http://" + c.hook + "/hooks/std"
	body := []byte("{\"type\":\"x\", \"note\":\"caf\u00e9 \\u00e9\\n\",  \"tabs\":\"\t\"}\n  ")
	if got := do(t, signed(t, url, "msg_exact", body, time.Now(), testSecret)); got.Status != "accepted" {
		t.Fatalf("post: %+v", got)
	}

	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var acked atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				req := signed(t, url, fmt.Sprintf("load_%d_%d", w, i), []byte(`{"type":"load"}`), time.Now(), testSecret)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == 200 {
						acked.Add(1)
					}
				}
			}
		})
	}
	eventually(t, "load", func() bool { return acked.Load() > 50 })
	dest := filepath.Join(t.TempDir(), "backup.db")
	before := acked.Load()
	code, out, errOut := runBin(t, "backup", dest, "--config", c.cfg)
	during := acked.Load() - before
	stopLoad()
	wg.Wait()
	if code != 0 || !strings.Contains(out, "quick_check ok") {
		t.Fatalf("backup: exit %d\n%s%s", code, out, errOut)
	}
	if during == 0 {
		t.Error("no webhook was acknowledged while the backup ran")
	}

	ro, err := sqlitestore.Open(context.Background(), dest, sqlitestore.Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var check string
	var n int
	if err := ro.DB().QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check %q %v", check, err)
	}
	ro.DB().QueryRow(`SELECT count(*) FROM events`).Scan(&n)
	ro.Close()
	if n < 50 {
		t.Fatalf("backup holds %d events, want the load's", n)
	}

	code, out, errOut = runBin(t, "events", "show", "std", "msg_exact", "--body", "--db", dest)
	if code != 0 || out != string(body) {
		t.Fatalf("events show --body on the backup: exit %d %s\n got %q\nwant %q", code, errOut, out, body)
	}
	code, _, errOut = runBin(t, "backup", dest, "--config", c.cfg)
	if code != 2 || !strings.Contains(errOut, "never overwrites") {
		t.Fatalf("backup onto an existing file: exit %d %q, want 2", code, errOut)
	}
	// The read-only commands on the copy, without a configuration.
	for _, args := range [][]string{{"events", "list"}, {"dead", "list"}, {"stats"}, {"stats", "--json"},
		{"gaps"}, {"events", "show", "std", "msg_exact"}} {
		if code, out, errOut := runBin(t, append(args, "--db", dest)...); code != 0 || out == "" {
			t.Errorf("%v --db backup: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	// A filter may match nothing at the instant of the copy (the sink is
	// fast): no lines then, and every line there is must be a pending event.
	code, out, errOut = runBin(t, "events", "list", "--json", "--status", "pending", "--db", dest)
	if code != 0 {
		t.Fatalf("events list --json --status pending --db backup: exit %d %s", code, errOut)
	}
	for line := range strings.Lines(out) {
		var ev struct{ Status string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Status != "pending" {
			t.Errorf("events list --json --status pending: line %q (%v)", line, err)
		}
	}
}

// TestPrunedPayloadStillDeduplicates: retention removes the body of a
// delivered event (on a clock 31 days ahead, no sleeping), and the running
// receiver still answers a late copy "duplicate" and delivers nothing.
func TestPrunedPayloadStillDeduplicates(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "")
	if got := a.post("msg_old", `{"type":"x","n":1}`); got.Status != "accepted" {
		t.Fatalf("post: %+v", got)
	}
	app.wait(t)
	eventually(t, "delivered", func() bool {
		return a.count(`SELECT count(*) FROM jobs WHERE state = 'delivered'`) == 1
	})

	// A second store on the same file with its clock 31 days on: what the
	// hourly timer will do a month from now.
	later := func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }
	s, err := sqlitestore.Open(context.Background(), a.dbPath, sqlitestore.Options{Now: later, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Prune(context.Background(), hookwarden.PruneOptions{Retention: hookwarden.Retention{
		Payloads: a.cfg.Retention.Payloads.D(), Claims: a.cfg.Retention.Claims.D()}})
	s.Close()
	if err != nil || res.PayloadsPruned != 1 || res.EventsDeleted != 0 {
		t.Fatalf("prune: %+v %v; want one body pruned, no claim deleted", res, err)
	}

	if got := a.post("msg_old", `{"type":"x","n":1}`); got.Code != 200 || got.Status != "duplicate" {
		t.Fatalf("late copy of a pruned-payload event: %+v, want 200 duplicate", got)
	}
	time.Sleep(300 * time.Millisecond)
	if n := app.count(); n != 1 {
		t.Fatalf("deliveries: %d, want 1", n)
	}
	code, out, _ := runMain(t, "events", "show", "std", "msg_old", "--db", a.dbPath)
	if code != 0 || !strings.Contains(out, "payload\tpruned") && !strings.Contains(out, "pruned at") {
		t.Fatalf("events show of a pruned event: exit %d\n%s", code, out)
	}
	code, _, errOut := runMain(t, "replay", "std", "msg_old", "--db", a.dbPath)
	if code != 1 || !strings.Contains(errOut, "payload was pruned") {
		t.Fatalf("replay of a pruned event: exit %d %q, want 1 and a clear reason", code, errOut)
	}
}

// TestServePrunesOnItsTimer: the retention pass serve runs every hour.
func TestServePrunesOnItsTimer(t *testing.T) {
	app := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	a := startAppYAML(t, fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
retention: { payloads: 1ms }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations: [{ name: app, url: %q }]
`, db, testSecret, app.URL), db)
	a.post("msg_1", `{"type":"x"}`)
	app.wait(t)
	eventually(t, "payload pruned by the serve-side pass", func() bool {
		a.pruneOnce(context.Background())
		return a.count(`SELECT count(*) FROM events WHERE pruned_at IS NOT NULL`) == 1 &&
			a.count(`SELECT count(*) FROM receipts`) == 0
	})
}

func TestAdminAPIThroughTheApp(t *testing.T) {
	app := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	a := startAppYAML(t, fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0", token: "t0ken" }
database: { path: %q }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    expect_within: 1h
    destinations: [{ name: app, url: %q }]
`, db, testSecret, app.URL), db)
	a.post("msg_1", `{"type":"x"}`)
	app.wait(t)
	get := func(path, token string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", "http://"+a.AdminAddr()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	for _, p := range []string{"/api/events", "/api/events/std/msg_1", "/api/dead", "/api/gaps", "/api/stats"} {
		if code, _ := get(p, ""); code != 401 {
			t.Errorf("%s without token: %d, want 401", p, code)
		}
		if code, _ := get(p, "t0ken"); code != 200 {
			t.Errorf("%s with token: %d, want 200", p, code)
		}
	}
	if code, _ := get("/healthz", ""); code != 200 {
		t.Errorf("/healthz without token: %d, want 200", code)
	}
	_, v := get("/api/stats", "t0ken")
	if src := v["sources"].([]any)[0].(map[string]any); src["source"] != "std" || src["accepted"] != 1.0 {
		t.Errorf("stats: %v", v)
	}

	// A replay through the API wakes the worker at once.
	req, _ := http.NewRequest("POST", "http://"+a.AdminAddr()+"/api/replay", strings.NewReader(`{"source":"std","event_ids":["msg_1"]}`))
	req.Header.Set("Authorization", "Bearer t0ken")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("replay: %d", resp.StatusCode)
	}
	r := app.wait(t)
	if r.Header.Get("Idempotency-Key") != "std:msg_1" {
		t.Fatalf("replayed with key %q", r.Header.Get("Idempotency-Key"))
	}
}

func TestOperatorCommandsUsageAndOutput(t *testing.T) {
	app := newSink(t, 422)
	a := startApp(t, app.URL, "")
	a.post("msg_a", `{"type":"invoice.paid"}`)
	a.post("msg_a", `{"type":"invoice.paid"}`)
	app.wait(t)
	eventually(t, "dead letter", func() bool { return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`) == 1 })
	db := a.dbPath

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"events", "--db", db}, 2, "subcommand"},
		{[]string{"events", "list", "--status", "weird", "--db", db}, 2, "--status"},
		{[]string{"events", "list", "--since", "soon", "--db", db}, 2, "--since"},
		{[]string{"events", "show", "std", "--db", db}, 2, "accepts 2 arg"},
		{[]string{"events", "show", "std", "nope", "--db", db}, 1, "no event"},
		{[]string{"replay", "--db", db}, 2, "want SOURCE EVENT_ID"},
		{[]string{"replay", "std", "x", "--dead", "--db", db}, 2, "not both"},
		{[]string{"replay", "std", "x", "--since", "1h", "--db", db}, 2, "--since goes with --dead"},
		{[]string{"replay", "std", "nope", "--db", db}, 1, "no such event"},
		{[]string{"prune", "--db", db}, 2, "needs the configuration"},
		{[]string{"events", "list", "--db", filepath.Join(t.TempDir(), "missing.db")}, 1, "no database at "},
		{[]string{"replay", "--dead", "--db", filepath.Join(t.TempDir(), "missing.db")}, 1, "no database at "},
	} {
		code, out, errOut := runMain(t, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: exit %d, output %q; want exit %d mentioning %q", c.args, code, out+errOut, c.code, c.want)
		}
	}

	code, out, _ := runMain(t, "events", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "msg_a") || !strings.Contains(out, "dead") || !strings.Contains(out, "1 dead letter") {
		t.Errorf("events list:\n%s", out)
	}
	code, out, _ = runMain(t, "events", "list", "--json", "--type", "invoice.*", "--db", db)
	var ev hookwarden.EventSummary
	if code != 0 || json.Unmarshal([]byte(out), &ev) != nil || ev.EventID != "msg_a" || ev.Receipts != 2 || ev.Status != "dead" {
		t.Errorf("events list --json: %q", out)
	}
	code, out, _ = runMain(t, "dead", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "std/app") || !strings.Contains(out, "HTTP 422") {
		t.Errorf("dead list:\n%s", out)
	}
	code, out, _ = runMain(t, "stats", "--db", db)
	if code != 0 || !strings.Contains(out, "std/app") || !strings.Contains(out, "DUPLICATES") {
		t.Errorf("stats:\n%s", out)
	}
	code, out, errOut := runMain(t, "events", "list", "--limit", "1", "--status", "quarantined", "--db", db)
	if code != 0 || !strings.Contains(out, "no quarantined") {
		t.Errorf("quarantined: %d %s %s", code, out, errOut)
	}
}
