package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/metrics"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// TestRefusalsSurviveRestartInStats: requests refused at the door (a wrong
// secret, no signature, a stale timestamp, a body too large) are kept per
// source and reason in the store: after a restart `stats --json` and
// `stats` show them by reason; an unknown source's requests are no row.
func TestRefusalsSurviveRestartInStats(t *testing.T) {
	_, cfg, _, hook, adm := serveFiles(t, "limits: { max_body_bytes: 4096 }\n")
	url := "http://" + hook + "/hooks/std"
	const wrong = "whsec_d3JvbmctY29tcGxldGVseS13cm9uZw=="
	body := []byte(`{"type":"t.created"}`)
	send := func(req *http.Request, want int) {
		t.Helper()
		if got := do(t, req); got.Code != want {
			t.Fatalf("%s %s: %d %s, want %d", req.Method, req.URL, got.Code, got.Status, want)
		}
	}
	stop := func(p *serveProc) {
		t.Helper()
		p.signal(os.Interrupt) // the stop adds what is still counted in memory
		if err := p.waitExit(30 * time.Second); err != nil {
			t.Fatalf("serve: %v\n%s", err, p.log)
		}
	}

	p := startServe(t, cfg, hook, adm)
	send(signed(t, url, "msg_ok", body, time.Now(), testSecret), 200)
	for _, id := range []string{"msg_w1", "msg_w2", "msg_w3"} {
		send(signed(t, url, id, body, time.Now(), wrong), 401)
	}
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
		send(req, 401)
	}
	send(signed(t, url, "msg_old", body, time.Now().Add(-time.Hour), testSecret), 401)
	send(signed(t, url, "msg_big", []byte(`{"a":"`+strings.Repeat("x", 8192)+`"}`), time.Now(), testSecret), 413)
	for range 5 {
		send(signed(t, "http://"+hook+"/hooks/nosuch", "msg_n", body, time.Now(), wrong), 404)
	}
	stop(p)

	p = startServe(t, cfg, hook, adm)
	send(signed(t, url, "msg_w4", body, time.Now(), wrong), 401)
	// Read while the second serve runs: the first one's refusals are kept.
	refused := func() map[string]hookwarden.Refusals {
		t.Helper()
		code, out, errOut := runBin(t, "stats", "--json", "--config", cfg)
		if code != 0 {
			t.Fatalf("stats --json: exit %d: %s", code, errOut)
		}
		got := map[string]hookwarden.Refusals{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var s struct {
				Kind    string               `json:"kind"`
				Source  string               `json:"source"`
				Refused *hookwarden.Refusals `json:"refused_24h"`
			}
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("stats --json line %q: %v", line, err)
			}
			if s.Kind == "source" && s.Refused != nil {
				got[s.Source] = *s.Refused
			}
		}
		return got
	}
	want := hookwarden.Refusals{Mismatch: 3, Missing: 2, Stale: 1, TooLarge: 1}
	if got := refused(); len(got) != 1 || got["std"] != want {
		t.Fatalf("refused after a restart: %+v, want std's %+v alone (no row for an unknown source)", got, want)
	}
	stop(p)
	want.Mismatch++
	if got := refused(); got["std"] != want {
		t.Fatalf("refused after the second stop: %+v, want std's %+v", got, want)
	}
	code, text, errOut := runBin(t, "stats", "--config", cfg)
	if code != 0 {
		t.Fatalf("stats: exit %d: %s", code, errOut)
	}
	if !strings.Contains(text, "REFUSED (24 H)") || !strings.Contains(text, "missing 2, mismatch 4, stale 1, too_large 1") {
		t.Fatalf("stats:\n%s\nwant std's refusals by reason", text)
	}
}

// countingLog counts the store writes of a flush.
type countingLog struct {
	answerLog
	refusalWrites int
}

func (c *countingLog) CountRefusals(ctx context.Context, counts []hookwarden.RefusalCount) error {
	c.refusalWrites++
	return c.answerLog.CountRefusals(ctx, counts)
}

// TestRefusalFloodIsOneWrite: a flood of forged requests is counted in
// memory, and a flush adds it in one store write of one row per source and
// reason; an unknown source's refusals are never counted; while the store
// cannot be written the counts are kept for the next flush, bounded.
func TestRefusalFloodIsOneWrite(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "hw.db"), sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := newAvailability(metrics.New(slog.New(slog.DiscardHandler)))
	for range 20_000 {
		a.Unauthorized("std", hookwarden.RefusedMismatch)
		a.Request("std", "unauthorized", time.Millisecond)
		a.Request("", "unavailable", time.Millisecond) // an unknown source
	}
	a.Unauthorized("std", "invalid") // no check named: counted as malformed, never a row stats cannot show
	a.Request("std", "too_slow", time.Millisecond)
	a.Handshake("std", "verify", receiver.HandshakeRefused)
	log := &countingLog{answerLog: st}
	if err := a.flush(ctx, log, false); err != nil {
		t.Fatal(err)
	}
	if log.refusalWrites != 1 {
		t.Fatalf("%d refusal writes for a flood, want 1", log.refusalWrites)
	}
	stats, err := st.Stats(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.Sources) != 1 || stats.Sources[0].Source != "std" ||
		stats.Sources[0].Refused != (hookwarden.Refusals{Mismatch: 20_000, Malformed: 1, TooSlow: 1, Forbidden: 1}) {
		t.Fatalf("stats after the flood: %+v, want std's 20000 mismatches, a too_slow, a forbidden", stats.Sources)
	}
	if err := a.flush(ctx, log, false); err != nil || log.refusalWrites != 1 {
		t.Fatalf("a flush with nothing counted: %v, %d writes, want none", err, log.refusalWrites)
	}

	// A store that refuses the write: the counts wait, bounded.
	st.Close()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	for h := range refusalKeep + 50 {
		now = now.Add(time.Hour)
		a.Unauthorized("std", hookwarden.RefusedStale)
		if h%1000 == 0 {
			if err := a.flush(ctx, st, false); err == nil {
				t.Fatal("flush to a closed store: no error")
			}
		}
	}
	if err := a.flush(ctx, st, true); err == nil {
		t.Fatal("flush to a closed store: no error")
	}
	a.mu.Lock()
	n := len(a.refused)
	a.mu.Unlock()
	if n != refusalKeep {
		t.Fatalf("%d refusal counts kept while the store refuses, want %d", n, refusalKeep)
	}
}
