package signature

import (
	"crypto/hmac"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Paddle Billing: Paddle-Signature "ts=<ts>;h1=<hex>", h1 = HMAC-SHA256(secret,
// ts + ":" + body). Several h1 are accepted (any may match) as receiver policy.
// The SDKs allow only 5 s; the default here is 5 min (providers.md), since a
// slow proxy or clock skew of a few seconds would otherwise drop live events.
// Source: PaddleHQ/paddle-go-sdk webhook_verifier.go.

func init() {
	register(&scheme{
		name: "paddle",
		preset: Preset{
			// event_id survives replays; notification_id is per delivery.
			EventID:      "json:event_id",
			EventType:    "json:event_type",
			RetryHorizon: 3 * 24 * time.Hour,
			Tolerance:    5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &paddleVerifier{keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: signPaddle,
	})
}

type paddleVerifier struct {
	keys [][]byte
	tol  time.Duration
}

// parsePaddle returns ts and the hex-decoded h1 signatures.
func parsePaddle(v string) (ts string, h1 [][]byte, err error) {
	const sc = "paddle"
	parts, err := splitList(sc, "Paddle-Signature", v, ";")
	if err != nil {
		return "", nil, err
	}
	for _, p := range parts {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return "", nil, fail(sc, ErrMalformed, "Paddle-Signature element without '='")
		}
		switch k {
		case "ts":
			if ts != "" {
				return "", nil, fail(sc, ErrMalformed, "Paddle-Signature has more than one ts")
			}
			ts = val
		case "h1":
			b, err := hex.DecodeString(val)
			if err != nil || len(b) != 32 {
				return "", nil, fail(sc, ErrMalformed, "Paddle-Signature h1 is not 64 hex digits")
			}
			h1 = append(h1, b)
		}
	}
	if ts == "" {
		return "", nil, fail(sc, ErrMalformed, "Paddle-Signature has no ts")
	}
	if len(h1) == 0 {
		return "", nil, fail(sc, ErrMalformed, "Paddle-Signature has no h1")
	}
	return ts, h1, nil
}

func (v *paddleVerifier) Verify(r *Request) error {
	const sc = "paddle"
	hv, err := header(sc, r.Header, "Paddle-Signature")
	if err != nil {
		return err
	}
	ts, sigs, err := parsePaddle(hv)
	if err != nil {
		return err
	}
	if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
		return err
	}
	for _, k := range v.keys {
		want := mac256(k, []byte(ts), []byte{':'}, r.Body)
		for _, got := range sigs {
			if hmac.Equal(want, got) {
				return nil
			}
		}
	}
	return fail(sc, ErrMismatch, "no h1 signature matches any secret")
}

func signPaddle(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := hexOf(mac256([]byte(p.Secrets[0]), []byte(ts), []byte{':'}, body))
	h := http.Header{}
	h.Set("Paddle-Signature", "ts="+ts+";h1="+string(sig))
	return h, nil, nil
}
