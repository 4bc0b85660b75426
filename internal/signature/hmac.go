package signature

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// hmac: a configurable HMAC sender (HMACParams). The signature header may hold
// several signatures separated by commas or spaces (rotation); each is
// compared after stripping Prefix and decoding, so hex case does not matter.

func init() {
	register(&scheme{
		name: "hmac",
		preset: Preset{
			// Our generic convention (docs/reference.md, hmac keys): X-Webhook-Id, else body id.
			EventID:   "header:X-Webhook-Id|json:id",
			EventType: "json:type",
			Tolerance: 5 * time.Minute,
		},
		build: func(p Params) (Verifier, error) { return buildHMAC(p) },
		sign:  signHMAC,
	})
}

// Placeholders of HMACParams.Signed.
const (
	segLiteral = iota
	segBody
	segTimestamp
	segID
)

type segment struct {
	kind int
	lit  []byte
}

type hmacVerifier struct {
	p    HMACParams // defaulted
	alg  func() hash.Hash
	size int
	keys [][]byte
	tmpl []segment
	tol  time.Duration
	// useID: the template has {id}, so IDHeader is required and signed.
	useID bool
}

func buildHMAC(p Params) (*hmacVerifier, error) {
	hp := p.HMAC
	v := &hmacVerifier{keys: rawKeys(p.Secrets), tol: p.Tolerance}
	switch strings.ToLower(hp.Algorithm) {
	case "", "sha256":
		v.alg, v.size, hp.Algorithm = sha256.New, sha256.Size, "sha256"
	case "sha1":
		v.alg, v.size, hp.Algorithm = sha1.New, sha1.Size, "sha1"
	case "sha512":
		v.alg, v.size, hp.Algorithm = sha512.New, sha512.Size, "sha512"
	default:
		return nil, fmt.Errorf("hmac.algorithm %q: want sha1, sha256 or sha512", hp.Algorithm)
	}
	switch strings.ToLower(hp.Encoding) {
	case "", "hex":
		hp.Encoding = "hex"
	case "base64":
		hp.Encoding = "base64"
	default:
		return nil, fmt.Errorf("hmac.encoding %q: want hex or base64", hp.Encoding)
	}
	if hp.Header == "" {
		return nil, errors.New("hmac.header is required: the header that carries the signature")
	}
	if hp.Signed == "" {
		hp.Signed = "{body}"
		if hp.TimestampHeader != "" {
			hp.Signed = "{timestamp}.{body}"
		}
	}
	tmpl, err := parseTemplate(hp.Signed)
	if err != nil {
		return nil, err
	}
	var hasBody, hasTS, hasID bool
	for _, s := range tmpl {
		hasBody = hasBody || s.kind == segBody
		hasTS = hasTS || s.kind == segTimestamp
		hasID = hasID || s.kind == segID
	}
	switch {
	case !hasBody:
		return nil, fmt.Errorf("hmac.signed %q lacks {body}: the body would not be authenticated", hp.Signed)
	case hasTS && hp.TimestampHeader == "":
		return nil, fmt.Errorf("hmac.signed %q uses {timestamp} but hmac.timestamp_header is empty", hp.Signed)
	case !hasTS && hp.TimestampHeader != "":
		return nil, fmt.Errorf("hmac.timestamp_header is set but hmac.signed %q lacks {timestamp}: the timestamp would not be authenticated", hp.Signed)
	case hasID && hp.IDHeader == "":
		return nil, fmt.Errorf("hmac.signed %q uses {id} but hmac.id_header is empty", hp.Signed)
	}
	v.p, v.tmpl, v.useID = hp, tmpl, hasID
	return v, nil
}

