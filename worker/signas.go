package worker

// sign_as: a delivery signed in the provider's own format, so an app that
// verifies with the provider's SDK works unchanged behind Hookwarden.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/signature"
)

// providerHeader is a header of the provider's that its SDK or the app
// reads: copied from the receipt where the provider sent it, else made from
// the job (def), else left out.
type providerHeader struct {
	name string
	def  func(j *hookwarden.Job) string
}

func eventType(j *hookwarden.Job) string { return j.EventType }
func eventID(j *hookwarden.Job) string   { return j.EventID }

// signAsSchemes are the schemes a delivery can be signed as, each with the
// provider headers it carries besides its signature. Keep docs/reference.md
// (sign_as) in step.
var signAsSchemes = map[string][]providerHeader{
	"stripe": nil,
	"github": {{"X-GitHub-Event", eventType}, {"X-GitHub-Delivery", eventID}, {"X-GitHub-Hook-ID", nil},
		{"X-GitHub-Hook-Installation-Target-ID", nil}, {"X-GitHub-Hook-Installation-Target-Type", nil}},
	"shopify": {{"X-Shopify-Topic", eventType}, {"X-Shopify-Shop-Domain", nil}, {"X-Shopify-API-Version", nil},
		{"X-Shopify-Webhook-Id", eventID}, {"X-Shopify-Event-Id", nil}, {"X-Shopify-Triggered-At", nil},
		{"X-Shopify-Sub-Topic", nil}, {"X-Shopify-Name", nil}},
	"slack":    {{"X-Slack-Retry-Num", nil}, {"X-Slack-Retry-Reason", nil}},
	"standard": nil,
	"svix":     nil, // standard under svix-* names
	"paddle":   nil,
	"twilio":   {{"I-Twilio-Idempotency-Token", eventID}, {"X-Home-Region", nil}},
	"zoom":     nil,
	"meta":     nil,
	"line":     nil,
	"x":        nil,
	"viber":    nil,
	"intercom": nil,
	"zendesk":  {{"X-Zendesk-Webhook-Id", nil}, {"X-Zendesk-Webhook-Invocation-Id", nil}, {"X-Zendesk-Account-Id", nil}},
	"telegram": nil,
	"vonage":   nil,
}

// signAsRefused says why a scheme cannot be signed as.
var signAsRefused = map[string]string{
	"sendgrid": "SendGrid signs with ECDSA: the secret is SendGrid's public key and only SendGrid holds the private key",
	"discord":  "Discord signs with Ed25519: the secret is Discord's public key and only Discord holds the private key",
	"telnyx":   "Telnyx signs with Ed25519: the secret is Telnyx's public key and only Telnyx holds the private key",
	"mailgun":  "Mailgun's signature is inside the body, and the body is delivered byte for byte, never changed",
	"postmark": "Postmark signs nothing (basic auth in the URL): put the credentials in the destination's url",
	"none":     "scheme none has no signature to make",
	"graph":    "Microsoft Graph signs nothing: its clientState is inside the body, which is never changed",
	"hmac":     "the generic hmac scheme has no fixed format to sign in: use a preset, or signing_secret alone (Standard Webhooks)",
}

// SignAsSchemes lists the schemes sign_as accepts, sorted.
func SignAsSchemes() []string {
	names := make([]string, 0, len(signAsSchemes))
	for n := range signAsSchemes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CheckSignAs reports whether deliveries can be signed as scheme with
// secret (the resolved signing_secret): nil, or why not. The error never
// holds the secret.
func CheckSignAs(scheme, secret string) error {
	if err := SignAsRefusal(scheme); err != nil {
		return err
	}
	if secret == "" {
		return fmt.Errorf("sign_as %s needs signing_secret: the %s secret the app verifies with", scheme, scheme)
	}
	// Sign once: a secret of the wrong format (a Telegram token with other
	// characters, a whsec_ secret that is not base64) is refused now, not
	// on every attempt.
	if _, _, err := signAs(scheme, secret, "https://check.invalid/", &hookwarden.Job{EventID: "check", Body: []byte("{}"),
		ContentType: "application/json"}, time.Unix(1700000000, 0)); err != nil {
		var se *signature.SecretError
		if errors.As(err, &se) {
			err = se.Err
		}
		return fmt.Errorf("signing_secret for sign_as %s: %w", scheme, err)
	}
	return nil
}

// SignAsRefusal says why deliveries can never be signed as scheme, whatever
// the secret; nil if they can.
func SignAsRefusal(scheme string) error {
	if why, ok := signAsRefused[scheme]; ok {
		return fmt.Errorf("cannot sign as %s: %s", scheme, why)
	}
	if _, ok := signAsSchemes[scheme]; !ok {
		return fmt.Errorf("cannot sign as %q: want one of %s", scheme, strings.Join(SignAsSchemes(), ", "))
	}
	return nil
}

// signAs returns the headers that sign job's body as scheme at now, with
// the provider headers of the scheme, and the URL to POST to (twilio's JSON
// bodies carry their hash in the URL, as Twilio sends them; else url).
func signAs(scheme, secret, url string, job *hookwarden.Job, now time.Time) (http.Header, string, error) {
	p := signature.Params{Scheme: scheme, Secrets: []string{secret}, PublicURL: url}
	body := job.Body
	if scheme == "svix" {
		p.Scheme = "standard"
	}
	if scheme == "twilio" && !isForm(job.ContentType) {
		// Twilio's JSON webhooks: the URL carries bodySHA256 (hex SHA-256 of
		// the body) and the signature covers the URL alone.
		// (A fragment is never sent: the hash goes before it.)
		sum := sha256.Sum256(job.Body)
		url, _, _ = strings.Cut(url, "#")
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		url += sep + "bodySHA256=" + hex.EncodeToString(sum[:])
		p.PublicURL, body = url, nil
	}
	h, err := signature.Sign(p, body, now, job.EventID)
	if err != nil {
		return nil, "", err
	}
	switch scheme {
	case "svix":
		for _, f := range []string{"id", "timestamp", "signature"} {
			h.Set("svix-"+f, h.Get("webhook-"+f))
			h.Del("webhook-" + f)
		}
	case "github":
		// GitHub sends the legacy SHA-1 signature beside the SHA-256 one,
		// and older handlers read only that: "sha1=" + hex HMAC-SHA1 of the
		// body, which is exactly intercom's format (same header name).
		legacy, err := signature.Sign(signature.Params{Scheme: "intercom", Secrets: []string{secret}}, job.Body, now, "")
		if err != nil {
			return nil, "", err
		}
		h.Set("X-Hub-Signature", legacy.Get("X-Hub-Signature"))
	}
	h.Del("Content-Type") // the job's own (twilio's signer sets the form type)
	for _, ph := range signAsSchemes[scheme] {
		switch v := job.Header.Get(ph.name); {
		case v != "":
			h.Set(ph.name, v)
		case ph.def != nil && ph.def(job) != "":
			h.Set(ph.name, ph.def(job))
		default:
			h.Del(ph.name) // the signer's placeholder (github's "ping")
		}
	}
	return h, url, nil
}

func isForm(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/x-www-form-urlencoded"
}
