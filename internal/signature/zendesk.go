package signature

import (
	"crypto/hmac"
	"net/http"
	"time"
)

// Zendesk webhooks: X-Zendesk-Webhook-Signature = base64 HMAC-SHA256(signing
// secret as given, X-Zendesk-Webhook-Signature-Timestamp + raw body), no
// separator. The secret looks like base64 but is used verbatim (vector
// zendesk/secret_base64_decoded). Requests without a body (GET, DELETE
// webhooks) sign the timestamp alone. Source: developer.zendesk.com
// documentation/webhooks/verifying.
//
// The timestamp is ISO 8601 (L) and Zendesk documents no window, so it is
// signed but not checked against the clock: the tolerance does not apply.
//
// Event-subscription webhooks carry id and type; trigger and automation
// webhooks send the body the admin wrote, with no id unless it puts one in
// (else quarantined).

func init() {
	register(&scheme{
		name: "zendesk",
		preset: Preset{
			EventID:   "json:id",
			EventType: "json:type",
			// Some status codes are retried, behind a circuit breaker; the
			// schedule is not published (L).
			RetryHorizon: 24 * time.Hour,
		},
		build: func(p Params) (Verifier, error) { return &zendeskVerifier{keys: rawKeys(p.Secrets)}, nil },
		sign: func(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
			ts := now.UTC().Format(time.RFC3339)
			h := http.Header{}
			h.Set(zendeskTSHeader, ts)
			h.Set(zendeskSigHeader, string(zendeskSig([]byte(p.Secrets[0]), ts, body)))
			return h, nil, nil
		},
	})
}

const (
	zendeskSigHeader = "X-Zendesk-Webhook-Signature"
	zendeskTSHeader  = "X-Zendesk-Webhook-Signature-Timestamp"
)

type zendeskVerifier struct{ keys [][]byte }

func zendeskSig(key []byte, ts string, body []byte) []byte {
	return b64Of(mac256(key, []byte(ts), body))
}

func (v *zendeskVerifier) Verify(r *Request) error {
	const sc = "zendesk"
	got, err := header(sc, r.Header, zendeskSigHeader)
	if err != nil {
		return err
	}
	ts, err := header(sc, r.Header, zendeskTSHeader)
	if err != nil {
		return err
	}
	for _, k := range v.keys {
		if hmac.Equal(zendeskSig(k, ts, r.Body), []byte(got)) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, zendeskSigHeader+" matches no secret")
}