// parseTemplate splits a Signed template into literals and placeholders.
func parseTemplate(t string) ([]segment, error) {
	var out []segment
	for t != "" {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			out = append(out, segment{kind: segLiteral, lit: []byte(t)})
			break
		}
		if i > 0 {
			out = append(out, segment{kind: segLiteral, lit: []byte(t[:i])})
		}
		j := strings.IndexByte(t[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("hmac.signed: unclosed '{' in %q", t)
		}
		switch name := t[i+1 : i+j]; name {
		case "body":
			out = append(out, segment{kind: segBody})
		case "timestamp":
			out = append(out, segment{kind: segTimestamp})
		case "id":
			out = append(out, segment{kind: segID})
		default:
			return nil, fmt.Errorf("hmac.signed: unknown placeholder {%s}; want {body}, {timestamp} or {id}", name)
		}
		t = t[i+j+1:]
	}
	return out, nil
}

// sum computes the MAC of the template filled with ts, id and body.
func (v *hmacVerifier) sum(key []byte, ts, id string, body []byte) []byte {
	m := hmac.New(v.alg, key)
	for _, s := range v.tmpl {
		switch s.kind {
		case segLiteral:
			m.Write(s.lit)
		case segBody:
			m.Write(body)
		case segTimestamp:
			m.Write([]byte(ts))
		case segID:
			m.Write([]byte(id))
		}
	}
	return m.Sum(nil)
}

// parseHMACList decodes the signatures of a header value: split on commas and
// spaces, strip Prefix (case-insensitive), decode. Undecodable entries and
// entries without the prefix are skipped (another version may sit beside ours).
func (v *hmacVerifier) parseHMACList(hv string) ([][]byte, error) {
	const sc = "hmac"
	parts, err := splitList(sc, v.p.Header, hv, ", ")
	if err != nil {
		return nil, err
	}
	var sigs [][]byte
	for _, s := range parts {
		if n := len(v.p.Prefix); n > 0 {
			if len(s) < n || !strings.EqualFold(s[:n], v.p.Prefix) {
				continue
			}
			s = s[n:]
		}
		var b []byte
		if v.p.Encoding == "hex" {
			b, err = hex.DecodeString(s)
		} else {
			b, err = base64.StdEncoding.DecodeString(s)
		}
		if err == nil && len(b) == v.size {
			sigs = append(sigs, b)
		}
	}
	if len(sigs) == 0 {
		return nil, fail(sc, ErrMalformed, v.p.Header+" holds no "+v.p.Encoding+" "+v.p.Algorithm+" signature")
	}
	return sigs, nil
}

func (v *hmacVerifier) Verify(r *Request) error {
	const sc = "hmac"
	hv, err := header(sc, r.Header, v.p.Header)
	if err != nil {
		return err
	}
	sigs, err := v.parseHMACList(hv)
	if err != nil {
		return err
	}
	var ts, id string
	if v.p.TimestampHeader != "" {
		if ts, err = header(sc, r.Header, v.p.TimestampHeader); err != nil {
			return err
		}
		if err := checkFresh(sc, ts, r.Now, v.tol); err != nil {
			return err
		}
	}
	if v.useID {
		if id, err = header(sc, r.Header, v.p.IDHeader); err != nil {
			return err
		}
	}
	for _, k := range v.keys {
		want := v.sum(k, ts, id, r.Body)
		for _, got := range sigs {
			if hmac.Equal(want, got) {
				return nil
			}
		}
	}
	return fail(sc, ErrMismatch, v.p.Header+" matches no secret")
}

func signHMAC(p Params, body []byte, now time.Time, msgID string) (http.Header, []byte, error) {
	v, err := buildHMAC(p)
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	ts := strconv.FormatInt(now.Unix(), 10)
	if v.p.TimestampHeader != "" {
		h.Set(v.p.TimestampHeader, ts)
	}
	if v.p.IDHeader != "" && msgID != "" {
		h.Set(v.p.IDHeader, msgID)
	}
	sum := v.sum([]byte(p.Secrets[0]), ts, msgID, body)
	enc := hex.EncodeToString(sum)
	if v.p.Encoding == "base64" {
		enc = base64.StdEncoding.EncodeToString(sum)
	}
	h.Set(v.p.Header, v.p.Prefix+enc)
	return h, nil, nil
}
