package filter

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/benchcpu"
	"github.com/hookwarden/hookwarden/internal/extract"
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

// The hookbench filter phase's two filters: one over the body and the type,
// one over a header and the type.
const (
	benchOnBody   = `body.livemode && event.type.startsWith("invoice.") && body.data.object.amount_paid >= 1000`
	benchOnHeader = `headers["content-type"].startsWith("application/json") && event.type in ["invoice.paid", "invoice.payment_failed"]`
)

// BenchmarkFilterEval is one typical filter on a fresh event each time: the
// body members it reads decoded, the expression evaluated. Full is the same
// with the whole body decoded (the evaluation before partial decoding), the
// baseline of the ratio; Validated is an event whose body the extractors
// have already checked as JSON (extract.Body), as the receiver passes it.
func BenchmarkFilterEval(b *testing.B) {
	b.Run("partial", func(b *testing.B) { benchEval(b, benchOnBody, nil, false) })
	b.Run("validated", func(b *testing.B) { benchEval(b, benchOnBody, nil, true) })
	b.Run("full", func(b *testing.B) { benchEval(b, benchOnBody, fullPlan, false) })
}

// BenchmarkFilterEvalHeaders is the header filter: the header it reads,
// against the whole headers map converted.
func BenchmarkFilterEvalHeaders(b *testing.B) {
	b.Run("partial", func(b *testing.B) { benchEval(b, benchOnHeader, nil, false) })
	b.Run("full", func(b *testing.B) { benchEval(b, benchOnHeader, fullPlan, false) })
}

func benchEval(b *testing.B, expr string, p *plan, validated bool) {
	f, err := Compile(expr)
	if err != nil {
		b.Fatal(err)
	}
	if p != nil {
		f.plan = p
	}
	body := stripeLike()
	// What a Stripe request carries, as the receiver stores it.
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Stripe-Signature": {"t=1,v1=ab"},
		"User-Agent": {"Stripe/1.0 (+https://stripe.com/docs/webhooks)"}, "Accept": {"*/*; q=0.5, application/xml"},
		"Cache-Control": {"no-cache"}, "Content-Length": {"1024"}, "Host": {"hooks.example.com"}}
	// The receiver's extractors have checked the body before the filters.
	doc := &extract.Body{Bytes: body}
	doc.ValidJSON()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	defer benchcpu.Report(b)()
	for b.Loop() {
		e := &Event{Request: &Request{Source: "stripe", Header: h}, ID: "evt_1QxYz2LkdIwHu7ix", Type: "invoice.paid", Body: body}
		if validated {
			e.Doc = doc
		}
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

// BenchmarkFilterDecodeLimit is the worst a filter's decode can cost: a body
// at the decode bounds read whole (size(body)), on a fresh event each time,
// by shape; and a body past them, refused (1 MiB: refused on its length;
// 64 KiB of values: refused after one scan). The figure of docs/reference.md,
// "Content filters".
func BenchmarkFilterDecodeLimit(b *testing.B) {
	fill := func(elem string, n int) string {
		return "[" + strings.Repeat(elem+",", n-1) + elem + "]"
	}
	esc := `"` + strings.Repeat(`\u00e9`, (MaxDecodeBytes-2)/6) + `"`
	for _, c := range []struct {
		name, body string
		refused    bool
	}{
		{"numbers", fill("1", MaxDecodeValues-1), false},
		{"objects", fill("{}", MaxDecodeValues-1), false},
		{"members", "[" + strings.Repeat(`{"k":12345678},`, MaxDecodeValues/2-2) + `{"k":12345678}]`, false},
		{"strings", fill(`"`+strings.Repeat("s", MaxDecodeBytes/MaxDecodeValues-4)+`"`, MaxDecodeValues-1), false},
		{"escaped", esc, false},
		{"refused-1MiB", fill("1", 1<<19), true},
		{"refused-values", fill("1", MaxDecodeBytes/2-1), true},
	} {
		b.Run(c.name, func(b *testing.B) {
			f, err := Compile(`size(body) >= 0`)
			if err != nil {
				b.Fatal(err)
			}
			doc := &extract.Body{Bytes: []byte(c.body)}
			if !doc.ValidJSON() { // checked by the extractors before the filters
				b.Fatal("not JSON")
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			defer benchcpu.Report(b)()
			for b.Loop() {
				_, err := f.Match(&Event{Request: &Request{Source: "s"}, ID: "e", Type: "t", Doc: doc})
				if refused := err != nil; refused != c.refused {
					b.Fatal(err)
				}
			}
		})
	}
}
