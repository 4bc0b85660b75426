package pgstore

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzHeaderEncoding: any request headers a provider can send (field
// names that are tokens, values without CR, LF or other control bytes but
// tab) are stored as text PostgreSQL takes (UTF-8, no NUL) and read back as
// received, a value that is not UTF-8 with U+FFFD in place of its bad
// bytes. What events show prints is what came in.
func FuzzHeaderEncoding(f *testing.F) {
	f.Add("Content-Type", "application/json", "Webhook-Id", "msg_1")
	f.Add("X-Hub-Signature-256", "sha256=00ff", "X-Hub-Signature-256", "")
	f.Add("X-Obs", "caf\xe9 \t x", "A", " leading: colon")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		h := http.Header{}
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}} {
			if !token(kv[0]) || !fieldValue(kv[1]) {
				return // net/http refuses the request before any of this
			}
			h.Add(kv[0], kv[1])
		}
		enc := encodeHeaders(h)
		if !utf8.ValidString(enc) || strings.ContainsRune(enc, 0) {
			t.Fatalf("encoded %q: not text PostgreSQL stores", enc)
		}
		want := http.Header{}
		for k, vs := range h {
			for _, v := range vs {
				want[k] = append(want[k], strings.ToValidUTF8(v, "\uFFFD"))
			}
		}
		if got := decodeHeaders(enc); !reflect.DeepEqual(got, want) {
			t.Fatalf("headers %q read back as %q, want %q", h, got, want)
		}
	})
}

// token is a field name (RFC 9110 token).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// fieldValue is a field value net/http accepts: no control bytes but tab.
func fieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
