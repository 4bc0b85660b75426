package signature

import (
	"crypto/hmac"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Slack: X-Slack-Signature = "v0=" + hex HMAC-SHA256(signing secret,
// "v0:" + X-Slack-Request-Timestamp + ":" + body), compared as exact strings.
// Source: api.slack.com/authentication/verifying-requests-from-slack.

func init() {
	register(&scheme{
		name: "slack",
		preset: Preset{
			// Events API carries event_id; slash commands and interactivity
			// (form bodies) carry a per-interaction trigger_id instead.
			EventID:   "json:event_id|form:trigger_id",
			EventType: "json:event.type|json:type|form:command",
			EventTime: "json:event_time", // Events API, unix seconds
			// Retries: about immediately, +1 min, +5 min.
			RetryHorizon: 10 * time.Minute,
			Tolerance:    5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &v0Verifier{scheme: "slack", sigHeader: "X-Slack-Signature", tsHeader: "X-Slack-Request-Timestamp",
				keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: signSlack,
	})
}

// v0Verifier is Slack's construction, which Zoom uses under its own header
// names: sigHeader = "v0=" + hex HMAC-SHA256(secret, "v0:" + the tsHeader
// value + ":" + body), with the timestamp within the tolerance.
type v0Verifier struct {
	scheme, sigHeader, tsHeader string
	// lowerHex compares the hex case-insensitively (Zoom's samples lower
	// it); Slack's are compared as exact strings.
	lowerHex bool
	keys     [][]byte
	tol      time.Duration
}

func (v *v0Verifier) Verify(r *Request) error {
	sc := v.scheme
	got, err := header(sc, r.Header, v.sigHeader)
	if err != nil {
		return err
	}
	ts, err := header(sc, r.Header, v.tsHeader)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(got, "v0=") {
		return fail(sc, ErrMalformed, v.sigHeader+` lacks the "v0=" prefix`)
	}
	if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
		return err
	}
	if v.lowerHex {
		got = "v0=" + strings.ToLower(got[3:])
	}
	for _, k := range v.keys {
		if hmac.Equal(v0Sig(k, ts, r.Body), []byte(got)) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, v.sigHeader+" matches no secret")
}

func v0Sig(key []byte, ts string, body []byte) []byte {
	return append([]byte("v0="), hexOf(mac256(key, []byte("v0:"), []byte(ts), []byte{':'}, body))...)
}

// signV0 signs as v0Verifier checks, with the first secret.
func signV0(sigHeader, tsHeader string, p Params, body []byte, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set(tsHeader, ts)
	h.Set(sigHeader, string(v0Sig([]byte(p.Secrets[0]), ts, body)))
	return h
}

func signSlack(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
	return signV0("X-Slack-Signature", "X-Slack-Request-Timestamp", p, body, now), nil, nil
}
