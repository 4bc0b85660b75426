package main

// Flow control through the real binary and a real sink (issue 17): rate,
// order_by, pause_after, and manual pause and resume from the CLI and the
// admin API across a restart.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// newFlowChild is a serve process with source std delivering to destURL as
// std/app, with destYAML (indented for the destination) as its flow keys.
func newFlowChild(t *testing.T, destURL, destYAML string) *child {
	t.Helper()
	dir := t.TempDir()
	c := &child{t: t, cfg: filepath.Join(dir, "config.yaml"), hook: freeAddr(t), adm: freeAddr(t)}
	c.writeFlowConfig(destURL, destYAML)
	t.Cleanup(func() {
		if c.cmd != nil && c.cmd.ProcessState == nil {
			c.stop()
		}
	})
	return c
}

func (c *child) writeFlowConfig(destURL, destYAML string) {
	c.t.Helper()
	doc := fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: %q }
log: { level: warn }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: app
        url: %q
        timeout: 10s
%s`, c.hook, c.adm, c.db(), testSecret, destURL, destYAML)
	if err := os.WriteFile(c.cfg, []byte(doc), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// postMany posts events msg_0..msg_{n-1} with body(i), 8 at a time.
func (c *child) postMany(t *testing.T, n int, body func(i int) string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, n)
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				req := signed(t, "http://"+c.hook+"/hooks/std", fmt.Sprint("msg_", i), []byte(body(i)), time.Now(), testSecret)
				if a := do(t, req); a.Status != "accepted" {
					errs <- fmt.Sprintf("post %d: %+v", i, a)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// destState reads std/app's state from GET /api/destinations.
func (c *child) destState(t *testing.T) hookwarden.DestinationState {
	t.Helper()
	resp, err := http.Get("http://" + c.adm + "/api/destinations")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct{ Items []hookwarden.DestinationState }
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 200 || len(p.Items) != 1 {
		t.Fatalf("GET /api/destinations: %d %+v %v", resp.StatusCode, p, err)
	}
	return p.Items[0]
}

// apiFlow posts pause or resume for std/app to the admin API.
func (c *child) apiFlow(t *testing.T, action string) hookwarden.DestinationState {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+c.adm+"/api/destinations/std/app/"+action, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st hookwarden.DestinationState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %v", action, resp.StatusCode, err)
	}
	return st
}

// waitFor polls cond for up to a minute: generous, for a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// flowSink records every request's event id, attempt and arrival time, and
// answers with answer (nil: 204).
type flowSink struct {
	*httptest.Server
	mu     sync.Mutex
	got    []flowReq
	answer func(r flowReq, seen []flowReq) int
}

type flowReq struct {
	id, key string
	attempt int
	at      time.Time
	status  int
}

func newFlowSink(t *testing.T, answer func(r flowReq, seen []flowReq) int) *flowSink {
	s := &flowSink{answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Customer string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		var n int
		fmt.Sscan(r.Header.Get("Hookwarden-Attempt"), &n)
		req := flowReq{id: r.Header.Get("Hookwarden-Event-Id"), key: body.Customer, attempt: n, at: time.Now(), status: 204}
		s.mu.Lock()
		if s.answer != nil {
			req.status = s.answer(req, s.got)
		}
		s.got = append(s.got, req)
		s.mu.Unlock()
		if req.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "2")
		}
		w.WriteHeader(req.status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *flowSink) requests() []flowReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// delivered is the number of distinct events answered 2xx.
func (s *flowSink) delivered() int {
	ok := map[string]bool{}
	for _, r := range s.requests() {
		if r.status < 300 {
			ok[r.id] = true
		}
	}
	return len(ok)
}

// TestFlowRateThroughTheBinary: rate 20/s with 1,000 due jobs: in any
// second, no more than 20 attempts plus the bucket's 20 start, for 10 s;
// then, the rate lifted by a reload (SIGHUP), every job is delivered.
func TestFlowRateThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 10 s")
	}
	s := newFlowSink(t, nil)
	c := newFlowChild(t, s.URL, "        concurrency: 64\n        rate: 20/s\n")
	c.start()
	c.postMany(t, 1000, func(i int) string { return fmt.Sprintf(`{"type":"t","n":%d}`, i) })
	time.Sleep(10 * time.Second) // the window observed
	db := c.db()
	// Attempts started, by the attempt log: a sliding one-second window.
	var starts []time.Time
	raw := MustOpenRaw(t, db, "mode=ro")
	defer raw.Close()
	rows, err := raw.Query(`SELECT started_at FROM attempts ORDER BY started_at`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var at string
		rows.Scan(&at)
		ts, err := time.Parse("2006-01-02T15:04:05.000000Z", at)
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, ts)
	}
	rows.Close()
	if len(starts) == 0 || len(starts) >= 1000 {
		t.Fatalf("%d attempts in the 10 s, want some and far from all 1,000", len(starts))
	}
	worst := 0
	for i := range starts {
		j := i
		for j < len(starts) && starts[j].Sub(starts[i]) < time.Second {
			j++
		}
		worst = max(worst, j-i)
	}
	// The bucket bounds leases; an attempt starts a moment after its lease,
	// and a lag of up to 50 ms under load is worth one more token.
	if worst > 20+20+1 {
		t.Fatalf("%d attempts started within one second, want at most 20/s + the bucket of 20", worst)
	}
	t.Logf("%d attempts in the first 10 s, at most %d in one second", len(starts), worst)
	c.writeFlowConfig(s.URL, "        concurrency: 64\n")
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all 1,000 delivered after the rate was lifted", func() bool { return s.delivered() == 1000 })
	for _, r := range s.requests() {
		if r.attempt != 1 {
			t.Fatalf("event %s delivered at attempt %d: waiting for the rate must not spend attempts", r.id, r.attempt)
		}
	}
}

// TestFlowOrderThroughTheBinary: order_by over 3 keys x 50 events, the
// sink failing the head of one key twice: that key's events arrive in
// receive order, the failing head first and again until it succeeds, and
// the other keys go on while it is blocked (shown in blocked_keys).
func TestFlowOrderThroughTheBinary(t *testing.T) {
	const perKey = 50
	keys := []string{"cus_a", "cus_b", "cus_c"}
	fails := 0
	s := newFlowSink(t, func(r flowReq, _ []flowReq) int {
		if r.id == "msg_0" && fails < 2 {
			fails++
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	c := newFlowChild(t, s.URL, "        concurrency: 8\n        order_by: json:customer\n        backoff: { initial: 1s, max: 2s }\n")
	c.start()
	// msg_0 (cus_a) first, alone, so it is its key's head; then the rest
	// in order, one at a time: receive order is msg number order.
	for i := range 3 * perKey {
		req := signed(t, "http://"+c.hook+"/hooks/std", fmt.Sprint("msg_", i),
			[]byte(fmt.Sprintf(`{"type":"t","customer":%q}`, keys[i%3])), time.Now(), testSecret)
		if a := do(t, req); a.Status != "accepted" {
			t.Fatalf("post %d: %+v", i, a)
		}
	}
	sawBlocked := false
	waitFor(t, "every event delivered", func() bool {
		if !sawBlocked {
			for _, k := range c.destState(t).BlockedKeys {
				sawBlocked = sawBlocked || (k.Key == "cus_a" && k.HeadEventID == "msg_0" && k.LastError != "")
			}
		}
		return s.delivered() == 3*perKey
	})
	reqs := s.requests()
	var headOK time.Time
	perKeySeq := map[string][]int{}
	for _, r := range reqs {
		var n int
		fmt.Sscanf(r.id, "msg_%d", &n)
		perKeySeq[r.key] = append(perKeySeq[r.key], n)
		if r.id == "msg_0" && r.status < 300 {
			headOK = r.at
		}
	}
	for _, k := range keys {
		seq := perKeySeq[k]
		if !slices.IsSorted(seq) {
			t.Errorf("key %s arrived out of receive order: %v", k, seq)
		}
	}
	if want := []int{0, 0, 0, 3}; !slices.Equal(perKeySeq["cus_a"][:4], want) {
		t.Errorf("cus_a starts %v, want its head thrice (two failures) before the next", perKeySeq["cus_a"][:4])
	}
	// The other keys were not held behind cus_a's head: they had events
	// delivered while it was failing.
	var firstFail time.Time
	for _, r := range reqs {
		if r.id == "msg_0" {
			firstFail = r.at
			break
		}
	}
	for _, k := range keys[1:] {
		during := 0
		for _, r := range reqs {
			if r.key == k && r.at.After(firstFail) && r.at.Before(headOK) {
				during++
			}
		}
		if during == 0 {
			t.Errorf("key %s had no delivery while cus_a was blocked", k)
		}
	}
	if !sawBlocked {
		t.Error("GET /api/destinations never listed cus_a as blocked by msg_0")
	}
}

// TestFlowPauseAfterThroughTheBinary: pause_after 5 with the sink down for
// a minute:
// the destination pauses, probes one job at most every backoff.max, no
// job is dead-lettered though max_attempts is 3, the gauge says paused;
// when the sink is back the probe resumes it and every job is delivered,
// none beyond its attempts.
func TestFlowPauseAfterThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("takes over a minute")
	}
	var down atomic.Bool
	down.Store(true)
	s := newFlowSink(t, func(flowReq, []flowReq) int {
		if down.Load() {
			return http.StatusBadGateway
		}
		return http.StatusNoContent
	})
	c := newFlowChild(t, s.URL, "        concurrency: 4\n        max_attempts: 3\n        pause_after: 5\n        backoff: { initial: 50ms, max: 5s }\n")
	c.start()
	c.postMany(t, 20, func(i int) string { return fmt.Sprintf(`{"type":"t","n":%d}`, i) })
	waitFor(t, "the automatic pause", func() bool {
		st := c.destState(t)
		if st.Paused {
			if *st.Pause != hookwarden.PauseAuto || st.ConsecutiveFailures < 5 || st.NextProbeAt == nil {
				t.Fatalf("paused state %+v", st)
			}
		}
		return st.Paused
	})
	before := len(s.requests())
	time.Sleep(60 * time.Second) // the app stays down
	if v := c.metric(t, `hookwarden_destination_paused{destination="std/app"}`); v != 1 {
		t.Errorf("hookwarden_destination_paused = %d after a minute paused, want 1", v)
	}
	if dl := deadLetters(t, c.db()); len(dl) != 0 {
		t.Fatalf("%d dead letters during the outage, want none: %+v", len(dl), dl)
	}
	probes := s.requests()[before:]
	if len(probes) == 0 {
		t.Fatal("no probe in a minute with backoff.max 5s")
	}
	for i := 1; i < len(probes); i++ {
		// The store spaces them by its clock; allow for the delivery's own time.
		if gap := probes[i].at.Sub(probes[i-1].at); gap < 4800*time.Millisecond {
			t.Fatalf("probes %d and %d %s apart, want one per backoff.max (5s)", i-1, i, gap)
		}
	}
	t.Logf("paused after %d attempts; %d probes in 60 s", before, len(probes))
	down.Store(false)
	waitFor(t, "all 20 delivered after the app came back", func() bool { return s.delivered() == 20 })
	for _, r := range s.requests() {
		if r.attempt > 3 {
			t.Errorf("event %s attempted as number %d, beyond max_attempts 3", r.id, r.attempt)
		}
	}
	if dl := deadLetters(t, c.db()); len(dl) != 0 {
		t.Fatalf("%d dead letters, want none", len(dl))
	}
	waitFor(t, "the gauge to say resumed", func() bool {
		return c.metric(t, `hookwarden_destination_paused{destination="std/app"}`) == 0
	})
}

// TestFlowManualPauseThroughTheBinary: pause from the CLI (twice: exit 0
// both times), nothing delivered, still paused after a restart and a
// reload, resumed
// through the API; then paused through the API and resumed from the CLI.
// Each call is in the audit log.
func TestFlowManualPauseThroughTheBinary(t *testing.T) {
	s := newFlowSink(t, nil)
	c := newFlowChild(t, s.URL, "        concurrency: 4\n")
	c.start()
	if code, _, errOut := runBin(t, "pause", "std/nope", "--config", c.cfg); code != 2 || !strings.Contains(errOut, "no destination std/nope") {
		t.Fatalf("pause of an unknown destination: exit %d: %s", code, errOut)
	}
	for i, want := range []string{"paused std/app", "was paused already"} {
		code, out, errOut := runBin(t, "pause", "std/app", "--config", c.cfg)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("pause %d: exit %d: %s%s", i, code, out, errOut)
		}
	}
	c.postMany(t, 10, func(i int) string { return `{"type":"t"}` })
	waitFor(t, "hookwarden_destination_paused 1", func() bool {
		return c.metric(t, `hookwarden_destination_paused{destination="std/app"}`) == 1
	})
	time.Sleep(2 * time.Second) // long enough for deliveries that should not happen
	if n := len(s.requests()); n != 0 {
		t.Fatalf("%d deliveries while paused", n)
	}
	c.stop()
	c.start()
	if st := c.destState(t); !st.Paused || st.Pause == nil || *st.Pause != hookwarden.PauseManual || st.Pending != 10 {
		t.Fatalf("after a restart: %+v, want still paused manually with 10 pending", st)
	}
	// And a reload (SIGHUP, here with a changed concurrency) keeps it too.
	c.writeFlowConfig(s.URL, "        concurrency: 2\n")
	if err := c.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := len(s.requests()); n != 0 {
		t.Fatalf("%d deliveries while paused, after the restart and a reload", n)
	}
	if st := c.destState(t); !st.Paused {
		t.Fatalf("after a reload: %+v, want still paused", st)
	}
	if st := c.apiFlow(t, "resume"); st.Paused {
		t.Fatalf("resume through the API: %+v", st)
	}
	waitFor(t, "the 10 delivered after resume", func() bool { return s.delivered() == 10 })
	if st := c.apiFlow(t, "pause"); !st.Paused {
		t.Fatalf("pause through the API: %+v", st)
	}
	code, out, errOut := runBin(t, "resume", "std/app", "--config", c.cfg, "--json")
	var st hookwarden.DestinationState
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Paused {
		t.Fatalf("resume --json: exit %d: %s%s", code, out, errOut)
	}
	c.stop()
	// A file no serve owns (a forensic copy, say) is changed only with --write.
	if code, _, errOut := runBin(t, "pause", "std/app", "--db", c.db()); code != 2 || !strings.Contains(errOut, "--write") {
		t.Fatalf("pause --db on a file no serve owns: exit %d: %s", code, errOut)
	}
	if code, out, errOut := runBin(t, "pause", "std/app", "--db", c.db(), "--write"); code != 0 || !strings.Contains(out, "paused std/app") {
		t.Fatalf("pause --db --write: exit %d: %s%s", code, out, errOut)
	}
	n := 0
	raw := MustOpenRaw(t, c.db(), "mode=ro")
	defer raw.Close()
	if err := raw.QueryRow(`SELECT count(*) FROM audit
		WHERE action IN ('pause', 'resume') AND args = '{"destination":"std/app"}'`).Scan(&n); err != nil || n != 6 {
		t.Fatalf("audit entries: %d (%v), want 6 (two CLI pauses, an API resume and pause, a CLI resume, a --write pause)", n, err)
	}
}
