package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
)

// Each preset, configured with only name, scheme, secrets and a destination,
// finds the provider's event id and type where the provider puts them.
func TestPresetDefaultsExtractIDAndType(t *testing.T) {
	app := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	cases := []struct {
		scheme, secret string
		body           string
		msgID          string
		extra          map[string]string
		wantID         string
		wantType       string
	}{
		{"stripe", "whsec_stripe", `{"id":"evt_1","object":"event","type":"invoice.paid"}`, "", nil, "evt_1", "invoice.paid"},
		{"github", "gh-secret", `{"action":"opened"}`, "72d3162e-cc78-11e3-81ab-4c9367dc0958",
			map[string]string{"X-GitHub-Event": "pull_request"}, "72d3162e-cc78-11e3-81ab-4c9367dc0958", "pull_request"},
		{"shopify", "shpss_x", `{"id":820982911946154508}`, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
			map[string]string{"X-Shopify-Topic": "orders/create"}, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create"},
		{"slack", "slack-secret", `{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`, "", nil,
			"Ev08MFMKH6", "app_mention"},
		{"standard", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", `{"type":"user.created"}`, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", nil,
			"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "user.created"},
		{"paddle", "pdl_ntfset_secret", `{"event_id":"evt_01h","notification_id":"ntf_01h","event_type":"subscription.created"}`, "", nil,
			"evt_01h", "subscription.created"},
		{"mailgun", "key-mailgun", `{"event-data":{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered"}}`, "token-1", nil,
			"CPgfbmQMTCKtHW6uIWtuVe", "delivered"},
		{"postmark", "user:pass", `{"RecordType":"Bounce","MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","BouncedAt":"2019-11-05T16:33:54Z"}`, "", nil,
			"", "Bounce"},
	}
	doc := fmt.Sprintf("listen: \"127.0.0.1:0\"\nadmin: { listen: \"127.0.0.1:0\" }\ndatabase: { path: %q }\nsources:\n", db)
	for _, c := range cases {
		doc += fmt.Sprintf("  - name: %s\n    scheme: %s\n    secrets: [%q]\n    destinations: [{ name: app, url: %q }]\n",
			c.scheme, c.scheme, c.secret, app.URL)
	}
	a := startAppYAML(t, doc, db)
	for _, c := range cases {
		t.Run(c.scheme, func(t *testing.T) {
			h, body, err := signature.SignBody(signature.Params{Scheme: c.scheme, Secrets: []string{c.secret}},
				[]byte(c.body), time.Now(), c.msgID)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+a.HookAddr()+"/hooks/"+c.scheme, bytes.NewReader(body))
			req.Header = h
			req.Header.Set("Content-Type", "application/json")
			for k, v := range c.extra {
				req.Header.Set(k, v)
			}
			if got := do(t, req); got.Code != 200 || got.Status != "accepted" {
				t.Fatalf("got %+v, want 200 accepted", got)
			}
			var id, typ string
			if err := dbOf(a.Store).QueryRow(`SELECT event_id, event_type FROM events WHERE source = ?`, c.scheme).Scan(&id, &typ); err != nil {
				t.Fatal(err)
			}
			if c.wantID != "" && id != c.wantID || typ != c.wantType {
				t.Fatalf("event id %q type %q, want %q %q", id, typ, c.wantID, c.wantType)
			}
			if c.wantID == "" && id == "" {
				t.Fatal("no synthesized event id")
			}
		})
	}
	// Postmark's basic-auth credentials never rest in the database.
	var n int
	dbOf(a.Store).QueryRow(`SELECT count(*) FROM receipts WHERE headers LIKE '%Basic%'`).Scan(&n)
	if n != 0 {
		t.Fatal("an Authorization header was stored")
	}
}

// The messaging presets (issue 47), each configured with only name, scheme,
// secrets and a destination: a request signed as the platform signs it
// passes the door, one with a wrong signature or none is refused 401 and
// nothing is stored. Where a request carries one event, the preset finds its
// id and type. The batch platforms (meta, line, x, graph) are split into
// events by the receiver; until then a batch whose top level holds no id is
// quarantined, never refused. Telegram's secret token never rests in the
// database.
func TestMessagingPresetsAtTheDoor(t *testing.T) {
	app := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	discordPub, discordKey, _ := ed25519.GenerateKey(rand.Reader)
	telnyxPub, telnyxKey, _ := ed25519.GenerateKey(rand.Reader)
	edKeys := map[string]ed25519.PrivateKey{"discord": discordKey, "telnyx": telnyxKey}
	cases := []struct {
		scheme, secret, body string
		wantID, wantType     string // "": a batch, split into its events
	}{
		{"meta", "meta-app-secret", `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messages":[{"id":"wamid.A","type":"text","text":{"body":"Jos\u00e9"}}]}}]}]}`, "", ""},
		{"telegram", "tg_Secret-Token_0123", "{\"update_id\":123456789,\n\"message\":{\"message_id\":42,\"date\":1700000000,\"text\":\"hi\"}}", "123456789", ""},
		{"line", "line-channel-secret", `{"destination":"U1","events":[{"type":"message","webhookEventId":"01HF0JRA8N2X4ZQ7Y0B6W1T3C5"}]}`, "", ""},
		{"discord", hex.EncodeToString(discordPub), `{"id":"787053080478613555","type":2,"data":{"name":"ping"},"token":"t"}`, "787053080478613555", "2:ping"},
		{"x", "x-consumer-secret", `{"for_user_id":"1","tweet_create_events":[{"id_str":"1724567890123456789"}]}`, "", ""},
		{"graph", "SecretClientState", `{"value":[{"id":"n1","changeType":"created","resource":"Users/u1"}]}`, "", ""},
		{"zoom", "zoom-secret-token", `{"event":"meeting.started","event_ts":1700000000123,"payload":{"object":{"uuid":"4444AAAi=="}}}`, "meeting.started:1700000000123:4444AAAi==", "meeting.started"},
		{"viber", "viber-bot-token", `{"event":"message","timestamp":1700000000123,"message_token":5741311803571721087}`, "message:5741311803571721087", "message"},
		{"vonage", "vonage-signature-secret", `{"message_uuid":"aaaa-bbbb","status":"delivered"}`, "aaaa-bbbb:delivered", "delivered"},
		{"telnyx", base64.StdEncoding.EncodeToString(telnyxPub), `{"data":{"id":"b301ed3f","event_type":"message.received"},"meta":{"attempt":1}}`, "b301ed3f", "message.received"},
		{"intercom", "intercom-client-secret", `{"type":"notification_event","id":"notif_1","topic":"contact.user.created"}`, "notif_1", "contact.user.created"},
		{"zendesk", "dGhpc19zZWNyZXQ=", `{"id":"2b6c4a2b","type":"zen:event-type:user.created"}`, "2b6c4a2b", "zen:event-type:user.created"},
	}
	doc := fmt.Sprintf("listen: \"127.0.0.1:0\"\nadmin: { listen: \"127.0.0.1:0\" }\ndatabase: { path: %q }\nsources:\n", db)
	for _, c := range cases {
		doc += fmt.Sprintf("  - name: %s\n    scheme: %s\n    secrets: [%q]\n    destinations: [{ name: app, url: %q }]\n",
			c.scheme, c.scheme, c.secret, app.URL)
	}
	a := startAppYAML(t, doc, db)
	count := func(scheme string) (n int) {
		dbOf(a.Store).QueryRow(`SELECT count(*) FROM receipts WHERE source = ?`, scheme).Scan(&n)
		return n
	}
	for _, c := range cases {
		t.Run(c.scheme, func(t *testing.T) {
			var h http.Header
			body := []byte(c.body)
			var err error
			if k, ok := edKeys[c.scheme]; ok {
				h, err = signature.SignEd25519(c.scheme, k, body, time.Now())
			} else {
				h, body, err = signature.SignBody(signature.Params{Scheme: c.scheme, Secrets: []string{c.secret}}, body, time.Now(), "msg-1")
			}
			if err != nil {
				t.Fatal(err)
			}
			post := func(h http.Header, body []byte) answerT {
				req, _ := http.NewRequest(http.MethodPost, "http://"+a.HookAddr()+"/hooks/"+c.scheme, bytes.NewReader(body))
				req.Header = h.Clone()
				req.Header.Set("Content-Type", "application/json")
				return do(t, req)
			}
			// Refused first, so that nothing is there to find but what the
			// good request stores.
			tampered := append([]byte(nil), body...)
			tampered[len(tampered)-3] ^= 1
			if c.scheme == "telegram" {
				// The body is not covered: a wrong token is the forgery.
				h2 := h.Clone()
				h2.Set("X-Telegram-Bot-Api-Secret-Token", "tg_Secret-Token_0124")
				if got := post(h2, body); got.Code != 401 {
					t.Fatalf("wrong token: got %+v, want 401", got)
				}
			} else if got := post(h, tampered); got.Code != 401 {
				t.Fatalf("tampered body: got %+v, want 401", got)
			}
			if got := post(http.Header{}, []byte(c.body)); got.Code != 401 { // graph: no clientState in it
				t.Fatalf("no signature: got %+v, want 401", got)
			}
			if n := count(c.scheme); n != 0 {
				t.Fatalf("%d receipts stored for refused requests", n)
			}
			got := post(h, body)
			// What the platform waits for (SPEC 11): Graph 202, a Discord
			// interaction the deferred response (TestAnswersPlatformsWaitFor
			// reads its body), every other platform 200 accepted.
			want := answerT{Code: 200, Status: "accepted"}
			switch c.scheme {
			case "graph":
				want.Code = 202
			case "discord":
				want.Status = ""
			}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			if c.wantID == "" {
				return // a batch: the batch tests check its events
			}
			var id, typ string
			if err := dbOf(a.Store).QueryRow(`SELECT event_id, event_type FROM events WHERE source = ?`, c.scheme).Scan(&id, &typ); err != nil {
				t.Fatal(err)
			}
			if id != c.wantID || typ != c.wantType {
				t.Fatalf("event id %q type %q, want %q %q", id, typ, c.wantID, c.wantType)
			}
		})
	}
	var n int
	dbOf(a.Store).QueryRow(`SELECT count(*) FROM receipts WHERE headers LIKE '%tg_Secret%'`).Scan(&n)
	if n != 0 {
		t.Fatal("Telegram's secret token was stored")
	}
}

// check accepts every messaging preset as a complete source and names the
// key path of a secret of the wrong format without printing it; sign prints
// a request for each shared-secret scheme and refuses the Ed25519 ones,
// whose secret is the platform's public key.
func TestMessagingCheckAndSign(t *testing.T) {
	const hexKey = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	const b64Key = "PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw="
	secrets := []struct{ scheme, secret, header string }{
		{"meta", "meta-app-secret", "X-Hub-Signature-256: sha256="},
		{"telegram", "tg_Secret-Token_0123", "X-Telegram-Bot-Api-Secret-Token: tg_Secret-Token_0123"},
		{"line", "line-channel-secret", "X-Line-Signature: "},
		{"discord", hexKey, ""},
		{"x", "x-consumer-secret", "X-Twitter-Webhooks-Signature: sha256="},
		{"graph", "SecretClientState", ""},
		{"zoom", "zoom-secret-token", "X-Zm-Signature: v0="},
		{"viber", "viber-bot-token", "X-Viber-Content-Signature: "},
		{"vonage", "vonage-signature-secret", "Authorization: Bearer ey"},
		{"telnyx", b64Key, ""},
		{"intercom", "intercom-client-secret", "X-Hub-Signature: sha1="},
		{"zendesk", "dGhpc19zZWNyZXQ=", "X-Zendesk-Webhook-Signature: "},
	}
	doc := "listen: \"127.0.0.1:8080\"\nsources:\n"
	for _, s := range secrets {
		doc += fmt.Sprintf("  - name: %s\n    scheme: %s\n    secrets: [%q]\n    destinations: [{ name: app, url: \"http://127.0.0.1:3000/\" }]\n",
			s.scheme, s.scheme, s.secret)
	}
	p := writeConfig(t, doc)
	code, out, errOut := runMain(t, "check", "--config", p)
	if code != 0 || !strings.Contains(out, ": ok") {
		t.Fatalf("check: exit %d:\n%s%s", code, out, errOut)
	}
	for _, s := range secrets {
		code, out, errOut := runMain(t, "sign", "--config", p, "--source", s.scheme)
		switch {
		case s.scheme == "discord" || s.scheme == "telnyx":
			if code == 0 || !strings.Contains(errOut, "public key") {
				t.Errorf("sign %s: exit %d, want a refusal naming the public key:\n%s%s", s.scheme, code, out, errOut)
			}
		case s.scheme == "graph":
			if code != 0 || !strings.Contains(out, `"clientState":"SecretClientState"`) {
				t.Errorf("sign graph: exit %d, want the clientState in the body:\n%s%s", code, out, errOut)
			}
		default:
			if code != 0 || !strings.Contains(out, s.header) {
				t.Errorf("sign %s: exit %d, want a request with %q:\n%s%s", s.scheme, code, s.header, out, errOut)
			}
		}
	}

	bad := writeConfig(t, strings.NewReplacer(hexKey, "bm90LWEta2V5", "tg_Secret-Token_0123", "not a token!").Replace(doc))
	code, out, _ = runMain(t, "check", "--config", bad)
	for _, want := range []string{"sources[3].secrets[0]: scheme discord: want the platform's Ed25519 public key",
		"sources[1].secrets[0]: scheme telegram: a Telegram secret_token is 1-256 characters"} {
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("check: exit %d, want %q in:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "bm90LWEta2V5") || strings.Contains(out, "not a token!") {
		t.Errorf("check printed a secret:\n%s", out)
	}
}
