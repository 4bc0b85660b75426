package signature

import (
	"crypto/hmac"
	"net/http"
	"strconv"
	"strings"
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
			return &zoomVerifier{keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: func(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
			ts := strconv.FormatInt(now.Unix(), 10)
			h := http.Header{}
			h.Set(zoomTSHeader, ts)
			h.Set(zoomSigHeader, string(zoomSig([]byte(p.Secrets[0]), ts, body)))
			return h, nil, nil
		},
	})
}

const (
	zoomSigHeader = "X-Zm-Signature"
	zoomTSHeader  = "X-Zm-Request-Timestamp"
)

type zoomVerifier struct {
	keys [][]byte
	tol  time.Duration
}

func (v *zoomVerifier) Verify(r *Request) error {
	const sc = "zoom"
	got, err := header(sc, r.Header, zoomSigHeader)
	if err != nil {
		return err
	}
	ts, err := header(sc, r.Header, zoomTSHeader)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(got, "v0=") {
		return fail(sc, ErrMalformed, `x-zm-signature lacks the "v0=" prefix`)
	}
	if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
		return err
	}
	got = "v0=" + strings.ToLower(got[3:])
	for _, k := range v.keys {
		if hmac.Equal(zoomSig(k, ts, r.Body), []byte(got)) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, "x-zm-signature matches no secret")
}

func zoomSig(key []byte, ts string, body []byte) []byte {
	return append([]byte("v0="), hexOf(mac256(key, []byte("v0:"), []byte(ts), []byte{':'}, body))...)
}

// ZoomEncryptedToken is the encryptedToken of Zoom's endpoint.url_validation
// answer: hex HMAC-SHA256(secret token, plainToken). The receiver answers
// {"plainToken": p, "encryptedToken": ZoomEncryptedToken(secret, p)}, with
// the secret that verified the request.
func ZoomEncryptedToken(secretToken, plainToken string) string {
	return string(hexOf(mac256([]byte(secretToken), []byte(plainToken))))
}
