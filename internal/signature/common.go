package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Bounds on attacker-controlled input, so the cost of one request cannot grow
// with what the sender chooses to put in a header.
const (
	// maxHeaderLen caps a signature or timestamp header. Real ones are < 300 bytes.
	maxHeaderLen = 4096
	// maxSignatures caps the elements parsed from one signature header.
	maxSignatures = 16
	// maxTimestampDigits allows any plausible unix time in seconds.
	maxTimestampDigits = 18
)

// header returns the first value of a header, refusing absurd lengths.
func header(scheme string, h http.Header, name string) (string, error) {
	v := h.Get(name)
	if v == "" {
		return "", fail(scheme, ErrMissing, "no "+name+" header")
	}
	if len(v) > maxHeaderLen {
		return "", fail(scheme, ErrMalformed, name+" header is too long")
	}
	return v, nil
}

// parseUnix parses a decimal unix timestamp in seconds: ASCII digits only (no
// sign, no spaces), so "t=+1" or "t= 1" are malformed rather than lenient.
func parseUnix(s string) (int64, bool) {
	if s == "" || len(s) > maxTimestampDigits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// checkFresh refuses a timestamp too old or too far in the future. Refusing
// the future too means a leaked signature cannot be pre-dated to live longer.
func checkFresh(scheme, ts string, now time.Time, tol time.Duration) error {
	n, ok := parseUnix(ts)
	if !ok {
		return fail(scheme, ErrMalformed, "timestamp is not a unix time in seconds")
	}
	if tol <= 0 {
		return nil
	}
	if now.IsZero() {
		now = time.Now()
	}
	d := now.Sub(time.Unix(n, 0)) // saturates instead of overflowing
	switch {
	case d > tol:
		return fail(scheme, ErrStale, "timestamp older than the tolerance of "+tol.String())
	case d < -tol:
		return fail(scheme, ErrStale, "timestamp further in the future than the tolerance of "+tol.String())
	}
	return nil
}

// mac computes HMAC(key, parts...) without concatenating the parts.
func mac(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func mac256(key []byte, parts ...[]byte) []byte { return mac(sha256.New, key, parts...) }

func hexOf(b []byte) []byte {
	out := make([]byte, hex.EncodedLen(len(b)))
	hex.Encode(out, b)
	return out
}

func b64Of(b []byte) []byte {
	out := make([]byte, base64.StdEncoding.EncodedLen(len(b)))
	base64.StdEncoding.Encode(out, b)
	return out
}

// rawKeys returns the UTF-8 bytes of each secret: the key derivation of every
// scheme except Standard Webhooks.
func rawKeys(secrets []string) [][]byte {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		keys[i] = []byte(s)
	}
	return keys
}

// splitList splits a signature list on any of seps, dropping empty elements,
// and refuses more than maxSignatures elements.
func splitList(scheme, name, v, seps string) ([]string, error) {
	parts := strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune(seps, r) })
	if len(parts) > maxSignatures {
		return nil, fail(scheme, ErrMalformed, name+" header has more than "+strconv.Itoa(maxSignatures)+" elements")
	}
	return parts, nil
}
