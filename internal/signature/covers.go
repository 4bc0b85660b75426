package signature

import (
	"net/http"
	"strings"
)

// Covered says what the signature of p's scheme authenticates besides the
// secret: the body (as received) and which request headers. A value taken
// from anything else (an event id or type in an unsigned header) can be
// changed by whoever holds one captured request.
//
// mailgun signs a one-time token, not the body (the store refuses a token
// seen with another body); postmark and none sign nothing.
func Covered(p Params) (headers []string, body bool) {
	switch p.Scheme {
	case "postmark", "none", "mailgun":
		return nil, false
	case "standard":
		// Verify refuses a Svix-signed request with another webhook-id.
		return []string{"webhook-id", "webhook-timestamp", "svix-id", "svix-timestamp"}, true
	case "slack":
		return []string{"X-Slack-Request-Timestamp"}, true
	case "sendgrid":
		return []string{sendgridTSHeader}, true
	// The messaging platforms (issue 47); meta, line, x, viber, intercom
	// and vonage (its JWT's payload_hash) cover the body alone: the default.
	case "telegram", "graph":
		// A shared secret in a header (telegram) or in each item of the
		// body (graph's clientState): nothing is signed.
		return nil, false
	case "discord":
		return []string{"X-Signature-Timestamp"}, true
	case "telnyx":
		return []string{"Telnyx-Timestamp"}, true
	case "zoom":
		return []string{"X-Zm-Request-Timestamp"}, true
	case "zendesk":
		return []string{"X-Zendesk-Webhook-Signature-Timestamp"}, true
	case "hmac":
		var hs []string
		if p.HMAC.TimestampHeader != "" {
			hs = append(hs, p.HMAC.TimestampHeader)
		}
		if p.HMAC.IDHeader != "" && strings.Contains(p.HMAC.Signed, "{id}") {
			hs = append(hs, p.HMAC.IDHeader)
		}
		return hs, true
	}
	// stripe, github, shopify, paddle (the body, and a timestamp inside the
	// signature header), twilio (the URL and the parameters or body hash).
	return nil, true
}

// HeaderCovered reports whether the signature of p's scheme covers header name.
func HeaderCovered(p Params, name string) bool {
	hs, _ := Covered(p)
	for _, h := range hs {
		if http.CanonicalHeaderKey(h) == http.CanonicalHeaderKey(name) {
			return true
		}
	}
	return false
}
