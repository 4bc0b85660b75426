package filter

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
)

// describe renders a plan: "a.b* c?" (a.b read whole, c by has() only), "*"
// for the whole body, "-" when body is not read; then the header names.
func (p *plan) describe() string {
	var parts []string
	var walk func(prefix string, n *node)
	walk = func(prefix string, n *node) {
		switch {
		case n.whole:
			parts = append(parts, prefix+"*")
		case n.presence():
			parts = append(parts, prefix+"?")
		}
		if n.whole {
			return // what is under a whole value is decoded with it
		}
		idx := make([]int, len(n.keys))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return n.keys[idx[a]] < n.keys[idx[b]] })
		for _, i := range idx {
			walk(prefix+n.keys[i]+".", n.kids[i])
		}
	}
	if p.body == nil {
		parts = append(parts, "-")
	} else {
		walk("", p.body)
	}
	s := strings.ReplaceAll(strings.Join(parts, " "), ".*", "*")
	s = strings.ReplaceAll(s, ".?", "?")
	h := slices.Clone(p.headers)
	slices.Sort(h)
	if p.headersAll {
		h = []string{"*"}
	}
	return s + " | " + strings.Join(slices.Compact(h), ",")
}

func TestPlanShapes(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`event.type == "a"`, "- | "},
		{`body.livemode`, "livemode* | "},
		{`body.livemode && body.data.object.amount_paid >= 1000`, "data.object.amount_paid* livemode* | "},
		{`body["data"]["object"].id == "x"`, "data.object.id* | "},
		{`has(body.data.object.refunded)`, "data.object.refunded? | "},
		{`has(body.a) && body.a.b == 1`, "a.b* | "},
		{`body.?data.?object.?refunded.orValue(false)`, "data.object.refunded* | "},
		{`body[?"a"].orValue(1) == 1`, "a* | "},
		{`body.items.exists(i, i.id == 1)`, "items* | "},
		{`body.a == {"b": 1} && body.a.b == 1`, "a* | "}, // whole a covers a.b
		{`body[0].event == "open"`, "* | "},              // an int index: whole
		{`body[event.type] == 1`, "* | "},                // a computed key: whole
		{`size(body) > 1`, "* | "},
		{`"a" in body`, "* | "},
		{`body == null`, "* | "},
		{`body.a[body.k] == 1`, "a* k* | "},
		{`[body.a].all(x, x == 1)`, "a* | "},
		{`[1].exists(body, body == 1) || body.a == 1`, "* | "}, // a macro variable named body
		{`headers["content-type"] == "a" && headers.host == "b"`, "- | content-type,host"},
		{`has(headers.host)`, "- | host"},
		{`"x" in headers`, "- | *"},
		{`size(headers) > 0 && headers["a"] == ""`, "- | *"},
	}
	for _, tt := range tests {
		f, err := Compile(tt.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.expr, err)
		}
		if got := f.plan.describe(); got != tt.want {
			t.Errorf("%s: plan %q, want %q", tt.expr, got, tt.want)
		}
	}
}

// fullPlan reads everything whole: the evaluation before partial decoding.
var fullPlan = &plan{body: &node{whole: true}, headersAll: true}

// both evaluates f on a fresh event with its plan and with the full decode.
func both(f *Filter, h http.Header, body []byte) (part, full string) {
	run := func(p *plan) string {
		g := *f
		g.plan = p
		e := &Event{Request: &Request{Source: "s", Header: h}, ID: "evt_1", Type: "t", Body: body}
		ok, cost, err := g.eval(e)
		if err != nil {
			return fmt.Sprintf("error (cost %d): %v", cost, err)
		}
		return fmt.Sprintf("%v (cost %d)", ok, cost)
	}
	return run(f.plan), run(fullPlan)
}

