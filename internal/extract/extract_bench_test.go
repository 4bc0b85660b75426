package extract

import (
	"net/http"
	"strings"
	"testing"
)

// BenchmarkExtractSpecs measures finding an event id in a 1 KiB request, for each
// kind of spec the presets use. The id sits at the start of the body (as most
// providers put it) except for "json-late", where it follows the payload.
// BenchmarkExtract (extract_test.go) covers a realistic Stripe body.
func BenchmarkExtractSpecs(b *testing.B) {
	pad := strings.Repeat("x", 900)
	jsonEarly := []byte(`{"id":"evt_1NvH2cLkdIwHu7ix","type":"invoice.paid","data":{"object":{"id":"in_1","pad":"` + pad + `"}}}`)
	jsonLate := []byte(`{"data":{"object":{"pad":"` + pad + `","id":"in_1"}},"type":"invoice.paid","id":"evt_1NvH2cLkdIwHu7ix"}`)
	nested := []byte(`{"signature":{"token":"t"},"event-data":{"event":"delivered","id":"e1","pad":"` + pad + `"}}`)
	form := []byte("MessageSid=SM1&MessageStatus=delivered&Body=" + pad)
	h := http.Header{"Webhook-Id": {"msg_2Lh6h1cP3Ym0iJ0w"}, "Content-Type": {"application/json"}}
	cases := []struct {
		name, spec string
		body       []byte
	}{
		{"header", "header:webhook-id|header:svix-id", jsonEarly},
		{"json-early", "json:id", jsonEarly},
		{"json-late", "json:id", jsonLate},
		{"json-nested", "json:event-data.id", nested},
		{"form-composite", "form:MessageSid+form:MessageStatus", form},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			x, err := Parse(c.spec)
			if err != nil {
				b.Fatal(err)
			}
			if v, err := x.Extract(h, c.body); err != nil || v == "" {
				b.Fatalf("Extract = %q, %v", v, err)
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := x.Extract(h, c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
