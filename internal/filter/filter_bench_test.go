package filter

import (
	"net/http"
	"strings"
	"testing"
)

// stripeLike is a 1 KiB Stripe-style invoice.paid event.
func stripeLike() []byte {
	head := `{"id":"evt_1QxYz2LkdIwHu7ix","object":"event","api_version":"2024-06-20","created":1733011200,` +
		`"livemode":true,"pending_webhooks":1,"type":"invoice.paid","request":{"id":null,"idempotency_key":null},` +
		`"data":{"object":{"id":"in_1QxYz1LkdIwHu7ix","object":"invoice","customer":"cus_R2kL9mQ","amount_paid":2000,` +
		`"currency":"eur","status":"paid","billing_reason":"subscription_cycle","metadata":{"plan":"pro"},"description":"`
	tail := `"}}}`
	return []byte(head + strings.Repeat("x", 1024-len(head)-len(tail)) + tail)
}

// BenchmarkFilterEval is one typical filter on a fresh event each time: the
// body is parsed, the headers converted, the expression evaluated.
func BenchmarkFilterEval(b *testing.B) {
	f, err := Compile(`body.livemode && event.type.startsWith("invoice.") && body.data.object.amount_paid >= 1000`)
	if err != nil {
		b.Fatal(err)
	}
	body := stripeLike()
	h := http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1,v1=ab"}, "User-Agent": {"Stripe/1.0"}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		e := &Event{Request: &Request{Source: "stripe", Header: h}, ID: "evt_1QxYz2LkdIwHu7ix", Type: "invoice.paid", Body: body}
		ok, err := f.Match(e)
		if !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkFilterCostLimit is the worst a filter can cost: stopped at the limit.
func BenchmarkFilterCostLimit(b *testing.B) {
	f, err := Compile(`body.l.all(x, body.l.all(y, x == y))`)
	if err != nil {
		b.Fatal(err)
	}
	e := event(`{"l":[` + strings.Repeat(`1,`, 1999) + `1]}`)
	e.ResolveName("body") // parsed once, outside the loop: the evaluation alone
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Match(e); err == nil {
			b.Fatal("no error")
		}
	}
}
