package worker

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestCheckSignAs: a scheme whose signature cannot be made with a shared
// secret, or that signs nothing, is refused with the reason; so is sign_as
// without a secret, or with one the scheme cannot use.
func TestCheckSignAs(t *testing.T) {
	for _, tc := range []struct {
		scheme, secret, want string
	}{
		{"sendgrid", "x", "only SendGrid holds the private key"},
		{"discord", "x", "Ed25519"},
		{"telnyx", "x", "Ed25519"},
		{"mailgun", "x", "inside the body"},
		{"postmark", "x", "signs nothing"},
		{"graph", "x", "signs nothing"},
		{"none", "x", "no signature"},
		{"hmac", "x", "no fixed format"},
		{"nosuch", "x", "want one of"},
		{"stripe", "", "needs signing_secret"},
		{"standard", "whsec_!!!", "base64"},
		{"telegram", "no spaces allowed", "Telegram"},
	} {
		err := CheckSignAs(tc.scheme, tc.secret)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckSignAs(%s) = %v, want an error saying %q", tc.scheme, err, tc.want)
		}
		if err != nil && tc.secret != "" && len(tc.secret) > 3 && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("CheckSignAs(%s) error holds the secret: %v", tc.scheme, err)
		}
	}
	for _, s := range SignAsSchemes() {
		secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		if err := CheckSignAs(s, secret); err != nil {
			t.Errorf("CheckSignAs(%s) = %v, want nil", s, err)
		}
	}
	if _, err := NewHTTP(HTTPConfig{URL: "http://127.0.0.1:1/", SignAs: "sendgrid", SigningSecret: "x"}); err == nil {
		t.Error("NewHTTP with sign_as sendgrid: no error")
	}
}

// TestSignAsHeaders: the provider's signature replaces the Standard
// Webhooks one; Hookwarden-* and Idempotency-Key stay; provider headers
// missing from the receipt come from the event where they can (GitHub's
// event and delivery), and the signer's placeholders are not sent.
func TestSignAsHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header }))
	defer srv.Close()
	h, err := NewHTTP(HTTPConfig{URL: srv.URL, SignAs: "github", SigningSecret: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	job := &hookwarden.Job{Source: "gh", EventID: "d-1", EventType: "push", Attempt: 3, ContentType: "application/json",
		Body: []byte(`{}`), Header: http.Header{"X-Hub-Signature-256": {"sha256=old"}}}
	if res := h.Deliver(context.Background(), job); res.Class != Success {
		t.Fatalf("Deliver: %+v", res)
	}
	hdr := <-got
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(`{}`))
	for name, want := range map[string]string{
		"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-1", "Idempotency-Key": "gh:d-1", "Hookwarden-Attempt": "3",
		"Hookwarden-Event-Id": "d-1", "Content-Type": "application/json",
		"X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil)),
	} {
		if hdr.Get(name) != want {
			t.Errorf("%s = %q, want %q", name, hdr.Get(name), want)
		}
	}
	if !strings.HasPrefix(hdr.Get("X-Hub-Signature"), "sha1=") {
		t.Errorf("X-Hub-Signature = %q, want the legacy SHA-1 signature GitHub sends too", hdr.Get("X-Hub-Signature"))
	}
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "X-GitHub-Hook-ID"} {
		if v := hdr.Get(name); v != "" {
			t.Errorf("%s = %q, want none", name, v)
		}
	}
}

// TestSignAsUnsignable: a body the scheme cannot sign (a Twilio form that
// does not decode) fails the same way every time: poison, with the reason.
func TestSignAsUnsignable(t *testing.T) {
	h, err := NewHTTP(HTTPConfig{URL: "http://127.0.0.1:1/", SignAs: "twilio", SigningSecret: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res := h.Deliver(context.Background(), &hookwarden.Job{Source: "tw", EventID: "1", ContentType: "application/x-www-form-urlencoded",
		Body: []byte("a=%zz")})
	if res.Class != Permanent || res.Err == nil || !strings.Contains(res.Err.Error(), "sign request as twilio") {
		t.Fatalf("Deliver = %+v, want a permanent signing error", res)
	}
}

// FuzzSignAs: whatever the provider sent (body, content type, headers kept
// in the receipt), signing as any scheme never panics, and either fails
// (a poison delivery) or gives headers the request can carry.
func FuzzSignAs(f *testing.F) {
	f.Add(uint8(0), []byte(`{"id":"evt_1"}`), "application/json", "push", "d-1")
	f.Add(uint8(7), []byte("a=1&b=%zz"), "application/x-www-form-urlencoded; charset=utf-8", "", "")
	f.Add(uint8(3), []byte{0xff, 0x00}, "text/plain;;", "x\r\ny", "\x00")
	schemes := SignAsSchemes()
	f.Fuzz(func(t *testing.T, pick uint8, body []byte, contentType, hv, id string) {
		scheme := schemes[int(pick)%len(schemes)]
		job := &hookwarden.Job{Source: "s", EventID: id, EventType: hv, ContentType: contentType, Body: body,
			Header: http.Header{"X-Github-Event": {hv}, "X-Shopify-Topic": {hv}, "X-Slack-Retry-Num": {hv}}}
		h, u, err := signAs(scheme, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "http://127.0.0.1:1/x?a=b", job, time.Unix(1700000000, 0))
		if err != nil {
			return
		}
		if !strings.HasPrefix(u, "http://127.0.0.1:1/x?a=b") {
			t.Fatalf("URL %q is not the destination's", u)
		}
		if len(h) == 0 {
			t.Fatalf("%s: no signature headers", scheme)
		}
	})
}
