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
