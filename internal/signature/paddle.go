package signature

import (
	"net/http"
	"time"
)

// Paddle Billing: Paddle-Signature "ts=<ts>;h1=<hex>", h1 = HMAC-SHA256(secret,
// ts + ":" + body). Several h1 are accepted (any may match) as receiver policy.
// The SDKs allow only 5 s; the default here is 5 min (docs/reference.md, presets), since a
// slow proxy or clock skew of a few seconds would otherwise drop live events.
// Source: PaddleHQ/paddle-go-sdk webhook_verifier.go.

func init() {
	register(&scheme{
		name: "paddle",
		preset: Preset{
			// event_id survives replays; notification_id is per delivery.
			EventID:      "json:event_id",
			EventType:    "json:event_type",
			EventTime:    "json:occurred_at", // RFC 3339
			RetryHorizon: 3 * 24 * time.Hour,
			Tolerance:    5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &tsListVerifier{l: paddleList, keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: signPaddle,
	})
}

// paddleList: several h1 are accepted (any may match) as receiver policy;
// a malformed element fails the header, as in Paddle's SDK.
var paddleList = &tsList{scheme: "paddle", header: "Paddle-Signature", elemSep: ";",
	tsKey: "ts", sigKey: "h1", sep: ':', strict: true}

// parsePaddle returns the timestamp and the decoded signatures of a header value.
func parsePaddle(v string) (ts string, sigs [][]byte, err error) { return paddleList.parse(v) }

func signPaddle(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
	return paddleList.sign(p.Secrets[0], body, now), nil, nil
}
