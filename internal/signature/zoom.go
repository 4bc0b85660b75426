package signature

import (
	"net/http"
	"time"
)

// Zoom: x-zm-signature = "v0=" + hex HMAC-SHA256(webhook secret token,
// "v0:" + x-zm-request-timestamp + ":" + raw body); Slack's construction
// under Zoom's header names. Zoom documents no window; SPEC 11 sets 300 s, as
// for Slack. Sources: zoom/webhook-sample index.js; zoom/rivet-javascript.
//
// The endpoint.url_validation POST is signed the same way; the receiver
// verifies it, then answers with ZoomEncryptedToken.
//
// One event a request, with no id: the id is event + event_ts + the object's
// uuid, else its id (SPEC 11).

func init() {
	register(&scheme{
		name: "zoom",
		preset: Preset{
			EventID:   "json:event+json:event_ts+json:payload.object.uuid|json:event+json:event_ts+json:payload.object.id",
			EventType: "json:event",
			EventTime: "json:event_ts", // unix ms
			// Three retries: +5 min, +20 min, +60 min after the one before.
			RetryHorizon: 90 * time.Minute,
			Tolerance:    5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &v0Verifier{scheme: "zoom", sigHeader: zoomSigHeader, tsHeader: zoomTSHeader, lowerHex: true,
				keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: func(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
			return signV0(zoomSigHeader, zoomTSHeader, p, body, now), nil, nil
		},
	})
}

const (
	zoomSigHeader = "X-Zm-Signature"
	zoomTSHeader  = "X-Zm-Request-Timestamp"
)

// ZoomEncryptedToken is the encryptedToken of Zoom's endpoint.url_validation
// answer: hex HMAC-SHA256(secret token, plainToken). The receiver answers
// {"plainToken": p, "encryptedToken": ZoomEncryptedToken(secret, p)}, with
// the secret that verified the request.
func ZoomEncryptedToken(secretToken, plainToken string) string {
	return string(hexOf(mac256([]byte(secretToken), []byte(plainToken))))
}
