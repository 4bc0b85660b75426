package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"

	"github.com/hookwarden/hookwarden/internal/extract"
)

// Decoding a whole body is most of what a filter costs (a 1 KiB Stripe event:
// about 90 % of an evaluation). Most filters read a few members of it
// (body.data.object.amount_paid), so Compile finds, in the checked
// expression, which parts of body and headers it reads; an evaluation then
// decodes only those and builds a small map of the same Go types a full
// decode gives (map[string]any, float64, string, bool, nil). Any other use
// (the whole value, a computed key, size(body), "k" in body) reads a whole
// value, decoded with encoding/json as before. The result is the same as
// with the full decode in every case (FuzzPartialMatchesFull).

// plan is what one expression reads.
type plan struct {
	// body is the tree of the body members read; nil when body is not read.
	// A whole root is the full decode.
	body *node
	// headers lists the header names read (as written: a name with an upper
	// case letter is never found); headersAll: the map is used whole.
	headers    []string
	headersAll bool
}

// node is one value on the paths an expression reads.
type node struct {
	whole bool     // the value is used as a whole: decode it all
	keys  []string // members selected from it by a constant key
	kids  []*node  // kids[i] is what is read of member keys[i]
}

// presence: only whether the member exists is read (has(body.a)).
func (n *node) presence() bool { return !n.whole && len(n.keys) == 0 }

func (n *node) child(k string) *node {
	for i, key := range n.keys {
		if key == k {
			return n.kids[i]
		}
	}
	c := &node{}
	n.keys, n.kids = append(n.keys, k), append(n.kids, c)
	return c
}

// analyse finds what the checked expression a reads of body and headers.
func analyse(a *celast.AST) *plan {
	p := &plan{}
	var idents []celast.NavigableExpr
	shadowed := false
	celast.MatchDescendants(celast.NavigateAST(a), func(e celast.NavigableExpr) bool {
		switch e.Kind() {
		case celast.IdentKind:
			if n := e.AsIdent(); n == "body" || n == "headers" {
				idents = append(idents, e)
			}
		case celast.ComprehensionKind:
			// A macro variable named body or headers hides the variable
			// inside it: take every use as a whole one.
			c := e.AsComprehension()
			for _, v := range []string{c.IterVar(), c.IterVar2(), c.AccuVar()} {
				shadowed = shadowed || v == "body" || v == "headers"
			}
		}
		return false
	})
	for _, id := range idents {
		path, test := chain(id)
		if shadowed {
			path, test = nil, false
		}
		if id.AsIdent() == "headers" {
			if len(path) == 0 {
				p.headersAll = true
			} else {
				p.headers = append(p.headers, path[0])
			}
			continue
		}
		if p.body == nil {
			p.body = &node{}
		}
		n := p.body
		for _, k := range path {
			n = n.child(k)
		}
		if !test {
			n.whole = true
		}
	}
	if p.headersAll {
		p.headers = nil
	}
	return p
}

// chain returns the constant keys selected from e, outermost last: body.a,
// body["a"], body.?a, body[?"a"] and has(body.a) (test: the chain ends in a
// presence test).
func chain(e celast.NavigableExpr) (path []string, test bool) {
	for {
		parent, ok := e.Parent()
		if !ok {
			return path, false
		}
		switch parent.Kind() {
		case celast.SelectKind:
			s := parent.AsSelect()
			path = append(path, s.FieldName())
			if s.IsTestOnly() {
				return path, true
			}
		case celast.CallKind:
			c := parent.AsCall()
			switch c.FunctionName() {
			case operators.Index, operators.OptIndex, operators.OptSelect:
			default:
				return path, false
			}
			args := c.Args()
			if c.IsMemberFunction() || len(args) != 2 || args[0].ID() != e.ID() || args[1].Kind() != celast.LiteralKind {
				return path, false
			}
			k, ok := args[1].AsLiteral().(types.String)
			if !ok {
				return path, false // body[0], body[1u]: read whole
			}
			path = append(path, string(k))
		default:
			return path, false
		}
		e = parent
	}
}

// errFallback: the partial decode met what only the full one decides.
var errFallback = errors.New("filter: full decode needed")

