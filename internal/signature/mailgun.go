package signature

import (
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Mailgun: the body carries {"signature":{"timestamp","token","signature"}}
// (legacy webhooks: form fields of the same names), signature = hex
// HMAC-SHA256(webhook signing key, timestamp + token). The HMAC does NOT cover
// the event data, so a captured signature block could be pasted onto forged
// event data. Verify hands the verified token out (Request.Token) with the
// instant its timestamp leaves the tolerance; the store keeps it, with the
// hash of its body, in the receipt's transaction, so a restart or a reload
// forgets nothing. The same token with another body is refused as replayed;
// the same token with the same body is an exact resend (a provider retry
// after a failed commit) and passes, left to dedupe.
// Source: documentation.mailgun.com securing-webhooks.

func init() {
	register(&scheme{
		name: "mailgun",
		preset: Preset{
			EventID:      "json:event-data.id",
			EventType:    "json:event-data.event",
			RetryHorizon: 8 * time.Hour,
			// Mailgun warns against an aggressive window; the stored tokens
			// make a longer one safe, at the cost of a row per request in it.
			Tolerance: 10 * time.Minute,
		},
		build: func(p Params) (Verifier, error) {
			return &mailgunVerifier{keys: rawKeys(p.Secrets), tol: p.Tolerance}, nil
		},
		sign: signMailgun,
	})
}

type mailgunVerifier struct {
	keys [][]byte
	tol  time.Duration
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
	// One second past the last instant checkFresh accepts this timestamp:
	// from then on the token is refused as stale, so it may be forgotten.
	r.Token = &Token{Value: s.Token, Expires: time.Unix(ts, 0).Add(v.tol + time.Second)}
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
