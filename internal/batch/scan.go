package batch

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"

	"github.com/hookwarden/hookwarden/internal/extract"
)

// The scanner walks a document json.Valid has accepted, so it skips values by
// counting brackets (no recursion: the depth of the input costs no stack) and
// keeps byte offsets, from which the envelopes are cut. It still bounds-checks
// every index: on a surprise it reports "not found", never panics.

// member is one member of an object: its decoded key and where its key and
// value start and end in the body.
type member struct {
	key                        string
	keyStart, valStart, valEnd int
}

// span is a range of the body, [start, end).
type span struct{ start, end int }

// The raw scanners are package extract's, which reads ids by the same
// offsets.
var (
	skipSpace = extract.SkipSpace
	stringEnd = extract.StringEnd
	valueEnd  = extract.ValueEnd
)

// unquote decodes a JSON string as encoding/json does.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// members lists the members of the object at b[sp.start:sp.end] (nil, false:
// not an object).
func members(b []byte, sp span) ([]member, bool) {
	i := sp.start
	if i >= sp.end || b[i] != '{' {
		return nil, false
	}
	var out []member
	i = skipSpace(b, i+1)
	if i < sp.end && b[i] == '}' {
		return out, true
	}
	for i < sp.end {
		kEnd := stringEnd(b, i)
		if kEnd < 0 || kEnd > sp.end {
			return nil, false
		}
		key, ok := unquote(b[i:kEnd])
		if !ok {
			return nil, false
		}
		m := member{key: key, keyStart: i}
		i = skipSpace(b, kEnd)
		if i >= sp.end || b[i] != ':' {
			return nil, false
		}
		m.valStart = skipSpace(b, i+1)
		if m.valEnd = valueEnd(b, m.valStart); m.valEnd < 0 || m.valEnd > sp.end {
			return nil, false
		}
		out = append(out, m)
		i = skipSpace(b, m.valEnd)
		if i >= sp.end {
			return nil, false
		}
		if b[i] == '}' {
			return out, true
		}
		if b[i] != ',' {
			return nil, false
		}
		i = skipSpace(b, i+1)
	}
	return nil, false
}

// elements lists the elements of the array at b[sp.start:sp.end] (nil,
// false: not an array). At most limit+1 are listed: the caller refuses more.
func elements(b []byte, sp span, limit int) ([]span, bool) {
	i := sp.start
	if i >= sp.end || b[i] != '[' {
		return nil, false
	}
	out := []span{}
	i = skipSpace(b, i+1)
	if i < sp.end && b[i] == ']' {
		return out, true
	}
	for i < sp.end {
		end := valueEnd(b, i)
		if end < 0 || end > sp.end {
			return nil, false
		}
		out = append(out, span{i, end})
		if len(out) > limit {
			return out, true
		}
		i = skipSpace(b, end)
		if i >= sp.end {
			return nil, false
		}
		if b[i] == ']' {
			return out, true
		}
		if b[i] != ',' {
			return nil, false
		}
		i = skipSpace(b, i+1)
	}
	return nil, false
}

// find returns the last member named key (last wins, as in encoding/json).
func find(ms []member, key string) (member, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].key == key {
			return ms[i], true
		}
	}
	return member{}, false
}

func (m member) val() span { return span{m.valStart, m.valEnd} }

// cut is the set of deletions that turns the request's body into the
// envelope of one event. Deletions never overlap: each level deletes only
// around the part it keeps, and the next level works inside that part.
type cut []span

// keepOnly keeps, of the array arr, only its element el.
func (c *cut) keepOnly(arr, el span) {
	*c = append(*c, span{arr.start + 1, el.start}, span{el.end, arr.end - 1})
}

// drop deletes the members of an object for which gone is true, with the
// commas that separated them, leaving valid JSON.
func (c *cut) drop(ms []member, gone func(member) bool) {
	for i := 0; i < len(ms); {
		if !gone(ms[i]) {
			i++
			continue
		}
		j := i // the run of deleted members is ms[i:j]
		for j < len(ms) && gone(ms[j]) {
			j++
		}
		switch {
		case j < len(ms): // a kept member follows: up to its key
			*c = append(*c, span{ms[i].keyStart, ms[j].keyStart})
		case i > 0: // the run ends the object: from the kept one before it
			*c = append(*c, span{ms[i-1].valEnd, ms[j-1].valEnd})
		default: // every member goes
			*c = append(*c, span{ms[i].keyStart, ms[j-1].valEnd})
		}
		i = j
	}
}

// apply returns a copy of body with the deletions made.
func (c cut) apply(body []byte) []byte {
	dels := slices.Clone(c)
	slices.SortFunc(dels, func(a, b span) int { return a.start - b.start })
	n := len(body)
	for _, d := range dels {
		n -= max(d.end-d.start, 0) // at most: overlaps (never) are skipped below
	}
	// Sized to the envelope, not the body: a request of n events makes n
	// envelopes, and each at the body's size would make the split O(n²).
	out := make([]byte, 0, max(n, 0))
	at := 0
	for _, d := range dels {
		if d.end <= d.start || d.start < at {
			continue // empty, or (never by construction) overlapping
		}
		out = append(out, body[at:d.start]...)
		at = d.end
	}
	return append(out, body[at:]...)
}
