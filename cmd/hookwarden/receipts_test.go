package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const tgToken = "tg_Secret-Token_0123"

// tgSource is a Telegram source with only name, scheme, secrets and a
// destination: the preset brings sequence: json:update_id and event_time.
func tgSource(appURL string) string {
	return fmt.Sprintf("  - name: tg\n    scheme: telegram\n    secrets: [%q]\n    destinations: [{ name: app, url: %q }]\n", tgToken, appURL)
}

// postUpdate sends Telegram update id (its message dated at) to the serve at hook.
func postUpdate(t *testing.T, hook string, id int64, at time.Time) {
	t.Helper()
	body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"date":%d,"chat":{"id":1},"text":"hi"}}`, id, id%100000, at.Unix())
	req, _ := http.NewRequest(http.MethodPost, "http://"+hook+"/hooks/tg", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", tgToken)
	if got := do(t, req); got.Code != 200 || got.Status != "accepted" {
		t.Fatalf("update %d: %+v, want 200 accepted", id, got)
	}
}

type holeLine struct {
	Kind    string `json:"kind"`
	Source  string `json:"source"`
	Epoch   int64  `json:"epoch"`
	FromSeq int64  `json:"from_seq"`
	ToSeq   int64  `json:"to_seq"`
	Missing int64  `json:"missing"`
	Between struct {
		From, To time.Time
	} `json:"between"`
	State string `json:"state"`
}

// gapsHoles runs `hookwarden gaps --json` and returns its sequence holes.
func gapsHoles(t *testing.T, cfg string) []holeLine {
	t.Helper()
	code, out, errOut := runBin(t, "gaps", "--json", "--config", cfg)
	if code != 0 {
		t.Fatalf("gaps --json: exit %d\n%s", code, errOut)
	}
	var holes []holeLine
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var h holeLine
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatalf("gaps --json line %q: %v", sc.Text(), err)
		}
		if h.Kind == "sequence_hole" {
			holes = append(holes, h)
		}
	}
	return holes
}

func holesText(hs []holeLine) string {
	var s []string
	for _, h := range hs {
		s = append(s, fmt.Sprintf("%s:%d:%d-%d:%d:%s", h.Source, h.Epoch, h.FromSeq, h.ToSeq, h.Missing, h.State))
	}
	return strings.Join(s, " ")
}

// Through the real binary: Telegram updates 1000, 1001, 1003, 1006 leave
// two holes in gaps (--json, text and /api/gaps); 1002 arriving later
// removes one; a reset to a random id starts an epoch, not a hole. Each
// accepted update's lag lands in hookwarden_event_lag_seconds.
func TestTelegramSequenceHoles(t *testing.T) {
	app := newSink(t)
	_, cfg, _, hook, adm := serveFiles(t, tgSource(app.URL))
	startServe(t, cfg, hook, adm)
	sent := time.Now().Add(-90 * time.Second)
	for _, id := range []int64{1000, 1001, 1003, 1006} {
		postUpdate(t, hook, id, sent)
	}
	if got := holesText(gapsHoles(t, cfg)); got != "tg:1:1002-1002:1:may_still_arrive tg:1:1004-1005:2:may_still_arrive" {
		t.Fatalf("holes after 1000 1001 1003 1006: %q, want 1002 and 1004-1005", got)
	}
	_, text, _ := runBin(t, "gaps", "--config", cfg)
	if !strings.Contains(text, "sequence holes") || !strings.Contains(text, "1004-1005") {
		t.Fatalf("gaps text does not list the holes:\n%s", text)
	}
	resp, err := http.Get("http://" + adm + "/api/gaps")
	if err != nil {
		t.Fatal(err)
	}
	var api struct {
		Holes []holeLine `json:"sequence_holes"`
	}
	err = json.NewDecoder(resp.Body).Decode(&api)
	resp.Body.Close()
	if err != nil || len(api.Holes) != 2 || api.Holes[0].Kind != "sequence_hole" || api.Holes[1].Between.To.IsZero() {
		t.Fatalf("/api/gaps sequence_holes: %+v %v, want the two holes", api.Holes, err)
	}

	postUpdate(t, hook, 1002, sent) // Telegram's retry of the missing update
	if got := holesText(gapsHoles(t, cfg)); got != "tg:1:1004-1005:2:may_still_arrive" {
		t.Fatalf("holes after 1002 arrived: %q, want 1004-1005 alone", got)
	}
	// A week without updates: the bot's ids start again at a random value.
	base := 10_000_000 + rand.Int64N(1_000_000_000)
	postUpdate(t, hook, base, sent)
	postUpdate(t, hook, base+1, sent)
	if got := holesText(gapsHoles(t, cfg)); got != "tg:1:1004-1005:2:may_still_arrive" {
		t.Fatalf("holes after a reset to %d: %q, want no hole across it", base, got)
	}
	postUpdate(t, hook, base+3, sent)
	want := fmt.Sprintf("tg:1:1004-1005:2:may_still_arrive tg:2:%d-%d:1:may_still_arrive", base+2, base+2)
	if got := holesText(gapsHoles(t, cfg)); got != want {
		t.Fatalf("holes in the new epoch: %q, want %q", got, want)
	}
	if n := scrape(t, adm, `hookwarden_event_lag_seconds_count{source="tg"}`); n != 8 {
		t.Errorf("event lag observations: %v, want 8 (one per accepted update)", n)
	}
	if n := scrape(t, adm, `hookwarden_event_lag_seconds_bucket{le="60",source="tg"}`); n != 0 {
		t.Errorf("lags under a minute: %v, want 0 (every message was dated 90 s before)", n)
	}
}

// postTimed sends Telegram update id whose own time (json:at, RFC 3339) is at.
func postTimed(t *testing.T, hook, source string, id int64, at time.Time) {
	t.Helper()
	body := fmt.Sprintf(`{"update_id":%d,"at":%q,"message":{"message_id":%d,"chat":{"id":1},"text":"hi"}}`, id, at.Format(time.RFC3339Nano), id)
	req, _ := http.NewRequest(http.MethodPost, "http://"+hook+"/hooks/"+source, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", tgToken)
	if got := do(t, req); got.Code != 200 || got.Status != "accepted" {
		t.Fatalf("update %d: %+v, want 200 accepted", id, got)
	}
}

type outageLine struct {
	Kind    string    `json:"kind"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Crash   bool      `json:"crash"`
	Sources []struct {
		Source             string     `json:"source"`
		Recovery           string     `json:"recovery"`
		RecoveredByRetries *int64     `json:"recovered_by_retries"`
		LastLateArrival    *time.Time `json:"last_late_arrival"`
		MaxLag             *float64   `json:"max_lag"`
	} `json:"sources"`
}

