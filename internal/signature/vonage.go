package signature

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Vonage (Messages and Dispatch; Voice in preview): Authorization: Bearer
// <JWT>, HS256 with the account's signature secret; its payload_hash claim
// is the lowercase hex SHA-256 of the raw body, which binds the body to the
// token. Checked here without a JWT library (a few dozen lines): alg must be
// HS256 (no "none", no RS256 key confusion); the MAC of header.payload must
// match a secret; iat must lie within the tolerance (receiver policy, M);
// exp, when present, must not be past; payload_hash must match the body, and
// a token without one is accepted only for an empty body (the published SDK
// token has none). Several secrets: rotation (the api_key claim names the
// account, not the secret). Sources: developer.vonage.com
// messages/concepts/signed-webhooks; Vonage/vonage-python-sdk
// jwt/tests/test_verify_jwt.py (reproduced in internal/vectors).
//
// Vonage's docs call the payload_hash check optional; its Voice support
// article hashes the parameters as compact JSON in their order, which is the
// raw body when Vonage sends compact JSON, as it does in every example read.
// A callback whose body Vonage re-spaced after hashing would be refused here.
//
// Vonage sends an unsigned callback "in the rare case of an internal error";
// it is refused 401, and Vonage retries only 429 and 5xx, so such a callback
// is lost (Vonage suggests answering 5xx to have it retried signed).

func init() {
	register(&scheme{
		name: "vonage",
		preset: Preset{
			// Status webhooks repeat the message's uuid once per status.
			EventID:   "json:message_uuid+json:status|json:message_uuid",
			EventType: "json:status|json:message_type",
			// 429/5xx: from 5 s doubling to 15 min, for 24 h.
			RetryHorizon: 24 * time.Hour,
			Tolerance:    5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &vonageVerifier{keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: signVonage,
	})
}

type vonageVerifier struct {
	keys [][]byte
	tol  time.Duration
}

var b64url = base64.RawURLEncoding

func (v *vonageVerifier) Verify(r *Request) error {
	const sc = "vonage"
	a, err := header(sc, r.Header, "Authorization")
	if err != nil {
		return err
	}
	kind, tok, ok := strings.Cut(a, " ")
	if !ok || !strings.EqualFold(kind, "Bearer") {
		return fail(sc, ErrMalformed, "Authorization is not a Bearer token")
	}
	parts := strings.Split(strings.TrimSpace(tok), ".")
	if len(parts) != 3 {
		return fail(sc, ErrMalformed, "the Bearer token is not a JWT")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	hb, err := b64url.DecodeString(parts[0])
	if err != nil || json.Unmarshal(hb, &hdr) != nil {
		return fail(sc, ErrMalformed, "the JWT header does not decode")
	}
	if hdr.Alg != "HS256" {
		return fail(sc, ErrMalformed, "the JWT is not HS256")
	}
	sig, err := b64url.DecodeString(parts[2])
	if err != nil || len(sig) != sha256.Size {
		return fail(sc, ErrMalformed, "the JWT signature does not decode")
	}
	signed := []byte(parts[0] + "." + parts[1])
	match := false
	for _, k := range v.keys {
		match = hmac.Equal(mac256(k, signed), sig) || match
	}
	if !match {
		return fail(sc, ErrMismatch, "the JWT matches no signature secret")
	}
	// The claims are Vonage's from here on.
	var c struct {
		Iat         json.Number `json:"iat"`
		Exp         json.Number `json:"exp"`
		PayloadHash *string     `json:"payload_hash"`
	}
	cb, err := b64url.DecodeString(parts[1])
	if err != nil || json.Unmarshal(cb, &c) != nil {
		return fail(sc, ErrMalformed, "the JWT claims do not decode")
	}
	if c.Iat == "" {
		return fail(sc, ErrMalformed, "the JWT has no iat")
	}
	if err := checkFresh(sc, c.Iat.String(), r.Now, v.tol); err != nil {
		return err
	}
	if c.Exp != "" {
		exp, ok := parseUnix(c.Exp.String())
		now := r.Now
		if now.IsZero() {
			now = time.Now()
		}
		if !ok {
			return fail(sc, ErrMalformed, "the JWT's exp is not a unix time")
		}
		if now.Unix() >= exp {
			return fail(sc, ErrStale, "the JWT has expired")
		}
	}
	if c.PayloadHash == nil {
		if len(r.Body) > 0 {
			return fail(sc, ErrMismatch, "the JWT has no payload_hash: it does not cover the body")
		}
		return nil
	}
	want := sha256.Sum256(r.Body)
	if !hmac.Equal(hexOf(want[:]), []byte(strings.ToLower(*c.PayloadHash))) {
		return fail(sc, ErrMismatch, "payload_hash differs from the body's SHA-256")
	}
	return nil
}

// signVonage mints the token Vonage would send: HS256 over iat, jti (msgID,
// else random), iss and payload_hash.
func signVonage(p Params, body []byte, now time.Time, msgID string) (http.Header, []byte, error) {
	if msgID == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		msgID = hex.EncodeToString(b)
	}
	sum := sha256.Sum256(body)
	claims, err := json.Marshal(map[string]any{"iat": now.Unix(), "jti": msgID, "iss": "Vonage",
		"payload_hash": hex.EncodeToString(sum[:])})
	if err != nil {
		return nil, nil, err
	}
	head := b64url.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + b64url.EncodeToString(claims)
	tok := head + "." + b64url.EncodeToString(mac256([]byte(p.Secrets[0]), []byte(head)))
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok)
	return h, nil, nil
}
