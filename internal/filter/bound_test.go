package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// Issue 46 point 4: what a filter decodes is bounded in bytes, values and
// depth, whichever way it reads the body (whole, or a selected member), and
// a refusal is ErrDecodeLimit, not a result. A member within the bounds of a
// body past them is still read.
func TestDecodeBounds(t *testing.T) {
	arr := func(n int) string { return "[" + strings.Repeat("1,", n-1) + "1]" }
	nest := func(d int) string { return strings.Repeat("[", d) + strings.Repeat("]", d) }
	big := strings.Repeat("x", MaxDecodeBytes)
	obj := func(n int) string { // n members and an empty object: n+2 values
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `"k%d":1,`, i)
		}
		return "{" + b.String() + `"z":{}}`
	}
	for _, c := range []struct {
		name, expr, body string
		refused          bool
	}{
		{"whole, values at the bound", `size(body) == 4095`, arr(MaxDecodeValues - 1), false},
		{"whole, one value over", `size(body) > 0`, arr(MaxDecodeValues), true},
		{"whole, 1 MiB", `size(body) > 0`, `{"a":"` + strings.Repeat("y", 1<<20) + `"}`, true},
		{"member, values over", `body.a.exists(x, x == 2)`, `{"a":` + arr(MaxDecodeValues+1) + `}`, true},
		{"member, small in a big body", `body.a == 1`, `{"a":1,"b":"` + big + `"}`, false},
		{"member string over the bytes", `body.s.startsWith("x")`, `{"s":"` + big + `"}`, true},
		{"depth at the bound", `size(body) == 1`, nest(MaxDecodeDepth), false},
		{"depth over", `size(body) == 1`, nest(MaxDecodeDepth + 1), true},
		{"member depth over", `size(body.a) == 1`, `{"a":` + nest(MaxDecodeDepth+1) + `}`, true},
		{"objects count their members", `size(body) == 4095`, obj(MaxDecodeValues - 2), false},
		{"objects, one member over", `size(body) > 0`, obj(MaxDecodeValues - 1), true},
		{"not JSON is null, not refused", `body == null`, strings.Repeat("z", 1<<20), false},
	} {
		f, err := Compile(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := f.Match(event(c.body))
		switch {
		case c.refused && !errors.Is(err, ErrDecodeLimit):
			t.Errorf("%s: %v %v, want ErrDecodeLimit", c.name, ok, err)
		case !c.refused && (err != nil || !ok):
			t.Errorf("%s: %v %v, want true", c.name, ok, err)
		}
	}
	// Refused once per event, for every filter that reads it; a filter
	// that does not read the body is not affected.
	e := event(`{"a":` + arr(MaxDecodeValues+1) + `}`)
	for _, expr := range []string{`size(body.a) > 0`, `size(body.a) > 1`} {
		f, _ := Compile(expr)
		if _, err := f.Match(e); !errors.Is(err, ErrDecodeLimit) {
			t.Fatalf("%s: %v, want ErrDecodeLimit", expr, err)
		}
	}
	for _, expr := range []string{`event.id == "evt_1"`, `!has(body.b)`} {
		f, _ := Compile(expr)
		if ok, err := f.Match(e); !ok || err != nil {
			t.Fatalf("%s after a refused one: %v %v", expr, ok, err)
		}
	}
	// The whole body refused for one filter, a member read for the next.
	e = event(`{"k":"v","a":` + arr(MaxDecodeValues+1) + `}`)
	for expr, refused := range map[string]bool{`size(body) > 0`: true, `body.k == "v"`: false} {
		f, _ := Compile(expr)
		if ok, err := f.Match(e); errors.Is(err, ErrDecodeLimit) != refused || (!refused && !ok) {
			t.Fatalf("%s: %v %v", expr, ok, err)
		}
	}
}

// tokenCount counts the values and the depth of a valid JSON document with
// encoding/json's tokenizer, apart from checkDecode's scan: object keys are
// not values.
func tokenCount(doc []byte) (values, depth int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	type frame struct{ object, wantKey bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return values, depth, true
		}
		if err != nil {
			return 0, 0, false
		}
		if d, isDelim := tok.(json.Delim); isDelim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			if stack[n-1].wantKey {
				stack[n-1].wantKey = false
				continue // a key
			}
			stack[n-1].wantKey = true
		}
		values++
		if d, isDelim := tok.(json.Delim); isDelim {
			stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
			depth = max(depth, len(stack))
		}
	}
}

// FuzzCheckDecode: on any valid JSON, checkDecode refuses exactly what is
// past the bounds, as encoding/json's tokenizer counts it, and never
// anything else; on any input it does not panic.
func FuzzCheckDecode(f *testing.F) {
	for _, s := range []string{`1`, `[]`, `{}`, `[1,[2,{}],{"a":[]}]`, `{"a":"x,[{\"","b":[ ]}`, ` [ 1 , 2 ] `,
		`"\\\"[,"`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := checkDecode(doc)
		if err != nil && !errors.Is(err, ErrDecodeLimit) {
			t.Fatalf("%v does not wrap ErrDecodeLimit", err)
		}
		if !json.Valid(doc) {
			return
		}
		values, depth, ok := tokenCount(doc)
		if !ok {
			t.Fatalf("valid JSON the tokenizer refuses: %q", doc)
		}
		past := len(bytes.TrimSpace(doc)) > MaxDecodeBytes || values > MaxDecodeValues || depth > MaxDecodeDepth
		if past != (checkDecode(bytes.TrimSpace(doc)) != nil) {
			t.Fatalf("%q: %d values, depth %d: refused %v", doc, values, depth, err)
		}
	})
}
