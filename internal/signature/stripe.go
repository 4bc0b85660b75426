package signature

import (
	"crypto/hmac"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
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
			RetryHorizon: 3 * 24 * time.Hour,
			Tolerance:    5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &stripeVerifier{keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: signStripe,
	})
}

type stripeVerifier struct {
	keys [][]byte
	tol  time.Duration
}

// parseStripe returns t and the hex-decoded v1 signatures of a Stripe-Signature
// header value.
func parseStripe(v string) (ts string, v1 [][]byte, err error) {
	const sc = "stripe"
	parts, err := splitList(sc, "Stripe-Signature", v, ",")
	if err != nil {
		return "", nil, err
	}
	for _, p := range parts {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if ts != "" {
				return "", nil, fail(sc, ErrMalformed, "Stripe-Signature has more than one t")
			}
			ts = val
		case "v1":
			// Like stripe-go, an undecodable v1 is skipped, not fatal.
			if b, err := hex.DecodeString(val); err == nil && len(b) == 32 {
				v1 = append(v1, b)
			}
		}
	}
	if ts == "" {
		return "", nil, fail(sc, ErrMalformed, "Stripe-Signature has no t")
	}
	if len(v1) == 0 {
		return "", nil, fail(sc, ErrMalformed, "Stripe-Signature has no valid v1 signature")
	}
	return ts, v1, nil
}

func (v *stripeVerifier) Verify(r *Request) error {
	const sc = "stripe"
	hv, err := header(sc, r.Header, "Stripe-Signature")
	if err != nil {
		return err
	}
	ts, sigs, err := parseStripe(hv)
	if err != nil {
		return err
	}
	if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
		return err
	}
	for _, k := range v.keys {
		want := mac256(k, []byte(ts), []byte{'.'}, r.Body)
		for _, got := range sigs {
			if hmac.Equal(want, got) {
				return nil
			}
		}
	}
	return fail(sc, ErrMismatch, "no v1 signature matches any secret")
}

func signStripe(p Params, body []byte, now time.Time, _ string) (http.Header, []byte, error) {
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := hexOf(mac256([]byte(p.Secrets[0]), []byte(ts), []byte{'.'}, body))
	h := http.Header{}
	h.Set("Stripe-Signature", "t="+ts+",v1="+string(sig))
	return h, nil, nil
}
