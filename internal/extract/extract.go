// Package extract finds an event's id or type in an untrusted request, as
// described by a small spec language, without decoding the body into maps.
//
// Spec syntax:
//
//	json:a.b.c   dotted path into a JSON object (keys may contain '-', not '.')
//	header:Name  a request header
//	form:Field   a field of an application/x-www-form-urlencoded body
//	A|B          alternatives: the first that is found
//	A+B          composite: every part required, joined with ":"
//
// '+' binds tighter than '|': "json:a+json:b|header:X" is (a and b) or X.
//
// Guarantees: Extract never panics, whatever the body; its work is linear in
// the body size for each term. A JSON value counts only when the body is valid
// JSON and the value is a non-empty string (unescaped) or a number (its literal
// text); objects, arrays, null, booleans and "" are not found. With duplicate
// keys the last one wins, as with encoding/json. A found value that is longer
// than MaxValueLen, not UTF-8, or has control characters is reported as not
// found (it could not travel safely in a header or a log line).
package extract

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// ErrNotFound is wrapped by every Extract error: no usable value was found.
var ErrNotFound = errors.New("not found")

// MaxValueLen bounds one extracted value, in bytes.
const MaxValueLen = 1024

// Limits on a spec: config is trusted, but a bounded spec keeps Extract's cost
// predictable.
const (
	maxTerms = 32
	maxDepth = 32
)

// Extractor extracts one value from a request.
type Extractor interface {
	Extract(h http.Header, body []byte) (string, error)
	// ExtractBody is Extract on a Body shared with other readers, so the
	// body's JSON validity is checked once for all of them.
	ExtractBody(h http.Header, body *Body) (string, error)
}

type kind int

const (
	kindJSON kind = iota
	kindHeader
	kindForm
)

type term struct {
	kind kind
	src  string   // the term as written, for errors
	name string   // header or form field
	path []string // json
}

// spec is a parsed spec: alternatives of composites of terms.
type spec struct {
	src  string
	alts [][]term
}

// Parse parses a spec; errors quote the offending part.
func Parse(s string) (Extractor, error) {
	return parse(s)
}

func parse(s string) (*spec, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("extract: empty spec; want json:PATH, header:NAME or form:FIELD")
	}
	sp := &spec{src: s}
	n := 0
	for alt := range strings.SplitSeq(s, "|") {
		var parts []term
		for raw := range strings.SplitSeq(alt, "+") {
			if n++; n > maxTerms {
				return nil, fmt.Errorf("extract: more than %d terms in %q", maxTerms, s)
			}
			t, err := parseTerm(strings.TrimSpace(raw), s)
			if err != nil {
				return nil, err
			}
			parts = append(parts, t)
		}
		sp.alts = append(sp.alts, parts)
	}
	return sp, nil
}

