package signature

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"time"
)

// bodyMAC is the shape shared by meta, line, x, viber and intercom: one
// header holding prefix + encoding(HMAC(secret as UTF-8, raw body)), no
// timestamp. Each of those files registers it with its own header, prefix,
// hash, encoding and preset.
type bodyMAC struct {
	scheme, header, prefix string
	alg                    func() hash.Hash
	hex                    bool // hex (compared in either case) or base64 (exact)
	keys                   [][]byte
	// legacy is a header whose presence alone (without header) means the
	// sender uses an older scheme we refuse: reported as missing, not as a
	// mismatch, so the operator sees what to change.
	legacy string
}

// SecretError says which configured secret is unusable and why; config
// reports it under sources[i].secrets[Index]. It never holds the secret.
type SecretError struct {
	Index int
	Err   error
}

func (e *SecretError) Error() string { return fmt.Sprintf("secrets[%d]: %v", e.Index, e.Err) }
func (e *SecretError) Unwrap() error { return e.Err }

func secretErr(i int, format string, args ...any) error {
	return &SecretError{Index: i, Err: fmt.Errorf(format, args...)}
}

func registerBodyMAC(tmpl bodyMAC, preset Preset) {
	register(&scheme{
		name:   tmpl.scheme,
		preset: preset,
		build: func(p Params) (Verifier, error) {
			v := tmpl
			v.keys = rawKeys(p.Secrets)
			return &v, nil
		},
		sign: func(p Params, body []byte, _ time.Time, _ string) (http.Header, []byte, error) {
			h := http.Header{}
			h.Set(tmpl.header, string(tmpl.sig([]byte(p.Secrets[0]), body)))
			return h, nil, nil
		},
	})
}

func (v *bodyMAC) sig(key, body []byte) []byte {
	sum := mac(v.alg, key, body)
	if v.hex {
		return append([]byte(v.prefix), hexOf(sum)...)
	}
	return append([]byte(v.prefix), b64Of(sum)...)
}

func (v *bodyMAC) Verify(r *Request) error {
	sc := v.scheme
	if v.legacy != "" && r.Header.Get(v.header) == "" && r.Header.Get(v.legacy) != "" {
		return fail(sc, ErrMissing, "only the legacy "+v.legacy+" is present; "+v.header+" is required")
	}
	got, err := header(sc, r.Header, v.header)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(got, v.prefix) {
		return fail(sc, ErrMalformed, v.header+` lacks the "`+v.prefix+`" prefix`)
	}
	if v.hex {
		got = v.prefix + strings.ToLower(got[len(v.prefix):])
	}
	for _, k := range v.keys {
		if hmac.Equal(v.sig(k, r.Body), []byte(got)) {
			return nil
		}
	}
	return fail(sc, ErrMismatch, v.header+" matches no secret")
}

// errNoPrivateKey is the sign error of the schemes whose secret is the
// provider's public key.
func errNoPrivateKey(provider string) error {
	return errors.New("cannot sign: the configured secret is " + provider + "'s public key and only " + provider +
		" holds the private key; tests sign with their own key pair (signature.SignEd25519)")
}
