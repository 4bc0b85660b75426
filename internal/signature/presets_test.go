package signature

import (
	"errors"
	"testing"

	"github.com/hookwarden/hookwarden/internal/extract"
)

// Every preset's specs parse, and on the vectors they find the ids that
// the providers document as dedupe keys ("" = not found: quarantined).
func TestPresetsOnVectors(t *testing.T) {
	t.Parallel()
	want := map[string][2]string{
		"stripe/valid":                      {"evt_1NvXyZ", "invoice.paid"},
		"github/valid":                      {"72d3162e-cc78-11e3-81ab-4c9367dc0958", "issues"},
		"shopify/valid":                     {"98880550-7158-44d4-b7cd-2c97c8a091b5", "orders/create"},
		"slack/valid":                       {"Ev08MFMKH6", "app_mention"},
		"slack/official_docs_vector":        {"398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c", "/webhook-collect"},
		"standard-webhooks/valid":           {"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "invoice.paid"},
		"svix/valid_svix_prefix":            {"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "invoice.paid"},
		"paddle/valid":                      {"evt_01h8bzakzx3hm2fmen703n5q45", "transaction.completed"},
		"mailgun/valid":                     {"CPgfbmQMTCKtHW6uIWtuVe", "delivered"},
		"twilio/official_form_vector":       {"", ""}, // CallSid without CallStatus, no idempotency token
		"sendgrid/official_sdk_vector":      {"", "test_event"},
		"generic-ts-body/valid":             {"evt_1NvXyZ", "invoice.paid"},
		"generic-ts-body/missing_signature": {"evt_1NvXyZ", "invoice.paid"}, // body id fallback
	}
	for _, name := range Schemes() {
		p, _ := PresetFor(name)
		for _, s := range []string{p.EventID, p.EventType} {
			if _, err := extract.Parse(s); err != nil && !(name == "telegram" && s == "") {
				t.Errorf("preset %s: %v", name, err)
			}
		}
	}
	for _, v := range MustLoadVectors(t) {
		w, ok := want[v.name()]
		if !ok {
			continue
		}
		delete(want, v.name())
		p, _ := PresetFor(v.params(t).Scheme)
		r := v.request()
		for i, spec := range []string{p.EventID, p.EventType} {
			ex, err := extract.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ex.Extract(r.Header, r.Body)
			if w[i] == "" && !errors.Is(err, extract.ErrNotFound) || w[i] != "" && (err != nil || got != w[i]) {
				t.Errorf("%s: %s = %q, %v; want %q", v.name(), spec, got, err, w[i])
			}
		}
	}
	for name := range want {
		t.Errorf("vector %s not found", name)
	}
}

// The messaging presets' specs on one event's document: the whole body where
// a request carries one event, and for the batch platforms one item of the
// batch, which the receiver's splitter hands to the extractors. The ids are
// SPEC 11's.
func TestMessagingPresetsOnEvents(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{}
	for _, v := range MustLoadVectors(t) {
		bodies[v.name()] = v.Body
	}
	for _, tc := range []struct {
		scheme, doc      string
		wantID, wantType string
	}{
		{"meta", `{"from":"16505551234","id":"wamid.HBgLMTY1MDM4","timestamp":"1700000000","text":{"body":"Ol\u00e1"},"type":"text"}`,
			"wamid.HBgLMTY1MDM4", "text"},
		{"meta", `{"id":"wamid.HBgLMTY1MDM4","status":"delivered","timestamp":"1700000001","recipient_id":"16505551234"}`,
			"wamid.HBgLMTY1MDM4:delivered", "delivered"},
		{"meta", `{"sender":{"id":"1"},"recipient":{"id":"2"},"timestamp":1700000000000,"message":{"mid":"m_AbC","text":"hi"}}`,
			"m_AbC", ""},
		{"meta", `{"sender":{"id":"1"},"timestamp":1700000000000,"postback":{"title":"x"}}`, "", ""}, // the splitter keys it
		{"line", `{"type":"message","timestamp":1700000000000,"webhookEventId":"01HF0JRA8N2X4ZQ7Y0B6W1T3C5","message":{"id":"4445"}}`,
			"01HF0JRA8N2X4ZQ7Y0B6W1T3C5", "message"},
		{"x", `{"created_at":"Tue Nov 14 22:13:20 +0000 2023","id":1724567890123456789,"id_str":"1724567890123456789"}`,
			"1724567890123456789", ""},
		{"x", `{"type":"message_create","id":"1463371534849994756","created_timestamp":"1637686418436"}`,
			"1463371534849994756", "message_create"},
		{"graph", `{"id":"lsgTZMr9KwAAA","clientState":"s","changeType":"created","resource":"Users/u1/Messages/m1"}`,
			"lsgTZMr9KwAAA", "created"},
		{"graph", `{"subscriptionId":"7f10","clientState":"s","lifecycleEvent":"missed"}`, "", "missed"}, // derived by the splitter
		{"telegram", bodies["telegram/valid"], "123456789", ""},
		{"discord", bodies["discord/interaction_ping_valid"], "787053080478613555", "1"},
		{"discord", `{"id":"9","type":2,"data":{"name":"ping"}}`, "9", "2:ping"},
		{"discord", bodies["discord/webhook_event_valid"], "", "APPLICATION_AUTHORIZED"}, // no id: derived
		{"zoom", bodies["zoom/event_valid"], "meeting.started:1700000000123:4444AAAiAAAAAiAiAiiAii==", "meeting.started"},
		{"zoom", `{"event":"user.created","event_ts":1700000000123,"payload":{"object":{"id":"u1"}}}`,
			"user.created:1700000000123:u1", "user.created"},
		{"vonage", bodies["vonage/messages_valid"], "aaaaaaaa-bbbb-4ccc-8ddd-0123456789ab", "text"},
		{"vonage", `{"message_uuid":"aaaa","status":"delivered","timestamp":"2023-11-14T22:13:20Z"}`, "aaaa:delivered", "delivered"},
		{"telnyx", bodies["telnyx/valid"], "b301ed3f-1490-491f-995f-6e64e69674d4", "message.received"},
		{"viber", bodies["viber/message_valid"], "message:5741311803571721087", "message"},
		{"intercom", bodies["intercom/valid"], "notif_78c122d0-23ba-11e4-9464-79b01267cc2e", "contact.user.created"},
		{"zendesk", bodies["zendesk/valid_test_secret"], "2b6c4a2b-5c4d-4b1a-9d6f-0d2f1e6c9a11", "zen:event-type:user.created"},
	} {
		if tc.doc == "" {
			t.Fatalf("%s: no document (a vector renamed?)", tc.scheme)
		}
		p, _ := PresetFor(tc.scheme)
		for i, spec := range []string{p.EventID, p.EventType} {
			want := []string{tc.wantID, tc.wantType}[i]
			if spec == "" && want == "" {
				continue
			}
			ex, err := extract.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ex.Extract(nil, []byte(tc.doc))
			if want == "" && !errors.Is(err, extract.ErrNotFound) || want != "" && (err != nil || got != want) {
				t.Errorf("%s %s on %.60s: %q, %v; want %q", tc.scheme, spec, tc.doc, got, err, want)
			}
		}
	}
}
