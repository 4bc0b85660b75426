package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
)

// TestTwilioReencodedReplaysThroughTheBinary is issue 46 points 1 and 9 at
// the door. A public_url with a query (the exact URL configured at Twilio)
// verifies; and one captured status callback, re-encoded (pairs reordered,
// a letter percent-encoded, a pair repeated, a trailing "&") under fresh
// idempotency tokens, is held as body_replayed each time: one job, not five.
func TestTwilioReencodedReplaysThroughTheBinary(t *testing.T) {
	app := newSink(t)
	dir := t.TempDir()
	c := &child{t: t, cfg: filepath.Join(dir, "config.yaml"), hook: freeAddr(t), adm: freeAddr(t)}
	const public = "https://hooks.example.com/hooks/tw?account=main"
	doc := fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: %q }
log: { level: warn }
sources:
  - name: tw
    scheme: twilio
    secrets: ["twilio-auth-token-for-tests"]
    public_url: %q
    destinations: [{ name: app, url: %q, backoff: { initial: 20ms, max: 200ms } }]
`, c.hook, c.adm, filepath.Join(dir, "hw.db"), public, app.URL)
	if err := os.WriteFile(c.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c.start()
	defer c.stop()
	p := signature.Params{Scheme: "twilio", Secrets: []string{"twilio-auth-token-for-tests"}, PublicURL: public}
	const body = "AccountSid=AC1&MessageSid=SM1&MessageStatus=delivered&To=%2B15555550100"
	h, err := signature.Sign(p, []byte(body), time.Now(), "tok-0")
	if err != nil {
		t.Fatal(err)
	}
	post := func(token, b string) answerT {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://"+c.hook+"/hooks/tw?account=main", bytes.NewReader([]byte(b)))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		req.Header.Set("I-Twilio-Idempotency-Token", token)
		return do(t, req)
	}
	if got := post("tok-0", body); got.Code != 200 || got.Status != "accepted" {
		t.Fatalf("first copy to a public_url with a query: %+v, want 200 accepted", got)
	}
	app.wait(t)
	for i, v := range []string{
		"MessageStatus=delivered&To=%2B15555550100&AccountSid=AC1&MessageSid=SM1",
		"AccountSid=AC1&MessageSid=SM1&MessageStatus=%64elivered&To=%2B15555550100",
		body + "&MessageStatus=delivered",
		body + "&",
	} {
		if got := post(fmt.Sprintf("tok-%d", i+1), v); got.Code != 200 || got.Status != "quarantined" {
			t.Errorf("%q under a fresh token: %+v, want 200 quarantined", v, got)
		}
	}
	db, err := sql.Open("sqlite", "file:"+c.db()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var jobs int
	if err := db.QueryRow(`SELECT count(*) FROM jobs`).Scan(&jobs); err != nil || jobs != 1 {
		t.Fatalf("%d jobs (%v), want 1: one signed callback, however encoded", jobs, err)
	}
	if got := c.metric(t, `hookwarden_quarantined_total{reason="body_replayed",source="tw"}`); got != 4 {
		t.Fatalf("quarantined_total body_replayed tw: %d, want 4", got)
	}
	held := heldList(t, "--db", c.db(), "--source", "tw")
	if len(held) != 1 || held[0].OriginalEventID != "tok-0" || !strings.HasPrefix(held[0].CandidateEventID, "tok-") {
		t.Fatalf("held: %+v, want one entry (its repeats counted) replaying tok-0", held)
	}
}

// TestForgedMailgunBodiesReachNoFilter is issue 46 point 4 at the door: a
// captured Mailgun signature block sent with forged 512 KiB bodies, after a
// restart (the token is only in the store), is refused 401 before any
// filter runs. The filter fails on every body it sees, so
// hookwarden_filter_errors_total counts its evaluations: none.
func TestForgedMailgunBodiesReachNoFilter(t *testing.T) {
	app := newSink(t)
	dir := t.TempDir()
	c := &child{t: t, cfg: filepath.Join(dir, "config.yaml"), hook: freeAddr(t), adm: freeAddr(t)}
	doc := fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: %q }
log: { level: warn }
sources:
  - name: mg
    scheme: mailgun
    secrets: [%q]
    destinations: [{ name: app, url: %q, filter: 'body.nope == 1', backoff: { initial: 20ms, max: 200ms } }]
`, c.hook, c.adm, filepath.Join(dir, "hw.db"), mgSecret, app.URL)
	if err := os.WriteFile(c.cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c.start()
	mg := signature.Params{Scheme: "mailgun", Secrets: []string{mgSecret}}
	_, signed, err := signature.SignBody(mg, []byte(`{"event-data":{"id":"ev-1","event":"delivered"}}`), time.Now(),
		"tok-forged-0123456789abcdef0123456789abcdef0123")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.postRaw(t, "mg", signed); got.Code != 200 || got.Status != "accepted" {
		t.Fatalf("genuine request: %+v", got)
	}
	app.wait(t)
	c.stop()
	c.start()
	defer c.stop()
	pad := strings.Repeat(`{"n":1},`, 64<<10)
	const n = 20
	for i := range n {
		forged := bytes.Replace(signed, []byte(`"ev-1"`), []byte(fmt.Sprintf(`"forged-%d","pad":[%s1]`, i, pad)), 1)
		if got := c.postRaw(t, "mg", forged); got.Code != 401 || got.Status != "unauthorized" {
			t.Fatalf("forged body %d: %+v, want 401", i, got)
		}
	}
	if got := c.metric(t, `hookwarden_unauthorized_total{reason="replayed",source="mg"}`); got != n {
		t.Errorf("unauthorized_total replayed: %d, want %d", got, n)
	}
	if got := c.metric(t, `hookwarden_filter_errors_total{destination="mg/app"}`); got != 0 {
		t.Fatalf("filter_errors_total mg/app: %d since the restart, want 0: the filter ran on forged bodies", got)
	}
}
