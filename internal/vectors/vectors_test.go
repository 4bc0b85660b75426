package vectors

import (
	"strings"
	"testing"
)

// The file's shape: every provider has a valid vector, a tampered or
// wrong-secret one and a missing-signature one; every field a test reads is
// set; every published example names where it comes from.
func TestVectorFileShape(t *testing.T) {
	vs, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	type has struct{ valid, mismatch, missing bool }
	by := map[string]*has{}
	for _, v := range vs {
		h := by[v.Provider]
		if h == nil {
			h = &has{}
			by[v.Provider] = h
		}
		if v.Provider == "" || v.Case == "" || v.Reason == "" || v.SecretEncoding == "" {
			t.Errorf("%s: provider, case, reason and secret_encoding must be set", v.Name())
		}
		if s, err := v.Secrets(); err != nil || len(s) == 0 {
			t.Errorf("%s: secrets %v, %v", v.Name(), s, err)
		}
		switch v.Expected {
		case "valid":
			h.valid = true
		case "invalid":
			switch {
			case strings.Contains(v.Case, "missing"):
				h.missing = true
			case strings.Contains(v.Case, "tampered"), strings.Contains(v.Case, "wrong_secret"):
				h.mismatch = true
			}
		default:
			t.Errorf("%s: expected %q, want valid or invalid", v.Name(), v.Expected)
		}
		if strings.HasPrefix(v.Case, "official") && !strings.HasPrefix(v.Source, "official:") && !strings.Contains(v.Case, "tampered") &&
			!strings.Contains(v.Case, "wrong") {
			t.Errorf("%s: a published example must cite it in source, got %q", v.Name(), v.Source)
		}
		if v.Source != "computed" && !strings.HasPrefix(v.Source, "official:") {
			t.Errorf("%s: source %q, want computed or official:<where>", v.Name(), v.Source)
		}
		if (v.Provider == "twilio") != (v.URL != "") {
			t.Errorf("%s: url is for twilio vectors only", v.Name())
		}
	}
	for _, p := range []string{"stripe", "github", "shopify", "slack", "standard-webhooks", "twilio", "paddle",
		"mailgun", "sendgrid", "postmark", "generic-ts-body"} {
		h := by[p]
		if h == nil || !h.valid || !h.mismatch || !h.missing {
			t.Errorf("%s: want a valid, a tampered or wrong-secret and a missing-signature vector, have %+v", p, h)
		}
	}
}

// The messaging file: its 10 published examples cite their source, every
// platform has a valid and an invalid vector, and every handshake says what
// the answer must be.
func TestMessagingFileShape(t *testing.T) {
	vs, err := LoadMessaging()
	if err != nil {
		t.Fatal(err)
	}
	published := 0
	type has struct{ valid, invalid bool }
	by := map[string]*has{}
	for _, v := range vs {
		h := by[v.Provider]
		if h == nil {
			h = &has{}
			by[v.Provider] = h
		}
		switch v.Expected {
		case "valid":
			h.valid = true
		case "invalid":
			h.invalid = true
		default:
			t.Errorf("%s: expected %q, want valid or invalid", v.Name(), v.Expected)
		}
		if strings.HasPrefix(v.Source, "official:") {
			published++
		} else if v.Source != "computed, not published" {
			t.Errorf("%s: source %q, want official:<where> or computed", v.Name(), v.Source)
		}
		if v.Method != "" && v.Response == nil && v.Expected == "valid" {
			t.Errorf("%s: a handshake without the expected response", v.Name())
		}
		if _, err := v.Secrets(); err != nil {
			t.Error(err)
		}
	}
	if published != 10 {
		t.Errorf("%d published examples, want 10", published)
	}
	for _, p := range []string{"meta", "telegram", "line", "discord", "x", "zoom", "vonage", "telnyx", "viber",
		"intercom", "zendesk", "msgraph"} {
		if h := by[p]; h == nil || !h.valid || !h.invalid {
			t.Errorf("%s: want a valid and an invalid vector, have %+v", p, h)
		}
	}
}