func parseTerm(raw, whole string) (term, error) {
	if raw == "" {
		return term{}, fmt.Errorf("extract: empty term in %q", whole)
	}
	k, arg, ok := strings.Cut(raw, ":")
	if !ok {
		return term{}, fmt.Errorf("extract: missing kind in %q; want json:PATH, header:NAME or form:FIELD", raw)
	}
	t := term{src: raw}
	switch k {
	case "json":
		if arg == "" {
			return term{}, fmt.Errorf("extract: empty path in %q", raw)
		}
		t.kind, t.path = kindJSON, strings.Split(arg, ".")
		if len(t.path) > maxDepth {
			return term{}, fmt.Errorf("extract: path deeper than %d in %q", maxDepth, raw)
		}
		for _, p := range t.path {
			if p == "" {
				return term{}, fmt.Errorf("extract: empty key in path %q", raw)
			}
		}
	case "header":
		if !validHeaderName(arg) {
			return term{}, fmt.Errorf("extract: invalid header name %q in %q", arg, raw)
		}
		t.kind, t.name = kindHeader, arg
	case "form":
		if arg == "" {
			return term{}, fmt.Errorf("extract: empty form field in %q", raw)
		}
		t.kind, t.name = kindForm, arg
	default:
		return term{}, fmt.Errorf("extract: unknown kind %q in %q; want json:, header: or form:", k, raw)
	}
	return t, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func (s *spec) String() string { return s.src }

// notFound is the error of a failed extraction.
type notFound struct{ src, why string }

func (e *notFound) Error() string { return "extract: " + e.src + ": " + e.why }
func (e *notFound) Unwrap() error { return ErrNotFound }

// Body is a request body read by several extractors (and the content
// filters): whether it is valid JSON is checked once, however many of them
// read it. json.Valid is a quarter of what decoding a body costs. Not safe
// for concurrent use.
type Body struct {
	Bytes []byte
	json  int8 // 0 unchecked, 1 valid, 2 invalid
}

// ValidBody is a Body known to be valid JSON: an element of an array that
// SplitJSONArray returned.
func ValidBody(b []byte) *Body { return &Body{Bytes: b, json: 1} }

// ValidJSON reports json.Valid(b.Bytes), computed on the first call.
func (b *Body) ValidJSON() bool {
	if b.json == 0 {
		b.json = 2
		if validJSON(b.Bytes) {
			b.json = 1
		}
	}
	return b.json == 1
}

// request is the input of one extraction.
type request struct {
	h    http.Header
	body *Body
}

func (s *spec) Extract(h http.Header, body []byte) (string, error) {
	return s.ExtractBody(h, &Body{Bytes: body})
}

func (s *spec) ExtractBody(h http.Header, body *Body) (string, error) {
	r := &request{h: h, body: body}
	var first error
	for _, alt := range s.alts {
		v, err := r.composite(alt)
		if err == nil {
			return v, nil
		}
		if first == nil {
			first = err
		}
	}
	if len(s.alts) == 1 {
		return "", first
	}
	return "", &notFound{src: s.src, why: "no alternative found (first: " + first.Error() + ")"}
}

func (r *request) composite(parts []term) (string, error) {
	if len(parts) == 1 {
		return r.term(parts[0])
	}
	vals := make([]string, len(parts))
	for i, t := range parts {
		v, err := r.term(t)
		if err != nil {
			return "", err
		}
		vals[i] = v
	}
	return strings.Join(vals, ":"), nil
}

func (r *request) term(t term) (string, error) {
	var v string
	var ok bool
	switch t.kind {
	case kindHeader:
		v = r.h.Get(t.name)
		ok = v != ""
	case kindForm:
		v, ok = formValue(r.body.Bytes, t.name)
	case kindJSON:
		if !r.body.ValidJSON() {
			return "", &notFound{src: t.src, why: "body is not valid JSON"}
		}
		v, ok = jsonValue(r.body.Bytes, t.path)
	}
	if !ok {
		return "", &notFound{src: t.src, why: "not found"}
	}
	if why := unusable(v); why != "" {
		return "", &notFound{src: t.src, why: why}
	}
	return v, nil
}

// unusable says why a found value cannot serve as an id or type, or "".
func unusable(v string) string {
	if len(v) > MaxValueLen {
		return fmt.Sprintf("value longer than %d bytes", MaxValueLen)
	}
	if !utf8.ValidString(v) {
		return "value is not UTF-8"
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] == 0x7f {
			return "value has control characters"
		}
	}
	return ""
}

// formValue returns the first value of a form field, like
// url.ParseQuery(body).Get(name), but decoding only the matching pair.
func formValue(body []byte, name string) (string, bool) {
	for pair := range bytes.SplitSeq(body, []byte{'&'}) {
		if len(pair) == 0 || bytes.IndexByte(pair, ';') >= 0 {
			continue // url.ParseQuery skips ';' separators too
		}
		k, v, _ := bytes.Cut(pair, []byte{'='})
		if bytes.ContainsAny(k, "%+") {
			if uk, err := url.QueryUnescape(string(k)); err != nil || uk != name {
				continue
			}
		} else if string(k) != name {
			continue
		}
		uv, err := url.QueryUnescape(string(v))
		if err != nil {
			continue // so does url.ParseQuery
		}
		return uv, uv != ""
	}
	return "", false
}

// Headers lists the request headers a spec reads (header: terms), in order.
// An invalid spec has none.
func Headers(s string) []string {
	sp, err := parse(s)
	if err != nil {
		return nil
	}
	var hs []string
	for _, alt := range sp.alts {
		for _, t := range alt {
			if t.kind == kindHeader {
				hs = append(hs, t.name)
			}
		}
	}
	return hs
}