// partial decodes the parts of doc that n reads. doc is valid JSON without a
// number encoding/json rejects (mayOverflow is false).
func partial(doc []byte, n *node) (any, error) {
	if n.whole || n.presence() {
		return decode(doc)
	}
	if len(doc) == 0 || doc[0] != '{' {
		return decode(doc) // selecting from a non-object: the same error as the full decode
	}
	var buf [4][]byte
	raws := buf[:0]
	if len(n.keys) > len(buf) {
		raws = make([][]byte, len(n.keys))
	}
	raws = raws[:len(n.keys)]
	extract.Members(doc, n.keys, raws) // one scan for every key
	m := make(map[string]any, len(n.keys))
	for i, raw := range raws {
		if raw == nil {
			continue
		}
		k, c := n.keys[i], n.kids[i]
		if c.presence() {
			m[k] = nil // read by has() only: the value does not matter
			continue
		}
		v, err := partial(raw, c)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// decode decodes one raw JSON value as json.Unmarshal into an any does,
// scalars without its machinery.
func decode(raw []byte) (any, error) {
	if len(raw) == 0 {
		return nil, errFallback
	}
	if err := checkDecode(raw); err != nil {
		return nil, err
	}
	switch c := raw[0]; {
	case c == '"':
		if s, ok := extract.Unquote(raw); ok {
			return s, nil
		}
		return nil, errFallback
	case c == 't' && string(raw) == "true":
		return true, nil
	case c == 'f' && string(raw) == "false":
		return false, nil
	case c == 'n' && string(raw) == "null":
		return nil, nil
	case c == '-' || ('0' <= c && c <= '9'):
		f, err := strconv.ParseFloat(string(raw), 64) // as encoding/json converts a number
		if err != nil {
			return nil, errFallback
		}
		return f, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, errFallback
	}
	return v, nil
}

// maxIntDigits: a number without an exponent needs more digits than this to
// be out of a float64's range.
const maxIntDigits = 308

// mayOverflow reports whether the valid JSON document b may hold a number
// out of a float64's range (1e400), which makes json.Unmarshal fail and the
// whole body null, wherever the number is. It skips the strings (IndexByte
// finds their quotes) and looks at the numbers between them. Conservative: a
// long run of digits says yes too, and the caller then decodes the whole
// body, which decides.
func mayOverflow(b []byte) bool {
	for i := 0; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return numbersOverflow(b[i:])
		}
		if numbersOverflow(b[i : i+q]) {
			return true
		}
		if i = extract.StringEnd(b, i+q); i < 0 {
			return false // not valid JSON: not the case here
		}
	}
	return false
}

// numbersOverflow looks at the numbers of a part of a document outside its
// strings.
func numbersOverflow(b []byte) bool {
	run := 0 // digits just before b[i]
	for i, c := range b {
		switch {
		case '0' <= c && c <= '9':
			if run++; run > maxIntDigits {
				return true
			}
			continue
		case (c == 'e' || c == 'E') && run > 0:
			if expOverflows(b, i) {
				return true
			}
		}
		run = 0
	}
	return false
}

// expOverflows parses the number around the exponent mark b[i].
func expOverflows(b []byte, i int) bool {
	start := i
	for start > 0 && (isDigit(b[start-1]) || b[start-1] == '.') {
		start--
	}
	if start > 0 && b[start-1] == '-' {
		start--
	}
	end := i + 1
	if end < len(b) && (b[end] == '+' || b[end] == '-') {
		end++
	}
	for end < len(b) && isDigit(b[end]) {
		end++
	}
	_, err := strconv.ParseFloat(string(b[start:end]), 64)
	return errors.Is(err, strconv.ErrRange)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// headerSubset is the headers map with only the names in names, built as
// Request.headerVal builds the whole one.
func headerSubset(h http.Header, names []string) map[string]string {
	m := make(map[string]string, len(names))
	for _, n := range names {
		if _, done := m[n]; done {
			continue
		}
		var v []string
		found := false
		for k, vs := range h {
			if !lowerIs(k, n) {
				continue
			}
			if found { // two spellings of one name (not from net/http)
				vs = append([]string{strings.Join(v, ", ")}, vs...)
			}
			v, found = vs, true
		}
		if found {
			m[n] = strings.Join(v, ", ")
		}
	}
	return m
}

// lowerIs reports strings.ToLower(k) == n, without allocating for ASCII.
func lowerIs(k, n string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] >= 0x80 {
			return strings.ToLower(k) == n
		}
	}
	if len(k) != len(n) {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != n[i] {
			return false
		}
	}
	return true
}
