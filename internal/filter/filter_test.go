package filter

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

const stripeBody = `{"id":"evt_1","type":"invoice.paid","livemode":true,
 "data":{"object":{"id":"in_1","customer":"cus_9","amount_paid":2000,"currency":"eur","lines":{"data":[{"amount":1500},{"amount":500}]}}}}`

func event(body string) *Event {
	h := http.Header{"Content-Type": {"application/json"}, "X-Tag": {"a", "b"}}
	return &Event{Request: &Request{Source: "stripe", Header: h}, ID: "evt_1", Type: "invoice.paid", Body: []byte(body)}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		expr, body string
		want       bool
		err        string // substring of the evaluation error; "" for none
	}{
		{`event.type == "invoice.paid"`, stripeBody, true, ""},
		{`event.type.startsWith("customer.")`, stripeBody, false, ""},
		{`event.source == "stripe" && event.id == "evt_1"`, stripeBody, true, ""},
		{`body.livemode && event.type != "invoice.upcoming"`, stripeBody, true, ""},
		{`body.data.object.amount_paid > 1000`, stripeBody, true, ""},  // double against int
		{`body.data.object.amount_paid == 2000`, stripeBody, true, ""}, // heterogeneous equality
		{`body.data.object.currency in ["eur", "usd"]`, stripeBody, true, ""},
		{`body.data.object.lines.data.exists(l, l.amount < 600)`, stripeBody, true, ""},
		{`headers["content-type"].startsWith("application/json")`, stripeBody, true, ""},
		{`headers["x-tag"] == "a, b"`, stripeBody, true, ""},
		{`"x-absent" in headers`, stripeBody, false, ""},
		{`has(body.data.object.refunded)`, stripeBody, false, ""},
		{`body.?data.?object.?refunded.orValue(false)`, stripeBody, false, ""},
		{`body == null`, `not json`, true, ""},
		{`body == null`, ``, true, ""},
		{`body[0].event == "open"`, `[{"event":"open"}]`, true, ""},
		{`body.data.object.refunded`, stripeBody, false, "no such key"},
		{`body.livemode`, `{"livemode":"yes"}`, false, "not a bool"},
		{`body.data.x == 1`, `not json`, false, "evaluate filter"},
		{`headers["x-absent"] == "1"`, stripeBody, false, "no such key"},
	}
	for _, tt := range tests {
		f, err := Compile(tt.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.expr, err)
		}
		got, err := f.Match(event(tt.body))
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tt.expr, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one containing %q", tt.expr, err, tt.err)
		case got != tt.want:
			t.Errorf("%s on %.30s: got %v, want %v", tt.expr, tt.body, got, tt.want)
		}
	}
}

func TestCompileErrorsHavePositions(t *testing.T) {
	tests := []struct {
		expr      string
		line, col int
		msg       string
	}{
		{`bdy.livemode`, 1, 1, "undeclared reference to 'bdy'"},
		{`event.type == "a" &&`, 1, 21, "mismatched input"},
		{"event.type == \"a\" &&\n  event.id == 1", 2, 12, "found no matching overload"},
		{`event.type`, 1, 1, "must be a bool"},
		{`1 + 1`, 1, 1, "must be a bool"},
		{`   `, 1, 1, "empty expression"},
	}
	for _, tt := range tests {
		_, err := Compile(tt.expr)
		var ce *CompileError
		if !errors.As(err, &ce) {
			t.Fatalf("Compile(%q) = %v, want a *CompileError", tt.expr, err)
		}
		is := ce.Issues[0]
		if is.Line != tt.line || is.Column != tt.col || !strings.Contains(is.Message, tt.msg) {
			t.Errorf("Compile(%q): %s, want %d:%d: ...%s...", tt.expr, is, tt.line, tt.col, tt.msg)
		}
	}
}

func TestCostLimitStopsEvaluation(t *testing.T) {
	// 2,000 elements, each visited 2,000 times: far past the limit.
	body := `{"l":[` + strings.Repeat(`1,`, 1999) + `1]}`
	f, err := Compile(`body.l.all(x, body.l.all(y, x == y))`)
	if err != nil {
		t.Fatal(err)
	}
	_, cost, err := f.eval(event(body))
	if !errors.Is(err, ErrCostLimit) {
		t.Fatalf("err %v, want ErrCostLimit", err)
	}
	if cost > CostLimit+1000 {
		t.Fatalf("spent %d, the limit is %d", cost, CostLimit)
	}
}

// The body is parsed once per Event, however many filters read it.
func TestBodyParsedOnce(t *testing.T) {
	f, _ := Compile(`body.livemode`)
	e := event(stripeBody)
	if ok, err := f.Match(e); !ok || err != nil {
		t.Fatal(ok, err)
	}
	e.Body = []byte(`{"livemode":false}`) // not read again
	if ok, err := f.Match(e); !ok || err != nil {
		t.Fatalf("second evaluation reparsed the body: %v %v", ok, err)
	}
}
