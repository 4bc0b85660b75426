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
			return &slackVerifier{keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: signSlack,
	})
}

type slackVerifier struct {
	keys [][]byte
	tol  time.Duration
}

func (v *slackVerifier) Verify(r *Request) error {
	const sc = "slack"
	got, err := header(sc, r.Header, "X-Slack-Signature")
	if err != nil {
		return err
	}
	ts, err := header(sc, r.Header, "X-Slack-Request-Timestamp")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(got, "v0=") {
		return fail(sc, ErrMalformed, `X-Slack-Signature lacks the "v0=" prefix`)
	}
	if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
		return err
	}
	for _, k := range v.keys {
		if hmac.Equal(slackSig(k, ts, r.Body), []byte(got)) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, "X-Slack-Signature matches no secret")
}

func slackSig(key []byte, ts string, body []byte) []byte {
	return append([]byte("v0="), hexOf(mac256(key, []byte("v0:"), []byte(ts), []byte{':'}, body))...)
}

func signSlack(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", string(slackSig([]byte(p.Secrets[0]), ts, body)))
	return h, nil, nil
}
