package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
)

// The other platforms that never replay (SPEC 11), through the real binary:
// each one's handshake, a batch delivered once per event in its envelope, a
// resend, a mix of old and new, and refusals that store nothing.

// RFC 8032 TEST 1: the key pair of the shared Discord vectors.
const discordSeed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"

var platformSecrets = map[string]string{
	"line": "line-channel-secret", "x": "x-consumer-secret", "graph": "SecretClientState",
	"discord":  "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
	"telegram": "tg_Secret-Token_0123", "zoom": "zoom-secret-token",
}

func platformSources(destURL string) string {
	var b strings.Builder
	for _, s := range []string{"line", "x", "graph", "discord", "telegram", "zoom"} {
		fmt.Fprintf(&b, `  - name: %s
    scheme: %s
    secrets: [%q]
    destinations:
      - name: app
        url: %q
        backoff: { initial: 20ms, max: 200ms }
`, s, s, platformSecrets[s], destURL)
	}
	return b.String()
}

func platformSign(t *testing.T, scheme, body string, at time.Time) map[string]string {
	t.Helper()
	var h http.Header
	var err error
	if scheme == "discord" {
		seed, _ := hex.DecodeString(discordSeed)
		h, err = signature.SignEd25519("discord", ed25519.NewKeyFromSeed(seed), []byte(body), at)
	} else {
		h, err = signature.Sign(signature.Params{Scheme: scheme, Secrets: []string{platformSecrets[scheme]}}, []byte(body), at, "")
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k := range h {
		out[k] = h.Get(k)
	}
	return out
}

func TestPlatformsThroughTheBinary(t *testing.T) {
	app := newSink(t)
	_, cfg, db, hook, adm := serveFiles(t, "")
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, platformSources(app.URL))
	startServe(t, cfg, hook, adm)
	base := "http://" + hook + "/hooks/"
	now := time.Now()
	post := func(src, body string, h map[string]string) hookAnswer { return postHook(t, base+src, h, body) }
	signedPost := func(src, body string) hookAnswer { return post(src, body, platformSign(t, src, body, now)) }
	expect := func(name string, got hookAnswer, code int, body string) {
		t.Helper()
		if got.code != code || got.body != body {
			t.Errorf("%s: %d %q, want %d %q", name, got.code, got.body, code, body)
		}
	}
	delivered := func(name string, want map[string]string) {
		t.Helper()
		got := collect(t, app, len(want))
		for k, body := range want {
			if d := got[k]; len(d) != 1 || d[0] != body {
				t.Errorf("%s: %s delivered %q, want once as %s", name, k, d, body)
			}
		}
	}

	// LINE: the verify request, a batch, a resend, a mix, a wrong signature.
	expect("line verify", signedPost("line", `{"destination":"U1","events":[]}`), 200, `{"status":"ok"}`+"\n")
	lineEv := func(id, text string) string {
		return `{"type":"message","webhookEventId":"` + id + `","message":{"type":"text","text":"` + text + `"}}`
	}
	lineBody := func(evs ...string) string { return `{"destination":"U1","events":[` + strings.Join(evs, ",") + `]}` }
	expect("line batch", signedPost("line", lineBody(lineEv("01A", "héllo"), lineEv("01B", `\u3053\u3093`))), 200,
		`{"status":"accepted","events":2,"accepted":2,"duplicate":0}`+"\n")
	delivered("line", map[string]string{"line:01A": lineBody(lineEv("01A", "héllo")), "line:01B": lineBody(lineEv("01B", `\u3053\u3093`))})
	expect("line resend", signedPost("line", lineBody(lineEv("01A", "héllo"), lineEv("01B", `\u3053\u3093`))), 200,
		`{"status":"duplicate","events":2,"accepted":0,"duplicate":2}`+"\n")
	expect("line mixed", signedPost("line", lineBody(lineEv("01B", `\u3053\u3093`), lineEv("01C", "new"))), 200,
		`{"status":"accepted","events":2,"accepted":1,"duplicate":1}`+"\n")
	delivered("line mixed", map[string]string{"line:01C": lineBody(lineEv("01C", "new"))})
	bad := lineBody(lineEv("01Z", "x"))
	expect("line unsigned", post("line", bad, nil), 401, `{"status":"unauthorized"}`+"\n")
	expect("line wrong", post("line", bad, platformSign(t, "line", bad+" ", now)), 401, `{"status":"unauthorized"}`+"\n")

	// X: the CRC, and each *_events array's items on their own.
	resp, err := http.Get(base + "x?crc_token=9b4507b3")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `{"response_token":"` + signature.XCRCResponseToken(platformSecrets["x"], "9b4507b3") + `"}` + "\n"; resp.StatusCode != 200 || string(b) != want {
		t.Errorf("x crc: %d %s, want %s", resp.StatusCode, b, want)
	}
	xBody := `{"for_user_id":"9","tweet_create_events":[{"id_str":"100","text":"caf\u00e9"}],"favorite_events":[{"id":"f1"},{"id":"f2"}]}`
	expect("x batch", signedPost("x", xBody), 200, `{"status":"accepted","events":3,"accepted":3,"duplicate":0}`+"\n")
	delivered("x", map[string]string{
		"x:tweet_create_events:100": `{"for_user_id":"9","tweet_create_events":[{"id_str":"100","text":"caf\u00e9"}]}`,
		"x:favorite_events:f1":      `{"for_user_id":"9","favorite_events":[{"id":"f1"}]}`,
		"x:favorite_events:f2":      `{"for_user_id":"9","favorite_events":[{"id":"f2"}]}`,
	})
	expect("x wrong", post("x", xBody, platformSign(t, "x", xBody+" ", now)), 401, `{"status":"unauthorized"}`+"\n")

	// Graph: the validation token, notifications answered 202, a wrong clientState 401.
	resp, err = http.Post(base+"graph?validationToken=Validation%3A%20Testing", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "Validation: Testing" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("graph validation: %d %q", resp.StatusCode, b)
	}
	gBody := `{"value":[{"id":"n1","clientState":"SecretClientState","changeType":"created"},{"clientState":"SecretClientState","changeType":"updated","resource":"r"}]}`
	expect("graph", post("graph", gBody, nil), 202, `{"status":"accepted","events":2,"accepted":2,"duplicate":0}`+"\n")
	if got := collect(t, app, 2); len(got) != 2 || got["graph:n1"][0] != `{"value":[{"id":"n1","clientState":"SecretClientState","changeType":"created"}]}` {
		t.Errorf("graph delivered %q, want n1 and the derived one, each in its envelope", got)
	}
	expect("graph wrong clientState", post("graph", strings.ReplaceAll(gBody, "SecretClientState", "guess"), nil), 401, `{"status":"unauthorized"}`+"\n")

	// Discord: the PINGs, an interaction deferred, a Webhook Event 204, a stale signature.
	expect("discord ping", signedPost("discord", `{"application_id":"1","id":"787","token":"T","type":1,"version":1}`), 200, `{"type":1}`+"\n")
	expect("discord unsigned ping", post("discord", `{"application_id":"1","id":"787","token":"T","type":1,"version":1}`, nil), 401, `{"status":"unauthorized"}`+"\n")
	expect("discord events ping", signedPost("discord", `{"version":1,"application_id":"1","type":0}`), 204, "")
	inter := `{"id":"1234","type":2,"token":"T","data":{"name":"ping"}}`
	expect("discord interaction", signedPost("discord", inter), 200, `{"type":5}`+"\n")
	delivered("discord", map[string]string{"discord:1234": inter})
	wev := `{"version":1,"application_id":"1","type":1,"event":{"type":"APPLICATION_AUTHORIZED","timestamp":"2024-10-18T14:42:53"}}`
	expect("discord webhook event", signedPost("discord", wev), 204, "")
	app.wait(t)
	expect("discord stale", post("discord", inter, platformSign(t, "discord", inter, now.Add(-time.Hour))), 401, `{"status":"unauthorized"}`+"\n")

	// Telegram: the secret token, and no Bot API method in the answer.
	tg := "{\"update_id\":10000,\n\"message\":{\"text\":\"hi\"}}"
	expect("telegram", signedPost("telegram", tg), 200, `{"status":"accepted"}`+"\n")
	delivered("telegram", map[string]string{"telegram:10000": tg})
	expect("telegram missing token", post("telegram", tg, nil), 401, `{"status":"unauthorized"}`+"\n")

	// Zoom: url_validation, an event, a stale timestamp.
	zv := `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1700000000123,"event":"endpoint.url_validation"}`
	expect("zoom validation", signedPost("zoom", zv), 200, `{"encryptedToken":"`+signature.ZoomEncryptedToken(platformSecrets["zoom"], "qgg8vlvZRS6UYooatFL8Aw")+`","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}`+"\n")
	zev := `{"event":"meeting.started","event_ts":1700000000123,"payload":{"object":{"uuid":"u=="}}}`
	expect("zoom stale", post("zoom", zev, platformSign(t, "zoom", zev, now.Add(-time.Hour))), 401, `{"status":"unauthorized"}`+"\n")
	expect("zoom event", signedPost("zoom", zev), 200, `{"status":"accepted"}`+"\n")
	delivered("zoom", map[string]string{"zoom:meeting.started:1700000000123:u==": zev})

	// Nothing refused or handshaken was stored; two ids were derived.
	code, out, _ := runBin(t, "events", "list", "--json", "--limit", "100", "--db", db)
	if code != 0 {
		t.Fatalf("events list: %d", code)
	}
	if n := strings.Count(out, "\n"); n != 12 {
		t.Errorf("%d events, want 12 (line 3, x 3, graph 2, discord 2, telegram 1, zoom 1):\n%s", n, out)
	}
	if n := strings.Count(out, `"derived_id":true`); n != 2 {
		t.Errorf("%d derived ids, want 2 (graph's item without id, the Discord Webhook Event)", n)
	}
	if v := scrape(t, adm, `hookwarden_handshakes_total{kind="ping",outcome="answered",source="discord"}`); v != 2 {
		t.Errorf("discord pings counted: %v, want 2", v)
	}
}