func gapsOutages(t *testing.T, cfg string) []outageLine {
	t.Helper()
	code, out, errOut := runBin(t, "gaps", "--json", "--config", cfg)
	if code != 0 {
		t.Fatalf("gaps --json: exit %d\n%s", code, errOut)
	}
	var os []outageLine
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var o outageLine
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("gaps --json line %q: %v", line, err)
		}
		if o.Kind == "outage" {
			os = append(os, o)
		}
	}
	return os
}

// Through the real binary: serve is killed (kill -9) and started again;
// the platform's retries then bring events timed inside the window. gaps
// counts them on the window (recovered_by_retries, the last arrival, the
// longest lag) and says so in a sentence; for a source from which nothing
// timed inside the window came, it says to tell the affected users. A
// live event after the restart is not counted; the update that never came
// is a sequence hole beside the window.
func TestLateArrivalsAfterKill(t *testing.T) {
	app := newSink(t)
	extra := tgSource(app.URL) + "    event_time: json:at\n" +
		fmt.Sprintf("  - name: quiet\n    scheme: telegram\n    secrets: [%q]\n    event_time: json:at\n    destinations: [{ name: app, url: %q }]\n",
			tgToken, app.URL)
	_, cfg, _, hook, adm := serveFiles(t, extra)
	p := startServe(t, cfg, hook, adm)
	postTimed(t, hook, "tg", 1000, time.Now())
	postTimed(t, hook, "quiet", 1, time.Now())
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.waitExit(10 * time.Second)
	startServe(t, cfg, hook, adm)
	os := gapsOutages(t, cfg)
	if len(os) != 1 || !os[0].Crash || os[0].End.IsZero() {
		t.Fatalf("outages after kill -9 and a restart: %+v, want one crash window", os)
	}
	w := os[0]
	inside := w.Start.Add(w.End.Sub(w.Start) / 2)
	for _, id := range []int64{1001, 1002, 1004} { // Telegram's retries of what it sent meanwhile; 1003 is missing
		postTimed(t, hook, "tg", id, inside)
	}
	postTimed(t, hook, "tg", 1005, time.Now()) // live
	os = gapsOutages(t, cfg)
	var tg, quiet *int64
	var last *time.Time
	for _, s := range os[0].Sources {
		switch s.Source {
		case "tg":
			tg, last = s.RecoveredByRetries, s.LastLateArrival
		case "quiet":
			quiet = s.RecoveredByRetries
		case "std":
			if s.RecoveredByRetries != nil {
				t.Errorf("std has no event_time but recovered_by_retries %d", *s.RecoveredByRetries)
			}
		}
	}
	if tg == nil || *tg != 3 || last == nil || last.Before(w.End) || quiet == nil || *quiet != 0 {
		t.Fatalf("window %+v: tg recovered %v (last %v), quiet %v; want 3 after the window's end, and 0", os[0], tg, last, quiet)
	}
	_, text, _ := runBin(t, "gaps", "--config", cfg)
	t.Logf("gaps:\n%s", text)
	for _, want := range []string{"tg: 3 events from inside this window arrived later (platform retries), the last at ",
		"quiet: no event from inside this window has arrived: for a platform that retries, tell the affected users",
		"sequence holes", "tg      1        1003"} {
		if !strings.Contains(text, want) {
			t.Errorf("gaps text lacks %q:\n%s", want, text)
		}
	}
}

