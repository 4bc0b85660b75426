package signature

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/vectors"
)

// vector is one of the repository's test vectors (internal/vectors, written
// by its generator from code independent of this package).
type vector struct{ vectors.Vector }

func (v vector) name() string { return v.Name() }

func (v vector) secrets(tb testing.TB) []string {
	tb.Helper()
	s, err := v.Secrets()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// params maps a vector's provider to the configuration a user would write.
func (v vector) params(tb testing.TB) Params {
	tb.Helper()
	p := Params{Secrets: v.secrets(tb)}
	if v.ToleranceS != nil {
		p.Tolerance = time.Duration(*v.ToleranceS) * time.Second
	}
	switch v.Provider {
	case "stripe", "github", "shopify", "slack", "paddle", "mailgun", "sendgrid", "postmark":
		p.Scheme = v.Provider
	case "standard-webhooks", "svix":
		p.Scheme = "standard"
	case "twilio":
		p.Scheme = "twilio"
		p.PublicURL = v.URL
	case "generic-ts-body":
		p.Scheme = "hmac"
		p.HMAC = genericHMAC
	case "meta", "telegram", "line", "discord", "x", "zoom", "vonage", "telnyx", "viber", "intercom", "zendesk":
		p.Scheme = v.Provider
	case "msgraph":
		p.Scheme = "graph"
	case "ed25519": // RFC 8032's example: a hex public key, as Discord's
		p.Scheme = "discord"
	default:
		tb.Fatalf("%s: no mapping for provider %q: add it to vector.params", v.name(), v.Provider)
	}
	return p
}

// genericHMAC is the "generic-ts-body" convention (internal/vectors).
var genericHMAC = HMACParams{
	Header:          "X-Webhook-Signature",
	Prefix:          "sha256=",
	TimestampHeader: "X-Webhook-Timestamp",
	Signed:          "{timestamp}.{body}",
}

// request builds the request as net/http would hand it over (canonical keys).
// A null now means no freshness check: the clock is set to the signed time.
func (v vector) request() *Request {
	h := http.Header{}
	for k, val := range v.Headers {
		h.Set(k, val)
	}
	now := time.Unix(1700000000, 0)
	switch {
	case v.Now != nil:
		now = time.Unix(*v.Now, 0)
	case v.Timestamp != nil:
		now = time.Unix(*v.Timestamp, 0)
	case v.Provider == "vonage":
		// The signed time is the JWT's iat (the published token's is 2023).
		if iat, ok := jwtIAT(h.Get("Authorization")); ok {
			now = time.Unix(iat, 0)
		}
	}
	return &Request{Header: h, Body: []byte(v.Body), URL: v.URL, Now: now}
}

// wantErr is the sentinel an invalid vector must fail with, so a vector that
// fails for an unintended reason (say, malformed instead of stale) is caught.
func (v vector) wantErr() error {
	switch {
	case strings.Contains(v.Case, "stale"), strings.Contains(v.Case, "future"):
		return ErrStale
	case strings.Contains(v.Case, "missing"), v.Case == "sha1_header_only":
		return ErrMissing
	case v.Case == "v0_only":
		return ErrMalformed
	// Not hex (Discord signs in hex), a JWT algorithm other than HS256, or
	// another prefix than Intercom's sha1=: refused before any key is tried.
	case v.Case == "base64_signature", v.Case == "alg_none", v.Case == "sha256_instead":
		return ErrMalformed
	}
	return ErrMismatch
}

// MustLoadVectors returns every vector; a file that does not parse or holds
// fewer than vectors.Min fails the test, since skipping would let CI pass
// without checking a single provider.
func MustLoadVectors(tb testing.TB) []vector {
	tb.Helper()
	vs, err := vectors.Load()
	if err != nil {
		tb.Fatal(err)
	}
	ms, err := vectors.LoadMessaging()
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]vector, 0, len(vs)+len(ms))
	for _, v := range append(vs, ms...) {
		out = append(out, vector{v})
	}
	return out
}

// minVectors is what MustLoadVectors must return at least.
const minVectors = vectors.Min + vectors.MinMessaging

// jwtIAT reads the iat claim of a Bearer JWT without verifying it.
func jwtIAT(auth string) (int64, bool) {
	parts := strings.Split(strings.TrimPrefix(auth, "Bearer "), ".")
	if len(parts) != 3 {
		return 0, false
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return 0, false
	}
	var c struct{ Iat int64 }
	return c.Iat, json.Unmarshal(b, &c) == nil && c.Iat > 0
}

// wantAllRun fails t once its subtests are done unless every one of the n
// vectors ran, so a loop that skips some cannot pass. A -run pattern naming
// subtests runs fewer on purpose and is left alone.
func wantAllRun(t *testing.T, ran *atomic.Int64, n int) {
	t.Cleanup(func() {
		if strings.Contains(flag.Lookup("test.run").Value.String(), "/") {
			return
		}
		if got := ran.Load(); got != int64(n) || n < minVectors {
			t.Errorf("ran %d of %d vectors (want all, and at least %d)", got, n, minVectors)
		}
	})
}

