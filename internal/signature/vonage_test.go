package signature

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// jwtFor mints an HS256-shaped token with the given header and claims JSON,
// MAC'd with key (what a forger or a misconfigured sender could send).
func jwtFor(key, head, claims string) http.Header {
	h := b64url.EncodeToString([]byte(head)) + "." + b64url.EncodeToString([]byte(claims))
	return http.Header{"Authorization": {"Bearer " + h + "." + b64url.EncodeToString(mac256([]byte(key), []byte(h)))}}
}

// The JWT rules beyond the vectors: pinned algorithm, expiry, the body bound
// by payload_hash (in either hex case), an empty body the only one a token
// without payload_hash may carry.
func TestVonageJWT(t *testing.T) {
	t.Parallel()
	const key = "vonage-secret"
	v, err := New(Params{Scheme: "vonage", Secrets: []string{"other", key}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"message_uuid":"m1","status":"delivered"}`)
	sum := sha256.Sum256(body)
	ph := hex.EncodeToString(sum[:])
	const hs = `{"alg":"HS256","typ":"JWT"}`
	for _, tc := range []struct {
		name string
		h    http.Header
		body []byte
		want error
	}{
		{"valid", jwtFor(key, hs, `{"iat":1700000000,"payload_hash":"`+ph+`"}`), body, nil},
		{"uppercase hash", jwtFor(key, hs, `{"iat":1700000000,"payload_hash":"`+strings.ToUpper(ph)+`"}`), body, nil},
		{"rs256 header", jwtFor(key, `{"alg":"RS256"}`, `{"iat":1700000000,"payload_hash":"`+ph+`"}`), body, ErrMalformed},
		{"expired", jwtFor(key, hs, `{"iat":1700000000,"exp":1699999999,"payload_hash":"`+ph+`"}`), body, ErrStale},
		{"no iat", jwtFor(key, hs, `{"payload_hash":"`+ph+`"}`), body, ErrMalformed},
		{"iat not an integer", jwtFor(key, hs, `{"iat":1.7e9,"payload_hash":"`+ph+`"}`), body, ErrMalformed},
		{"no payload_hash, a body", jwtFor(key, hs, `{"iat":1700000000}`), body, ErrMismatch},
		{"no payload_hash, no body", jwtFor(key, hs, `{"iat":1700000000}`), nil, nil},
		{"wrong secret", jwtFor("guess", hs, `{"iat":1700000000,"payload_hash":"`+ph+`"}`), body, ErrMismatch},
		{"basic auth", http.Header{"Authorization": {"Basic dTpw"}}, body, ErrMalformed},
		{"two parts", http.Header{"Authorization": {"Bearer a.b"}}, body, ErrMalformed},
		{"no header", http.Header{}, body, ErrMissing},
	} {
		err := v.Verify(&Request{Header: tc.h, Body: tc.body, Now: t0})
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}
