// Package signature verifies that an inbound webhook request was sent by the
// provider that holds the configured secret, and signs test and outbound
// requests.
//
// Guarantees: verification works on the raw body bytes exactly as received;
// every comparison of secret-derived values is constant-time; every configured
// secret is tried (rotation); a signed timestamp outside the tolerance, too old
// or too far in the future, is refused; the work done for one request is bounded
// (header lengths and signature counts are capped); absent or malformed input
// yields an error wrapping ErrMissing or ErrMalformed, never a panic. Errors
// never contain a secret or echo a header value.
//
// Each scheme lives in its own file and registers itself in init, so adding a
// provider is one new file.
package signature

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

// Request is what a Verifier looks at: the parts of an HTTP request a provider
// signs.
type Request struct {
	Header http.Header
	Body   []byte // raw body exactly as received
	// URL is the full public URL the provider called, scheme://host/path?query
	// (twilio only). A value without "://" (such as a RequestURI "/hooks/x?a=1")
	// is taken as path and query: its query replaces Params.PublicURL's.
	URL string
	// Now is the verifier's clock; zero means time.Now().
	Now time.Time

	// Token is set by Verify when the scheme's signature covers a one-time
	// token instead of the body (mailgun). The request is acceptable only if
	// the token was never seen with another body before it expires; the
	// caller keeps that memory (the store, in the receipt's transaction).
	Token *Token

	// Signed is set by Verify when the bytes the signature covers are not
	// the raw body but data derived from it (twilio's form parameters,
	// decoded and sorted, after the URL): the SHA-256 of that canonical
	// signed data. Every re-encoding of one signed request (pairs
	// reordered or repeated, a letter percent-encoded, a trailing "&")
	// has the same Signed and the same signature, so a replay check must
	// key on SignedSHA256, not on the raw bytes. Nil: the raw body is what
	// is signed (with the headers of Covered).
	Signed *[32]byte
}

// SignedSHA256 is the replay key of a verified request: the hash of the
// canonical data its signature covers (Signed), else of the raw body.
func (r *Request) SignedSHA256() [32]byte {
	if r.Signed != nil {
		return *r.Signed
	}
	return sha256.Sum256(r.Body)
}

// Token is a verified one-time token and the instant from which a request
// carrying it is refused as stale anyway.
type Token struct {
	Value   string
	Expires time.Time
}

// Verifier checks one request. It is safe for concurrent use.
type Verifier interface {
	Verify(r *Request) error
}

// Errors returned by Verify wrap exactly one of these; Reason maps them to a
// short label for metrics and logs.
var (
	ErrMissing   = errors.New("missing")   // no signature (or credential) where the scheme needs one
	ErrMalformed = errors.New("malformed") // present but unparsable
	ErrMismatch  = errors.New("mismatch")  // well formed, matches no configured secret
	ErrStale     = errors.New("stale")     // signed timestamp outside the tolerance
	ErrReplayed  = errors.New("replayed")  // a one-time token seen before with another body (mailgun, from the store)
)

// Reason returns the label of the sentinel err wraps ("missing", "malformed",
// "mismatch", "stale", "replayed"), "" for nil and "invalid" for anything else.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, s := range []error{ErrReplayed, ErrStale, ErrMissing, ErrMalformed, ErrMismatch} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "invalid"
}

// verifyError carries the scheme and a human detail. The detail names headers
// and fields but never echoes secrets or attacker-controlled values.
type verifyError struct {
	scheme string
	kind   error
	detail string
}

func (e *verifyError) Error() string {
	return "signature: " + e.scheme + ": " + e.kind.Error() + ": " + e.detail
}

func (e *verifyError) Unwrap() error { return e.kind }

func fail(scheme string, kind error, detail string) error {
	return &verifyError{scheme: scheme, kind: kind, detail: detail}
}

// HMACParams describes a generic HMAC sender (scheme "hmac").
type HMACParams struct {
	Algorithm string // sha1 | sha256 | sha512; default sha256
	Header    string // header carrying the signature (required)
	Encoding  string // hex | base64; default hex
	// Prefix is stripped from each signature before comparing, e.g. "sha256=".
	// The header may carry several signatures separated by commas or spaces.
	Prefix string
	// TimestampHeader, when set, must be present, must lie within the tolerance
	// and must be covered by Signed through {timestamp}.
	TimestampHeader string
	// IDHeader is the header substituted for {id} (required when Signed uses {id}).
	IDHeader string
	// Signed is the template of the signed bytes, with {body}, {timestamp} and
	// {id}. Default "{body}", or "{timestamp}.{body}" when TimestampHeader is set.
	Signed string
}

// Params configures one source's verifier.
type Params struct {
	Scheme string // see Schemes()
	// Secrets are resolved secret values; several mean rotation and any one may
	// match. sendgrid: base64 DER (or PEM) public keys. postmark: "user:password".
	Secrets []string
	// Tolerance is the accepted distance between a signed timestamp and now, in
	// both directions. 0 means the preset default; negative is refused.
	Tolerance time.Duration
	HMAC      HMACParams // scheme hmac only
	// PublicURL is the URL the provider is configured to call (twilio, which
	// signs the URL; behind a proxy the server cannot know it).
	PublicURL string
}