// The partial decode gives what the full one gives, result and error, for
// each shape on bodies that probe the edges: a missing key, a non-object on
// the path, duplicate keys, escapes, an out-of-range number elsewhere,
// invalid JSON.
func TestPartialMatchesFull(t *testing.T) {
	exprs := []string{
		`body.a.b == 1`,
		`body.a.b > 0.5`,
		`body["a"]["b"] == "x"`,
		`has(body.a.b)`,
		`has(body.a) && !has(body.z)`,
		`body.?a.?b.orValue(7) == 7`,
		`body[?"a"].hasValue()`,
		`body.a.b`,
		`body.a.b.exists(x, x == 1)`,
		`body.a == {"b": 1.0}`,
		`body.s.startsWith("é")`,
		`body.n == 1e308`,
		`string(body.a.b) == "1"`,
		`body.a.b == null`,
		`headers["x-tag"] == "a, b" && headers["X-Tag"] == ""`,
		`has(headers.host) || headers["content-type"].startsWith("app")`,
	}
	bodies := []string{
		`{"a":{"b":1}}`,
		`{"a":{"b":1},"a":{"c":2}}`,   // the last duplicate wins whole
		`{"a":{"b":"x"},"a":{"b":2}}`, // ... even when the first had b
		`{"a":{"b":[1,2]},"x":1e400}`, // out of range elsewhere: body is null
		`{"a":{"b":1},"x":"1e400"}`,   // ... in a string it is not a number
		`{"a":{"b":1},"x":1e-400}`,    // underflow is 0, not an error
		`{"a":"str"}`,                 // a string where an object is selected
		`{"a":[{"b":1}]}`,             // a list where an object is selected
		`{"\u0061":{"b":0.75}}`,       // an escaped key
		`{"a":{"b":null}}`,
		`{"s":"\u00e9t\u00e9","n":1e308}`,
		`{"a":{"b":true}}`,
		`{}`,
		`[]`,
		`[{"a":1}]`,
		`"a"`,
		`3`,
		`null`,
		` {"a" : { "b" : 1 } } `,
		`{"a":{"b":1}`, // invalid: null
		`not json`,
		``,
		`{"a":{"b":1` + strings.Repeat("0", 400) + `}}`, // 1e400 without an exponent
	}
	h := http.Header{"Content-Type": {"application/json"}, "X-Tag": {"a", "b"}, "Host": {"h"}}
	for _, x := range exprs {
		f, err := Compile(x)
		if err != nil {
			t.Fatalf("Compile(%q): %v", x, err)
		}
		if f.plan.body != nil && f.plan.body.whole && x != `body.a == {"b": 1.0}` {
			t.Errorf("%s: reads the whole body, want a partial decode", x)
		}
		for _, b := range bodies {
			if part, full := both(f, h, []byte(b)); part != full {
				t.Errorf("%s on %.60s: partial %s, full %s", x, b, part, full)
			}
		}
	}
}

// Two spellings of one name (a Header not built by net/http) join as in the
// whole map: in the map's order, so either way round.
func TestHeaderSpellings(t *testing.T) {
	h := http.Header{"X-Tag": {"a", "b"}, "x-tag": {"c"}, "X-TAG": {"d"}}
	got := headerSubset(h, []string{"x-tag", "X-Tag", "absent"})
	if len(got) != 1 {
		t.Fatalf("headers %v, want only x-tag", got)
	}
	parts := strings.Split(got["x-tag"], ", ")
	slices.Sort(parts)
	if !slices.Equal(parts, []string{"a", "b", "c", "d"}) {
		t.Fatalf("x-tag = %q, want a, b, c and d", got["x-tag"])
	}
	if !lowerIs("K-X", "k-x") || lowerIs("K-X", "K-X") || !lowerIs("\u212a", "k") /* the Kelvin sign lowers to k */ {
		t.Fatal("lowerIs is not strings.ToLower(k) == n")
	}
}

// A filter that needs the whole body shares its decode with the next
// filters of the event; a partial one is rebuilt for another plan.
func TestDecodesShared(t *testing.T) {
	whole, _ := Compile(`size(body) == 2`)
	part, _ := Compile(`body.a == 1`)
	e := event(`{"a":1,"b":2}`)
	if ok, err := part.Match(e); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if e.full != nil || e.partialVal == nil {
		t.Fatal("a partial plan decoded the whole body")
	}
	if ok, err := whole.Match(e); !ok || err != nil {
		t.Fatal(ok, err)
	}
	e.Body = []byte(`{"a":2}`) // not read again
	if ok, err := part.Match(e); !ok || err != nil {
		t.Fatalf("the partial plan did not reuse the whole decode: %v %v", ok, err)
	}
}

func TestMayOverflow(t *testing.T) {
	tests := []struct {
		doc  string
		want bool
	}{
		{`{"a":1e308,"b":-2.5E+10,"c":true,"d":false}`, false},
		{`{"a":1e309}`, true},
		{`{"a":-1.5E400}`, true},
		{`[1e-400]`, false},
		{`{"id":"3e4f1ex"}`, false},
		{`{"s":"9e999"}`, false}, // in a string
		{`{"s\\\"":"\\\"9e999", "n": 9e999}`, true},
		{`{"s":"\\\\", "n": 9e999}`, true},
		{"[" + strings.Repeat("9", 308) + "]", false},
		{"[" + strings.Repeat("9", 309) + "]", true},
		{"[0." + strings.Repeat("1", 400) + "]", true}, // conservative
	}
	for _, tt := range tests {
		if got := mayOverflow([]byte(tt.doc)); got != tt.want {
			t.Errorf("mayOverflow(%.40s) = %v, want %v", tt.doc, got, tt.want)
		}
	}
}