func TestVectors(t *testing.T) {
	t.Parallel()
	vs := MustLoadVectors(t)
	var ran atomic.Int64
	wantAllRun(t, &ran, len(vs))
	for _, v := range vs {
		t.Run(v.name(), func(t *testing.T) {
			t.Parallel()
			ran.Add(1)
			if v.Method != "" || v.Provider == "ed25519" || v.Name() == "zoom/url_validation" {
				checkHandshake(t, v)
				return
			}
			// A fresh verifier per vector: mailgun vectors share a token.
			ver, err := New(v.params(t))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			err = ver.Verify(v.request())
			switch v.Expected {
			case "valid":
				if err != nil {
					t.Errorf("got %v, want valid (%s)", err, v.Reason)
				}
			case "invalid":
				if want := v.wantErr(); !errors.Is(err, want) {
					t.Errorf("got %v, want an error wrapping %v (%s)", err, want, v.Reason)
				}
			default:
				t.Fatalf("expected = %q, want valid or invalid", v.Expected)
			}
		})
	}
}

// Mailgun's HMAC does not cover the event data: the second vector pastes the
// first one's signature block onto other data. Both verify; each hands out
// the same token, with the instant it turns stale, for the store to keep
// (the store refuses the second body: sqlitestore TestSeenTokens, and
// cmd/hookwarden TestMailgunTokenSurvivesRestartAndReload).
func TestMailgunReplayedToken(t *testing.T) {
	t.Parallel()
	byCase := map[string]vector{}
	for _, v := range MustLoadVectors(t) {
		if v.Provider == "mailgun" {
			byCase[v.Case] = v
		}
	}
	valid, forged := byCase["valid"], byCase["event_data_tampered_still_valid"]
	ver, err := New(valid.params(t))
	if err != nil {
		t.Fatal(err)
	}
	first, second := valid.request(), forged.request()
	if err := ver.Verify(first); err != nil || first.Token == nil {
		t.Fatalf("first delivery: got %v, token %v; want ok and a token", err, first.Token)
	}
	if err := ver.Verify(second); err != nil || second.Token == nil {
		t.Fatalf("forged data under the same block: got %v, token %v; want a valid signature and a token", err, second.Token)
	}
	if *first.Token != *second.Token {
		t.Fatalf("tokens differ: %+v, %+v", first.Token, second.Token)
	}
	tol := valid.params(t).Tolerance
	if tol == 0 {
		pre, _ := PresetFor("mailgun")
		tol = pre.Tolerance
	}
	if lo, hi := first.Now.Add(-tol), first.Now.Add(tol+2*time.Second); first.Token.Expires.Before(lo) || first.Token.Expires.After(hi) {
		t.Fatalf("token expires %s, want within tolerance of now %s", first.Token.Expires, first.Now)
	}
}

// checkHandshake runs the vectors that are not a signed POST: the receiver
// answers the handshakes (Meta's GET, Graph's validationToken); what the
// signature package computes for one (X's CRC response) is checked here, as
// is the RFC 8032 example on the Ed25519 path Discord and Telnyx share.
func checkHandshake(t *testing.T, v vector) {
	t.Helper()
	switch v.Name() {
	case "x/crc_response":
		q, err := url.ParseQuery(v.Query)
		if err != nil {
			t.Fatal(err)
		}
		got := `{"response_token":"` + XCRCResponseToken(v.secrets(t)[0], q.Get("crc_token")) + `"}`
		if got != v.Response.Body {
			t.Errorf("CRC answer %s, want %s", got, v.Response.Body)
		}
	case "ed25519/rfc8032_test1":
		keys, err := ed25519Keys(v.secrets(t), hex.DecodeString, "hex")
		if err != nil {
			t.Fatal(err)
		}
		sig, err := hex.DecodeString(v.Headers["signature_hex"])
		if err != nil {
			t.Fatal(err)
		}
		if !ed25519Match(keys, sig, []byte(v.Body)) {
			t.Error("RFC 8032 TEST 1 does not verify")
		}
		if ed25519Match(keys, sig, []byte("x")) {
			t.Error("RFC 8032 TEST 1 signature verifies another message")
		}
	case "zoom/url_validation":
		ver, err := New(v.params(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := ver.Verify(v.request()); err != nil {
			t.Fatalf("the validation request is signed like any other: %v", err)
		}
		var in struct{ Payload struct{ PlainToken string } }
		if err := json.Unmarshal([]byte(v.Body), &in); err != nil {
			t.Fatal(err)
		}
		got := `{"plainToken":"` + in.Payload.PlainToken + `","encryptedToken":"` + ZoomEncryptedToken(v.secrets(t)[0], in.Payload.PlainToken) + `"}`
		if got != v.Response.Body {
			t.Errorf("answer %s, want %s", got, v.Response.Body)
		}
	case "meta/verify_get_handshake", "meta/verify_get_wrong_token", "msgraph/validation_token":
		t.Skip("answered by the receiver, before verification")
	default:
		t.Fatalf("handshake vector %s has no check", v.Name())
	}
}
