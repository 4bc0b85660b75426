package signature

import (
	"crypto/hmac"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// tsList is a signature header of key=value elements carrying a Unix
// timestamp and one or more hex HMAC-SHA256 signatures of
// timestamp + sep + body: Stripe ("t=..,v1=..") and Paddle ("ts=..;h1=..").
// Any listed signature may match any secret.
type tsList struct {
	scheme, header string
	elemSep        string // between elements
	tsKey, sigKey  string
	sep            byte // between the timestamp and the body in the signed bytes
	// strict: an element without '=' or a signature that is not 64 hex digits
	// fails the header (Paddle's SDK). Otherwise they are skipped, as
	// stripe-go does, and only a header with no usable signature fails.
	strict bool
}

// parse returns the timestamp and the decoded signatures of header value v.
func (l *tsList) parse(v string) (ts string, sigs [][]byte, err error) {
	parts, err := splitList(l.scheme, l.header, v, l.elemSep)
	if err != nil {
		return "", nil, err
	}
	for _, p := range parts {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			if l.strict {
				return "", nil, fail(l.scheme, ErrMalformed, l.header+" element without '='")
			}
			continue
		}
		switch k {
		case l.tsKey:
			if ts != "" {
				return "", nil, fail(l.scheme, ErrMalformed, l.header+" has more than one "+l.tsKey)
			}
			ts = val
		case l.sigKey:
			b, err := hex.DecodeString(val)
			switch {
			case err == nil && len(b) == 32:
				sigs = append(sigs, b)
			case l.strict:
				return "", nil, fail(l.scheme, ErrMalformed, l.header+" "+l.sigKey+" is not 64 hex digits")
			}
		}
	}
	if ts == "" {
		return "", nil, fail(l.scheme, ErrMalformed, l.header+" has no "+l.tsKey)
	}
	if len(sigs) == 0 {
		return "", nil, fail(l.scheme, ErrMalformed, l.header+" has no valid "+l.sigKey+" signature")
	}
	return ts, sigs, nil
}

// verify checks r against keys: a fresh timestamp and a matching signature.
func (l *tsList) verify(r *Request, keys [][]byte, tol time.Duration) error {
	hv, err := header(l.scheme, r.Header, l.header)
	if err != nil {
		return err
	}
	ts, sigs, err := l.parse(hv)
	if err != nil {
		return err
	}
	if err := checkFresh(l.scheme, ts, r.Now, tol); err != nil {
		return err
	}
	for _, k := range keys {
		want := mac256(k, []byte(ts), []byte{l.sep}, r.Body)
		for _, got := range sigs {
			if hmac.Equal(want, got) {
				return nil
			}
		}
	}
	return fail(l.scheme, ErrMismatch, "no "+l.sigKey+" signature matches any secret")
}

// sign returns the header a sender would set for body at now.
func (l *tsList) sign(secret string, body []byte, now time.Time) http.Header {
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := hexOf(mac256([]byte(secret), []byte(ts), []byte{l.sep}, body))
	h := http.Header{}
	h.Set(l.header, l.tsKey+"="+ts+l.elemSep+l.sigKey+"="+string(sig))
	return h
}

// tsListVerifier is a Verifier for a tsList scheme.
type tsListVerifier struct {
	l    *tsList
	keys [][]byte
	tol  time.Duration
}

func (v *tsListVerifier) Verify(r *Request) error { return v.l.verify(r, v.keys, v.tol) }
