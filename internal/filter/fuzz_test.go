package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

// FuzzFilter compiles arbitrary expressions and evaluates the ones that
// compile on arbitrary bodies and a header value. Properties: no panic; an
// evaluation that succeeds spent at most CostLimit; one past the limit is
// ErrCostLimit; a compile failure is a *CompileError with a position.
func FuzzFilter(f *testing.F) {
	for _, s := range []struct{ expr, body string }{
		{`body.livemode && event.type != "invoice.upcoming"`, stripeBody},
		{`body.data.object.lines.data.exists(l, l.amount < 600)`, stripeBody},
		{`body.l.all(x, body.l.all(y, x == y))`, `{"l":[1,2,3,4,5,6,7,8,9,10]}`},
		{`body[0].event in ["open", "click"]`, `[{"event":"open"}]`},
		{`headers["x-tag"].matches("^a.*$") || body == null`, `not json`},
		{`body.?a.?b.orValue(0) > 1.5`, `{"a":{"b":2}}`},
		{`size(body.s + body.s + body.s) > 3 && body.s.contains("zz")`, `{"s":"zzzzzzzzzzzzzzzzzzzzzzzz"}`},
		{`[1,2,3].map(x, [x, x, x]).all(l, l.exists(y, string(y) == event.id))`, `{}`},
		{`int(body.n) / int(body.d) == 1`, `{"n":1,"d":0}`},
		{`timestamp(body.t) < now`, `{"t":"2026-01-01T00:00:00Z"}`},
		{"event.type ==\n \"a\" &&", `{}`},
	} {
		f.Add(s.expr, []byte(s.body), "a, b")
	}
	f.Fuzz(func(t *testing.T, expr string, body []byte, hv string) {
		if len(expr) > 4096 {
			return
		}
		flt, err := Compile(expr)
		if err != nil {
			var ce *CompileError
			if !errors.As(err, &ce) || len(ce.Issues) == 0 {
				t.Fatalf("Compile(%q): %v is not a *CompileError with issues", expr, err)
			}
			for _, is := range ce.Issues {
				if is.Line < 1 || is.Column < 1 {
					t.Fatalf("Compile(%q): issue without a position: %+v", expr, is)
				}
			}
			return
		}
		e := &Event{Request: &Request{Source: "s", Header: http.Header{"X-Tag": {hv}}}, ID: "evt_1", Type: "t", Body: body}
		_, cost, err := flt.eval(e)
		if err == nil && cost > CostLimit {
			t.Fatalf("%q succeeded at cost %d, over the limit %d", expr, cost, CostLimit)
		}
		if cost > CostLimit && !errors.Is(err, ErrCostLimit) {
			t.Fatalf("%q spent %d (> %d) and failed with %v, not ErrCostLimit", expr, cost, CostLimit, err)
		}
	})
}

// partialExprs are the differential target's fixed expressions: each shape
// of partial read, and ones that fall back to the whole body.
var partialExprs = []string{
	`body.a.b == 1`,
	`body["a"]["b"] > 0.5 || body.c == "x"`,
	`has(body.a.b) && !has(body.a.c)`,
	`body.?a.?b.orValue(7) == 7`,
	`body[?"a"].hasValue() && body.a[?"b"].orValue(0) != 2`,
	`body.a.b.exists(x, x == 1)`,
	`body.a == {"b": 1.0} || body.d`,
	`string(body.a.b) == "1"`,
	`body.a.b == null && body.livemode`,
	`body.data.object.amount_paid >= 1000 && body.livemode`,
	`size(body) > 1`,    // whole
	`"a" in body`,       // whole
	`body[0].a == 1`,    // whole
	`body[body.k] == 1`, // body.k, then whole
	`headers["x-tag"] == "a, b" && has(headers.host)`,
	`"x-tag" in headers`,
}

// FuzzPartialMatchesFull: on any body, an expression evaluated with its
// partial decode and with the whole body decoded agree, result, cost and
// error alike. The expression is one of partialExprs, and the fuzzed one
// when it compiles.
func FuzzPartialMatchesFull(f *testing.F) {
	for i, b := range []string{
		`{"a":{"b":1}}`, `{"a":{"b":1},"a":{"c":2}}`, `{"a":{"b":[1,2]},"x":1e400}`, `{"a":"s"}`,
		`{"\u0061":{"b":0.75},"k":"a"}`, `[{"a":1}]`, `{"a":{"b":1`, `not json`, stripeBody,
		` {"a" : { "b" : 1e-400 }, "d": true } `, `{"a":{"b":"\ud800"}}`,
	} {
		f.Add(uint8(i), partialExprs[i%len(partialExprs)], []byte(b), "a, b")
	}
	f.Fuzz(func(t *testing.T, sel uint8, expr string, body []byte, hv string) {
		if json.Valid(body) && !mayOverflow(body) {
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("mayOverflow(%q) is false, but encoding/json fails: %v", body, err)
			}
		}
		if json.Valid(body) && checkDecode(bytes.TrimSpace(body)) != nil {
			return // the full decode is refused; the partial one reads less (TestDecodeBounds)
		}
		h := http.Header{"X-Tag": {hv}, "Host": {"h"}}
		exprs := []string{partialExprs[int(sel)%len(partialExprs)]}
		if len(expr) <= 512 {
			exprs = append(exprs, expr)
		}
		for _, x := range exprs {
			flt, err := Compile(x)
			if err != nil {
				continue
			}
			if part, full := both(flt, h, body); part != full {
				t.Fatalf("%s on %q: partial %s, full %s", x, body, part, full)
			}
		}
	})
}
