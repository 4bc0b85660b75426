package main

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
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
