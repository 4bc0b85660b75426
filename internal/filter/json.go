package filter

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeJSON parses b exactly as encoding/json's Unmarshal into an `any`
// does: the same values (map[string]any, []any, string, float64, bool, nil;
// an empty object or array non-nil), the same strings (invalid UTF-8 and
// unpaired surrogates become U+FFFD), a repeated key's last value, and the
// same rejections (any syntax error, a number out of float64's range,
// nesting deeper than 10,000). It does it in one pass without reflection,
// about three times faster: a filter's body is parsed on the ack path, and
// Unmarshal validates the whole document first and then decodes it again.
// FuzzDecodeJSON holds it to encoding/json.
func decodeJSON(b []byte) (any, bool) {
	// One copy of the body; every string without an escape is a substring
	// of it, so keys and values cost no allocation each.
	var kv [32]jsonMember // room for the members of a typical event's open objects
	d := jsonDecoder{b: string(b), kv: kv[:0]}
	d.skipSpace()
	v, ok := d.value(0)
	if !ok {
		return nil, false
	}
	d.skipSpace()
	if d.i != len(d.b) {
		return nil, false
	}
	return v, true
}

// maxJSONDepth is encoding/json's limit of nested objects and arrays.
const maxJSONDepth = 10000

type jsonDecoder struct {
	b string
	i int
	// kv holds the members of the objects being parsed, so each map is made
	// at its final size once its object ends rather than grown.
	kv []jsonMember
}

type jsonMember struct {
	k string
	v any
}

func (d *jsonDecoder) skipSpace() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDecoder) peek(c byte) bool { return d.i < len(d.b) && d.b[d.i] == c }

// value parses the value at d.i (no space before it); depth is the number
// of objects and arrays it is in.
func (d *jsonDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.str()
		return s, ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return nil, false
}

func (d *jsonDecoder) literal(s string) bool {
	if !strings.HasPrefix(d.b[d.i:], s) {
		return false
	}
	d.i += len(s)
	return true
}

func (d *jsonDecoder) object(depth int) (any, bool) {
	if depth > maxJSONDepth {
		return nil, false
	}
	d.i++ // {
	d.skipSpace()
	if d.peek('}') {
		d.i++
		return map[string]any{}, true
	}
	base := len(d.kv)
	defer func() { d.kv = d.kv[:base] }()
	for {
		if !d.peek('"') {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if !d.peek(':') {
			return nil, false
		}
		d.i++
		d.skipSpace()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		d.kv = append(d.kv, jsonMember{k, v})
		d.skipSpace()
		switch {
		case d.peek(','):
			d.i++
			d.skipSpace()
		case d.peek('}'):
			d.i++
			members := d.kv[base:]
			m := make(map[string]any, len(members))
			for _, x := range members {
				m[x.k] = x.v // a repeated key: the last value, as in encoding/json
			}
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *jsonDecoder) array(depth int) (any, bool) {
	if depth > maxJSONDepth {
		return nil, false
	}
	d.i++ // [
	a := make([]any, 0)
	d.skipSpace()
	if d.peek(']') {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.skipSpace()
		switch {
		case d.peek(','):
			d.i++
			d.skipSpace()
		case d.peek(']'):
			d.i++
			return a, true
		default:
			return nil, false
		}
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digits skips one or more digits.
func (d *jsonDecoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && isDigit(d.b[d.i]) {
		d.i++
	}
	return d.i > start
}

func (d *jsonDecoder) number() (any, bool) {
	start := d.i
	if d.peek('-') {
		d.i++
	}
	switch {
	case d.peek('0'):
		d.i++
	case d.i < len(d.b) && '1' <= d.b[d.i] && d.b[d.i] <= '9':
		d.digits()
	default:
		return nil, false
	}
	if d.peek('.') {
		d.i++
		if !d.digits() {
			return nil, false
		}
	}
	if d.peek('e') || d.peek('E') {
		d.i++
		if d.peek('+') || d.peek('-') {
			d.i++
		}
		if !d.digits() {
			return nil, false
		}
	}
	f, err := strconv.ParseFloat(d.b[start:d.i], 64)
	if err != nil {
		return nil, false // out of range: Unmarshal fails too
	}
	return f, true
}

// str parses the string at d.i (its opening quote).
func (d *jsonDecoder) str() (string, bool) {
	d.i++
	start := d.i
	plain := true // no escape, valid UTF-8: the bytes are the string
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if plain {
				return s, true
			}
			return unquoteJSON(s), true
		case c == '\\':
			plain = false
			d.i++
			if d.i >= len(d.b) {
				return "", false
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if hex4(d.b[d.i+1:]) < 0 {
					return "", false
				}
				d.i += 5
			default:
				return "", false
			}
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, size := utf8.DecodeRuneInString(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			d.i += size
		}
	}
	return "", false
}

// hex4 is the value of the four hex digits b starts with, or -1.
func hex4(b string) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for i := range 4 {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// unquoteJSON decodes the inside of a string str has checked: escapes, and
// invalid UTF-8 coerced to U+FFFD, as encoding/json does.
func unquoteJSON(s string) string {
	b := make([]byte, 0, len(s)+8)
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			switch s[r] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := hex4(s[r+1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					// A pair is two escapes; a half alone is U+FFFD.
					rr1 := rune(-1)
					if r+1 < len(s) && s[r] == '\\' && s[r+1] == 'u' {
						rr1 = hex4(s[r+2:])
					}
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						r += 6
						rr = dec
					} else {
						rr = unicode.ReplacementChar
					}
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // " \ /
				b = append(b, s[r])
			}
			r++
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRuneInString(s[r:])
			b = utf8.AppendRune(b, rr)
			r += size
		}
	}
	return string(b)
}
