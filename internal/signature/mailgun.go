package signature

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Mailgun: the body carries {"signature":{"timestamp","token","signature"}}
// (legacy webhooks: form fields of the same names), signature = hex
// HMAC-SHA256(webhook signing key, timestamp + token). The HMAC does NOT cover
// the event data, so a captured signature block could be pasted onto forged
// event data: each verified token is remembered, with the hash of its body,
// until its timestamp leaves the tolerance. The same token with another body
// is refused as replayed; the same token with the same body is an exact
// resend (a provider retry after a failed commit) and passes, left to dedupe.
// Source: documentation.mailgun.com securing-webhooks.

func init() {
	register(&scheme{
		name: "mailgun",
		preset: Preset{
			EventID:      "json:event-data.id",
			EventType:    "json:event-data.event",
			RetryHorizon: 8 * time.Hour,
			// Mailgun warns against an aggressive window; the token cache makes
			// a longer one safe, at the cost of memory bounded by tokenCacheMax.
			Tolerance: 10 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &mailgunVerifier{keys: rawKeys(p.Secrets), tol: p.Tolerance, seen: newTokenCache(tokenCacheMax)}, nil
		},
		sign: signMailgun,
	})
}

// tokenCacheMax bounds the token cache: about 100 bytes an entry.
const tokenCacheMax = 1 << 16

type mailgunVerifier struct {
	keys [][]byte
	tol  time.Duration
	seen *tokenCache
}

// mailgunSig is the signature block of a Mailgun body.
type mailgunSig struct {
	Timestamp, Token, Signature string
}

// parseMailgun extracts the signature block from a JSON or form body.
func parseMailgun(body []byte) (mailgunSig, error) {
	const sc = "mailgun"
	var s mailgunSig
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		var env struct {
			Signature *struct {
				Timestamp json.RawMessage `json:"timestamp"`
				Token     string          `json:"token"`
				Signature string          `json:"signature"`
			} `json:"signature"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			return s, fail(sc, ErrMalformed, "body is not valid JSON with a signature object")
		}
		if env.Signature == nil {
			return s, fail(sc, ErrMissing, "no signature object in the body")
		}
		s.Token, s.Signature = env.Signature.Token, env.Signature.Signature
		// Mailgun sends the timestamp as a string; accept a bare number too.
		ts := env.Signature.Timestamp
		if len(ts) > 0 && ts[0] == '"' {
			if err := json.Unmarshal(ts, &s.Timestamp); err != nil {
				return s, fail(sc, ErrMalformed, "signature.timestamp is not a string")
			}
		} else {
			s.Timestamp = string(ts)
		}
	} else {
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return s, fail(sc, ErrMalformed, "body is neither JSON nor a form")
		}
		s.Timestamp, s.Token, s.Signature = q.Get("timestamp"), q.Get("token"), q.Get("signature")
	}
	if s.Signature == "" || s.Token == "" || s.Timestamp == "" {
		return s, fail(sc, ErrMissing, "signature block lacks timestamp, token or signature")
	}
	if len(s.Token) > 256 || len(s.Signature) > 128 {
		return s, fail(sc, ErrMalformed, "signature block fields are too long")
	}
	return s, nil
}

func (v *mailgunVerifier) Verify(r *Request) error {
	const sc = "mailgun"
	s, err := parseMailgun(r.Body)
	if err != nil {
		return err
	}
	now := r.Now
	if now.IsZero() {
		now = time.Now()
	}
	if err := checkFresh(sc, s.Timestamp, now, v.tol); err != nil {
		return err
	}
	ok := false
	for _, k := range v.keys {
		if hmac.Equal(mailgunMAC(k, s.Timestamp, s.Token), []byte(s.Signature)) {
			ok = true
			break
		}
	}
	if !ok {
		return fail(sc, ErrMismatch, "signature matches no key")
	}
	ts, _ := parseUnix(s.Timestamp) // checked by checkFresh
	// One second past the last instant checkFresh accepts this timestamp.
	expires := time.Unix(ts, 0).Add(v.tol + time.Second)
	if !v.seen.add(s.Token, sha256.Sum256(r.Body), expires, now) {
		return fail(sc, ErrReplayed, "token already used with another body")
	}
	return nil
}

func mailgunMAC(key []byte, ts, token string) []byte {
	return hexOf(mac256(key, []byte(ts), []byte(token)))
}

// signMailgun puts a fresh signature block into a JSON object body (its keys
// come out sorted); msgID is the token.
func signMailgun(p Params, body []byte, now time.Time, msgID string) (http.Header, []byte, error) {
	if msgID == "" {
		return nil, nil, errors.New("token (message id) is empty")
	}
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &obj); err != nil {
			return nil, nil, errors.New("body must be a JSON object")
		}
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := json.Marshal(map[string]string{
		"timestamp": ts,
		"token":     msgID,
		"signature": string(mailgunMAC([]byte(p.Secrets[0]), ts, msgID)),
	})
	if err != nil {
		return nil, nil, err
	}
	obj["signature"] = sig
	nb, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return h, nb, nil
}

// tokenCache remembers verified one-time tokens until they expire. It is
// bounded: when full, expired entries are dropped first, then the oldest.
// Only tokens of verified requests are added, so an attacker without the key
// cannot fill it.
type tokenCache struct {
	mu      sync.Mutex
	max     int
	entries map[[32]byte]tokenEntry
	order   [][32]byte // insertion order, a FIFO ring via head
	head    int
}

type tokenEntry struct {
	body    [32]byte
	expires time.Time
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, entries: make(map[[32]byte]tokenEntry)}
}

// add records token with its body hash and reports whether the request is
// acceptable: a new token, or a known one with the same body.
func (c *tokenCache) add(token string, body [32]byte, expires, now time.Time) bool {
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok && now.Before(e.expires) {
		return e.body == body
	}
	c.evict(now)
	c.entries[key] = tokenEntry{body: body, expires: expires}
	c.order = append(c.order, key)
	return true
}

// evict drops expired entries from the front of the FIFO and, when still at
// capacity, the oldest entries. Entries expire in about insertion order, so
// the front is where expired ones are.
func (c *tokenCache) evict(now time.Time) {
	for c.head < len(c.order) {
		k := c.order[c.head]
		e, ok := c.entries[k]
		if ok && now.Before(e.expires) && len(c.entries) < c.max {
			break
		}
		delete(c.entries, k)
		c.head++
	}
	// Compact the ring once half of it is consumed.
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}
