package signature

import (
	"crypto/hmac"
	"net/http"
	"time"
)

// Shopify: X-Shopify-Hmac-Sha256 = base64 HMAC-SHA256(client secret, body),
// compared as exact strings (hex is refused). After a secret rotation Shopify
// may sign with the old secret for about an hour: configure [new, old].
// Source: Shopify/shopify-app-js hmac-validator.ts, shopify.dev verify-deliveries.

func init() {
	register(&scheme{
		name: "shopify",
		preset: Preset{
			// Event-Id is the documented duplicate key; older apps only get Webhook-Id.
			EventID:      "header:X-Shopify-Event-Id|header:X-Shopify-Webhook-Id",
			EventType:    "header:X-Shopify-Topic",
			RetryHorizon: 4 * time.Hour,
		},
		build: func(p Params) (Verifier, error) {
			return &shopifyVerifier{keys: rawKeys(p.Secrets)}, nil
		},
		sign: signShopify,
	})
}

type shopifyVerifier struct{ keys [][]byte }

func (v *shopifyVerifier) Verify(r *Request) error {
	const sc = "shopify"
	got, err := header(sc, r.Header, "X-Shopify-Hmac-Sha256")
	if err != nil {
		return err
	}
	for _, k := range v.keys {
		if hmac.Equal(b64Of(mac256(k, r.Body)), []byte(got)) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, "X-Shopify-Hmac-Sha256 matches no secret")
}

func signShopify(p Params, body []byte, _ time.Time, msgID string) (http.Header, []byte, error) {
	h := http.Header{}
	h.Set("X-Shopify-Hmac-Sha256", string(b64Of(mac256([]byte(p.Secrets[0]), body))))
	if msgID != "" {
		h.Set("X-Shopify-Event-Id", msgID)
		h.Set("X-Shopify-Webhook-Id", msgID)
	}
	return h, nil, nil
}
