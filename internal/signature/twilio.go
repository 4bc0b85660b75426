package signature

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Twilio: X-Twilio-Signature = base64 HMAC-SHA1(auth token, data) where
//   - form bodies: data = full URL + concat(sorted(name + value)) over the
//     POST parameters (duplicate values deduplicated and sorted, as the SDKs do);
//   - JSON bodies: the URL carries bodySHA256=<hex sha256(body)>, data = the
//     URL alone, and the body hash must match too.
//
// As the SDKs do, the URL is also tried with the default port added or any
// port removed. Source: twilio.com/docs/usage/webhooks/webhooks-security,
// twilio-php RequestValidatorTest.php.

func init() {
	register(&scheme{
		name: "twilio",
		preset: Preset{
			// No event id exists. The idempotency token survives Twilio's
			// connection-level retries; SID + status is the fallback. SID +
			// status first would merge distinct requests of one call (several
			// <Gather> callbacks share CallSid and CallStatus).
			EventID:   "header:I-Twilio-Idempotency-Token|form:MessageSid+form:MessageStatus|form:CallSid+form:CallStatus",
			EventType: "form:MessageStatus|form:CallStatus|form:SmsStatus",
			// Retries are connection-level only (#rc, at most 5, 15 s each).
			RetryHorizon: 5 * time.Minute,
		},
		build: buildTwilio,
		sign:  signTwilio,
	})
}

type twilioVerifier struct {
	keys      [][]byte
	publicURL string
}

func buildTwilio(p Params) (Verifier, error) {
	if p.PublicURL == "" {
		return nil, errors.New("public URL is required: Twilio signs the URL it calls")
	}
	u, err := url.Parse(p.PublicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("public URL must be an absolute http(s) URL")
	}
	return &twilioVerifier{keys: rawKeys(p.Secrets), publicURL: p.PublicURL}, nil
}

// effectiveURL resolves Request.URL against the configured public URL. Only
// an http:// or https:// prefix makes it absolute (a proxy's absolute-form
// request): a "://" further on is a callback URL in the query, and the
// origin-form request is still resolved against public_url.
//
// Twilio signs the URL it called, query included. public_url gives what the
// server cannot know (scheme, host, path); the query comes with the request.
// When public_url holds a query too (the exact URL configured at Twilio),
// the request's is that same query, or it with Twilio's bodySHA256 appended:
// the request's query replaces public_url's, never follows it (which would
// repeat it and fail every signature). A request without a query is checked
// against public_url as written.
func (v *twilioVerifier) effectiveURL(reqURL string) string {
	if absoluteHTTP(reqURL) {
		return reqURL
	}
	_, q, ok := strings.Cut(reqURL, "?")
	if !ok || q == "" {
		return v.publicURL
	}
	base, _, _ := strings.Cut(v.publicURL, "?")
	return base + "?" + q
}

func absoluteHTTP(u string) bool {
	for _, p := range []string{"http://", "https://"} {
		if len(u) >= len(p) && strings.EqualFold(u[:len(p)], p) {
			return true
		}
	}
	return false
}

func (v *twilioVerifier) Verify(r *Request) error {
	const sc = "twilio"
	got, err := header(sc, r.Header, "X-Twilio-Signature")
	if err != nil {
		return err
	}
	full := v.effectiveURL(r.URL)
	u, err := url.Parse(full)
	if err != nil {
		return fail(sc, ErrMalformed, "request URL does not parse")
	}
	var params []byte
	form := false
	if bodyHash := u.Query().Get("bodySHA256"); bodyHash != "" {
		sum := sha256.Sum256(r.Body)
		if !hmac.Equal(hexOf(sum[:]), []byte(strings.ToLower(bodyHash))) {
			return fail(sc, ErrMismatch, "body does not match the bodySHA256 URL parameter")
		}
	} else {
		params, err = twilioParams(r.Body)
		if err != nil {
			return fail(sc, ErrMalformed, "form body: "+err.Error())
		}
		form = true
	}
	variants := twilioURLVariants(full)
	for _, cand := range variants {
		for _, k := range v.keys {
			if hmac.Equal(b64Of(mac(sha1.New, k, []byte(cand), params)), []byte(got)) {
				if form {
					// What was signed is the URL and the decoded, sorted
					// parameters, not the bytes: any re-encoding of them
					// carries the same signature. The URL without its
					// port, which one signature covers with or without.
					sum := sha256.Sum256(append([]byte(twilioPortless(full)), params...))
					r.Signed = &sum
				}
				return nil
			}
		}
	}
	return fail(sc, ErrMismatch, "X-Twilio-Signature matches no secret")
}

// twilioParams returns concat(sorted(name + value)) of a form body.
func twilioParams(body []byte) ([]byte, error) {
	vals := map[string][]string{}
	for pair := range strings.SplitSeq(string(body), "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, errors.New("invalid percent-encoding")
		}
		vals[k] = append(vals[k], v)
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		vs := vals[k]
		sort.Strings(vs)
		for i, v := range vs {
			if i > 0 && v == vs[i-1] {
				continue
			}
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	return []byte(b.String()), nil
}

// twilioURLVariants returns the URL as given, then with the default port added
// (when absent) or the port removed (when present), since what Twilio signs
// depends on how the URL was configured.
func twilioURLVariants(raw string) []string {
	scheme, host, tail, ok := twilioSplitURL(raw)
	if !ok {
		return []string{raw}
	}
	if h, _, hasPort := strings.Cut(host, ":"); hasPort {
		return []string{raw, scheme + "://" + h + tail}
	}
	port := ""
	switch strings.ToLower(scheme) {
	case "https":
		port = ":443"
	case "http":
		port = ":80"
	default:
		return []string{raw}
	}
	return []string{raw, scheme + "://" + host + port + tail}
}

// twilioPortless is raw without the port of its host: the one form of the
// URL variants that a signature matching any of them shares.
func twilioPortless(raw string) string {
	scheme, host, tail, ok := twilioSplitURL(raw)
	if !ok {
		return raw
	}
	h, _, _ := strings.Cut(host, ":")
	return scheme + "://" + h + tail
}

// twilioSplitURL cuts raw into scheme, host (with its port) and the rest;
// false for a URL whose host is not guessed at (userinfo, an IPv6 literal).
func twilioSplitURL(raw string) (scheme, host, tail string, ok bool) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", "", false
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	host, tail = rest[:end], rest[end:]
	if strings.Contains(host, "@") || strings.HasPrefix(host, "[") {
		return "", "", "", false // userinfo or IPv6 literal: no guessing
	}
	return scheme, host, tail, true
}

func signTwilio(p Params, body []byte, _ time.Time, msgID string) (http.Header, []byte, error) {
	params, err := twilioParams(body)
	if err != nil {
		return nil, nil, errors.New("body must be a form (application/x-www-form-urlencoded): " + err.Error())
	}
	sig := b64Of(mac(sha1.New, []byte(p.Secrets[0]), []byte(p.PublicURL), params))
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Twilio-Signature", string(sig))
	if msgID != "" {
		h.Set("I-Twilio-Idempotency-Token", msgID)
	}
	return h, nil, nil
}
