package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// The scanner below walks a JSON document that json.Valid has accepted, so it
// can skip values by counting brackets instead of building them. It still
// bounds-checks every index: on a surprise it reports "not found", never panics.

func validJSON(b []byte) bool { return json.Valid(b) }

// jsonValue returns the value at path in a valid JSON document, by the rules
// of the package doc.
func jsonValue(doc []byte, path []string) (string, bool) {
	v := trimSpace(doc)
	for _, key := range path {
		if len(v) == 0 || v[0] != '{' {
			return "", false
		}
		if v = member(v, key); v == nil {
			return "", false
		}
	}
	if len(v) == 0 {
		return "", false
	}
	switch c := v[0]; {
	case c == '"':
		if len(v) > maxRawValueLen {
			// Longer than MaxValueLen whatever it holds (an escape is at
			// most 6 bytes for 1): reported too long without decoding
			// what may be a megabyte of escapes.
			return string(v[:MaxValueLen+1]), true
		}
		s, ok := unquote(v)
		return s, ok && s != ""
	case c == '-' || ('0' <= c && c <= '9'):
		return string(v), true
	}
	return "", false // object, array, null, true, false
}

// maxRawValueLen is the longest JSON text whose value may still be within
// MaxValueLen: a quoted string of escapes, 6 bytes each.
const maxRawValueLen = 6*MaxValueLen + 2

// Members finds, in one scan of the JSON object that doc holds (space around
// it allowed), the raw bytes of the value of the member named keys[i] and
// puts it in vals[i] (nil: no such member). With duplicate keys it is the
// last one, as encoding/json decodes it. It reports false when doc is not an
// object. doc must be valid JSON (json.Valid): the scan skips values by
// counting brackets. The content filters use it to read only the parts of a
// body an expression selects.
func Members(doc []byte, keys []string, vals [][]byte) bool {
	v := trimSpace(doc)
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	clear(vals)
	eachMember(v, func(rawKey, val []byte) {
		for i, k := range keys {
			if keyEquals(rawKey, k) {
				vals[i] = val
			}
		}
	})
	return true
}

// Unquote decodes a quoted JSON string exactly as encoding/json does
// (invalid UTF-8 and lone surrogates become U+FFFD).
func Unquote(raw []byte) (string, bool) { return unquote(raw) }

// StringEnd returns the index just past the JSON string starting at b[i]
// (its quote), or -1 when b[i] is not a quote or the string does not end.
func StringEnd(b []byte, i int) int { return stringEnd(b, i) }

// member returns the raw value of the last member named key of the object
// that starts obj (last wins, as with encoding/json), or nil.
func member(obj []byte, key string) []byte {
	var found []byte
	if !eachMember(obj, func(rawKey, val []byte) {
		if keyEquals(rawKey, key) {
			found = val
		}
	}) {
		return nil
	}
	return found
}

// eachMember calls f with the quoted key and the raw value of each member of
// the object that starts obj, in order; false when the object is malformed.
func eachMember(obj []byte, f func(rawKey, val []byte)) bool {
	i := skipSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) {
		kEnd := stringEnd(obj, i)
		if kEnd < 0 {
			return false
		}
		rawKey := obj[i:kEnd]
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = skipSpace(obj, i+1)
		vEnd := valueEnd(obj, i)
		if vEnd < 0 {
			return false
		}
		f(rawKey, obj[i:vEnd])
		i = skipSpace(obj, vEnd)
		if i >= len(obj) {
			return false
		}
		if obj[i] == '}' {
			return true
		}
		if obj[i] != ',' {
			return false
		}
		i = skipSpace(obj, i+1)
	}
	return false
}

// keyEquals compares a quoted JSON key with key, unescaping only when the raw
// bytes could differ from the decoded ones (escapes or invalid UTF-8, which
// encoding/json replaces with U+FFFD).
func keyEquals(raw []byte, key string) bool {
	if len(raw) >= 2 && isSimple(raw[1:len(raw)-1]) {
		return string(raw[1:len(raw)-1]) == key // no allocation
	}
	s, ok := unquote(raw)
	return ok && s == key
}

// unquote decodes a quoted JSON string exactly as encoding/json does.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if isSimple(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// isSimple: no escapes and valid UTF-8, so the raw bytes are the value.
func isSimple(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// stringEnd returns the index just past the string starting at b[i], or -1.
func stringEnd(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	// The next quote not escaped: one after an even run of backslashes
	// (\uXXXX digits are plain bytes). IndexByte skips long strings fast.
	for j := i + 1; ; {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return -1
		}
		q += j
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// valueEnd returns the index just past the value starting at b[i], or -1.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := stringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && !isSpace(b[j]) && b[j] != ',' && b[j] != '}' && b[j] != ']' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// SplitJSONArray returns the raw bytes of each element of a JSON array body
// (SendGrid posts a batch of events as one array), without decoding them.
func SplitJSONArray(body []byte) ([][]byte, error) {
	if !validJSON(body) {
		return nil, errors.New("extract: body is not valid JSON")
	}
	b := trimSpace(body)
	if len(b) == 0 || b[0] != '[' {
		return nil, errors.New("extract: body is not a JSON array")
	}
	out := [][]byte{}
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return out, nil
	}
	for i < len(b) {
		end := valueEnd(b, i)
		if end < 0 {
			break
		}
		out = append(out, b[i:end])
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ']' {
			return out, nil
		}
		if i >= len(b) || b[i] != ',' {
			break
		}
		i = skipSpace(b, i+1)
	}
	return nil, errors.New("extract: body is not a JSON array") // unreachable for valid JSON
}

// The raw scanners, shared with package batch, which cuts a platform's
// request into its events by the same byte offsets. Both walk a document
// json.Valid has accepted; on a surprise they report -1, never panic.

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int { return skipSpace(b, i) }

// ValueEnd returns the index just past the JSON value starting at b[i], or -1.
func ValueEnd(b []byte, i int) int { return valueEnd(b, i) }