// Through the real binary: `backfill tg --status` reads getWebhookInfo from
// a fake Bot API on loopback (backfill.api_key is the bot token) and shows
// the updates Telegram still holds and its last delivery error; --json has
// the fields; a token Telegram refuses exits 2 naming the key's path; a
// plain backfill of telegram is refused, there is no history.
func TestBackfillTelegramStatus(t *testing.T) {
	const bot = "4242:fake-bot-token"
	errAt := time.Now().Add(-3 * time.Minute).Truncate(time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/bot"+bot+"/getWebhookInfo" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"ok":false,"error_code":401,"description":"Unauthorized"}`)
			return
		}
		fmt.Fprintf(w, `{"ok":true,"result":{"url":"https://bot.example.com/hooks/tg","has_custom_certificate":false,"pending_update_count":12,`+
			`"last_error_date":%d,"last_error_message":"Wrong response from the webhook: 503 Service Unavailable","max_connections":40}}`, errAt.Unix())
	}))
	t.Cleanup(srv.Close)
	api := srv.URL
	app := newSink(t)
	src := func(token string) string {
		return tgSource(app.URL) + fmt.Sprintf("    backfill: { api_key: %q, api_base: %q }\n", token, api)
	}
	_, cfg, _, _, _ := serveFiles(t, src(bot))
	code, out, errOut := runBin(t, "backfill", "tg", "--status", "--config", cfg)
	if code != 0 {
		t.Fatalf("backfill --status: exit %d\n%s", code, errOut)
	}
	t.Logf("backfill tg --status:\n%s", out)
	for _, want := range []string{"pending updates", "12", "Wrong response from the webhook: 503 Service Unavailable", fmtUTC(errAt)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out+errOut, bot) {
		t.Errorf("the bot token is printed:\n%s%s", out, errOut)
	}
	code, out, _ = runBin(t, "backfill", "tg", "--status", "--json", "--config", cfg)
	var st struct {
		Source           string    `json:"source"`
		Pending          int64     `json:"pending_update_count"`
		LastErrorDate    time.Time `json:"last_error_date"`
		LastErrorMessage string    `json:"last_error_message"`
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Source != "tg" || st.Pending != 12 || !st.LastErrorDate.Equal(errAt) {
		t.Fatalf("--json: exit %d %v %+v\n%s", code, err, st, out)
	}
	code, _, errOut = runBin(t, "backfill", "tg", "--config", cfg)
	if code != 2 || !strings.Contains(errOut, "keeps no history") {
		t.Errorf("backfill of telegram: exit %d %s, want 2 saying it keeps no history", code, errOut)
	}
	_, cfg2, _, _, _ := serveFiles(t, src("4242:revoked"))
	code, _, errOut = runBin(t, "backfill", "tg", "--status", "--config", cfg2)
	if code != 2 || !strings.Contains(errOut, "sources[1].backfill.api_key") || strings.Contains(errOut, "revoked") {
		t.Errorf("refused token: exit %d %s, want 2 naming sources[1].backfill.api_key without the token", code, errOut)
	}
}