// Preset holds a scheme's defaults, from each provider's documentation.
type Preset struct {
	// EventID and EventType are spec strings for package extract.
	EventID, EventType string
	// RetryHorizon is how long the provider keeps retrying on its own; 0 means
	// it does not retry (github) or nothing is known (hmac, none), so any
	// outage may lose events.
	RetryHorizon time.Duration
	// Tolerance is the default replay window; 0 for schemes without a signed
	// timestamp.
	Tolerance time.Duration
	// Batch means the body is a JSON array with one event per element; EventID
	// and EventType apply to each element.
	Batch bool
	// Sequence is the spec of a value that grows by one per event (SPEC 12;
	// Telegram's update_id), "" for none: its holes are listed by gaps.
	Sequence string
	// EventTime is the spec of when the platform says the event happened
	// (unix seconds, milliseconds or RFC 3339; "snowflake:json:id" for a
	// Discord snowflake), "" for none.
	EventTime string
}

// scheme is one registry entry.
type scheme struct {
	name   string
	preset Preset
	// build returns the verifier for p, which New has already defaulted
	// (Tolerance) and checked (Secrets non-empty unless noSecrets).
	build func(p Params) (Verifier, error)
	// sign returns the headers of a correctly signed request and, for schemes
	// that sign inside the body, the new body (nil: body unchanged).
	sign      func(p Params, body []byte, now time.Time, msgID string) (http.Header, []byte, error)
	noSecrets bool // scheme takes no secrets (none)
}

var registry = map[string]*scheme{}

// register adds a scheme; called from each scheme file's init.
func register(s *scheme) {
	if _, dup := registry[s.name]; dup {
		panic("signature: scheme registered twice: " + s.name)
	}
	registry[s.name] = s
}

// Schemes lists the known scheme names, sorted.
func Schemes() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PresetFor returns the defaults of a scheme.
func PresetFor(name string) (Preset, bool) {
	s, ok := registry[name]
	if !ok {
		return Preset{}, false
	}
	return s.preset, true
}

// New validates p and returns its verifier. Errors name the offending field
// (and secret index) but never a secret value.
func New(p Params) (Verifier, error) {
	s, p, err := prepare(p)
	if err != nil {
		return nil, err
	}
	v, err := s.build(p)
	if err != nil {
		return nil, fmt.Errorf("signature: %s: %w", s.name, err)
	}
	return v, nil
}

// prepare checks what is common to every scheme and applies defaults.
func prepare(p Params) (*scheme, Params, error) {
	s, ok := registry[p.Scheme]
	if !ok {
		if p.Scheme == "" {
			return nil, p, fmt.Errorf("signature: scheme is empty; want one of %s", strings.Join(Schemes(), ", "))
		}
		return nil, p, fmt.Errorf("signature: unknown scheme %q; want one of %s", p.Scheme, strings.Join(Schemes(), ", "))
	}
	if s.noSecrets && len(p.Secrets) > 0 {
		return nil, p, fmt.Errorf("signature: %s: scheme takes no secrets, got %d", s.name, len(p.Secrets))
	}
	if !s.noSecrets && len(p.Secrets) == 0 {
		return nil, p, fmt.Errorf("signature: %s: at least one secret is required", s.name)
	}
	for i, sec := range p.Secrets {
		if sec == "" {
			return nil, p, fmt.Errorf("signature: %s: secrets[%d] is empty", s.name, i)
		}
	}
	if p.Tolerance < 0 {
		return nil, p, fmt.Errorf("signature: %s: tolerance %s is negative", s.name, p.Tolerance)
	}
	if p.Tolerance == 0 {
		p.Tolerance = s.preset.Tolerance
	}
	if p.Scheme != "hmac" && p.HMAC != (HMACParams{}) {
		return nil, p, fmt.Errorf("signature: %s: hmac settings only apply to scheme hmac", s.name)
	}
	return s, p, nil
}

// Sign returns the headers of a correctly signed request carrying body, as
// the provider would send it at now with event or message id msgID (where the
// scheme has a header for it). The first secret is used. Schemes that sign
// inside the body (mailgun) need SignBody; sendgrid cannot sign with a public
// key.
func Sign(p Params, body []byte, now time.Time, msgID string) (http.Header, error) {
	h, nb, err := sign(p, body, now, msgID)
	if err != nil {
		return nil, err
	}
	if nb != nil {
		return nil, fmt.Errorf("signature: %s: the signature goes inside the body; use SignBody", p.Scheme)
	}
	return h, nil
}

// SignBody is Sign for every scheme: it also returns the body to send, which
// differs from body only for schemes that sign inside it (mailgun).
func SignBody(p Params, body []byte, now time.Time, msgID string) (http.Header, []byte, error) {
	h, nb, err := sign(p, body, now, msgID)
	if err != nil {
		return nil, nil, err
	}
	if nb == nil {
		nb = body
	}
	return h, nb, nil
}

func sign(p Params, body []byte, now time.Time, msgID string) (http.Header, []byte, error) {
	s, p, err := prepare(p)
	if err != nil {
		return nil, nil, err
	}
	// Build first so signing is refused for whatever verifying would refuse.
	if _, err := s.build(p); err != nil {
		return nil, nil, fmt.Errorf("signature: %s: %w", s.name, err)
	}
	h, nb, err := s.sign(p, body, now, msgID)
	if err != nil {
		return nil, nil, fmt.Errorf("signature: %s: sign: %w", s.name, err)
	}
	return h, nb, nil
}
