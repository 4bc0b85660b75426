package signature

import (
	"net/http"
	"time"
)

// Stripe: Stripe-Signature "t=<ts>,v1=<hex>[,v1=<hex>][,v0=...]",
// v1 = HMAC-SHA256(UTF-8 bytes of the whole "whsec_..." secret, ts + "." + body).
// Any v1 may match; v0 and unknown keys are ignored so a downgrade to v0 fails.
// Source: stripe-go webhook/client.go.

func init() {
	register(&scheme{
		name: "stripe",
		preset: Preset{
			EventID:      "json:id",
			EventType:    "json:type",
			EventTime:    "json:created",
			RetryHorizon: 3 * 24 * time.Hour,
			Tolerance:    5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &tsListVerifier{l: stripeList, keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: signStripe,
	})
}

// stripeList: any v1 may match; v0 and unknown keys are ignored so a
// downgrade to v0 fails; like stripe-go, an undecodable v1 is skipped.
var stripeList = &tsList{scheme: "stripe", header: "Stripe-Signature", elemSep: ",",
	tsKey: "t", sigKey: "v1", sep: '.'}

// parseStripe returns the timestamp and the decoded signatures of a header value.
func parseStripe(v string) (ts string, sigs [][]byte, err error) { return stripeList.parse(v) }

func signStripe(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
	return stripeList.sign(p.Secrets[0], body, now), nil, nil
}
