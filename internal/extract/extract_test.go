package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, want string }{
		{"", "empty spec"},
		{"  ", "empty spec"},
		{"jsn:id", `extract: unknown kind "jsn" in "jsn:id"; want json:, header: or form:`},
		{"id", `missing kind in "id"`},
		{"json:", `empty path in "json:"`},
		{"json:a..b", `empty key in path "json:a..b"`},
		{"json:a.", `empty key`},
		{"header:", `invalid header name ""`},
		{"header:X Y", `invalid header name "X Y"`},
		{"form:", "empty form field"},
		{"json:a||json:b", "empty term"},
		{"json:a+", "empty term"},
		{"json:" + strings.Repeat("a.", 40) + "a", "deeper than"},
		{strings.Repeat("json:a|", 40) + "json:a", "more than 32 terms"},
	} {
		_, err := Parse(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): got %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
}

const stripeBody = `{"id":"evt_1NvXyZ","type":"invoice.paid","data":{"object":{"id":"in_123","amount_paid":2000}}}`

func TestExtract(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("X-Shopify-Webhook-Id", "wh-1")
	h.Set("X-GitHub-Delivery", "72d3162e")
	h.Set("webhook-id", "msg_1")
	form := "MessageSid=SM1&MessageStatus=delivered&To=%2B1555&Empty=&a+b=sp%20ace&semi=1;x=2"
	for _, tc := range []struct {
		spec, body, want string // want "" means ErrNotFound
	}{
		{"json:id", stripeBody, "evt_1NvXyZ"},
		{"json:data.object.id", stripeBody, "in_123"},
		{"json:data.object.amount_paid", stripeBody, "2000"},
		{"json:data.object", stripeBody, ""},
		{"json:data.object.id.x", stripeBody, ""},
		{"json:nope", stripeBody, ""},
		{"json:id", `[{"id":"x"}]`, ""},
		{"json:id", `{"id":"x"`, ""},             // invalid JSON
		{"json:id", `{"id":"x"} {"id":"y"}`, ""}, // trailing data
		{"json:id", ` {"id" : "a\"b\u00e9\ud83d\ude00" } `, "a\"bé😀"},
		{"json:id", `{"i\u0064":"escaped key"}`, "escaped key"},
		{"json:id", `{"id":"first","id":"last"}`, "last"},
		{"json:a.b", `{"a":{"b":1},"a":{"c":2}}`, ""},
		{"json:id", `{"id":-1.5e+3}`, "-1.5e+3"},
		{"json:id", `{"id":null}`, ""},
		{"json:id", `{"id":true}`, ""},
		{"json:id", `{"id":""}`, ""},
		{"json:id", `{"id":[1]}`, ""},
		{"json:id", `{"id":"a\nb"}`, ""}, // control character
		{"json:id", `{"id":"` + strings.Repeat("x", MaxValueLen+1) + `"}`, ""},
		{"json:event-data.id", `{"event-data":{"id":"CPg","event":"delivered"}}`, "CPg"},
		{"json:headers.message-id", `{"headers":{"message-id":"<m@x>"}}`, "<m@x>"},
		{"json:x", `{"a":{"x":"nested, not top"},"b":["x",{"x":1}]}`, ""},
		{"json:b", `{"a":"}{\"][","b":"ok"}`, "ok"},
		{"header:X-GitHub-Delivery", "", "72d3162e"},
		{"header:x-github-delivery", "", "72d3162e"},
		{"header:Webhook-Id", "", "msg_1"},
		{"header:X-Missing", "", ""},
		{"header:X-Shopify-Event-Id|header:X-Shopify-Webhook-Id", "", "wh-1"},
		{"form:MessageSid", form, "SM1"},
		{"form:To", form, "+1555"},
		{"form:Empty", form, ""},
		{"form:a b", form, "sp ace"},
		{"form:semi", form, ""},
		{"form:MessageSid+form:MessageStatus", form, "SM1:delivered"},
		{"form:MessageSid+form:CallStatus", form, ""},
		{"header:I-Twilio-Idempotency-Token|form:MessageSid+form:MessageStatus", form, "SM1:delivered"},
		{"json:RecordType+json:MessageID", `{"RecordType":"Bounce","MessageID":"m-1"}`, "Bounce:m-1"},
		{"json:RecordType + json:MessageID | json:MessageID", `{"MessageID":"m-1"}`, "m-1"},
		{"json:id|header:X-GitHub-Delivery", "not json", "72d3162e"},
	} {
		ex, err := Parse(tc.spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.spec, err)
		}
		got, err := ex.Extract(h, []byte(tc.body))
		if tc.want == "" {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s on %.40q: got %q, %v; want ErrNotFound", tc.spec, tc.body, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s on %.40q: got %q, %v; want %q", tc.spec, tc.body, got, err, tc.want)
		}
	}
}

func TestNotFoundMessage(t *testing.T) {
	t.Parallel()
	ex, _ := Parse("json:event_id|form:trigger_id")
	_, err := ex.Extract(nil, []byte(`{}`))
	if want := "extract: json:event_id|form:trigger_id: no alternative found (first: extract: json:event_id: not found)"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if s := fmt.Sprint(ex); s != "json:event_id|form:trigger_id" {
		t.Errorf("String() = %q", s)
	}
}

func TestSplitJSONArray(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		want []string // nil: error
	}{
		{`[]`, []string{}},
		{` [ ] `, []string{}},
		{`[{"sg_event_id":"a"}, {"sg_event_id":"b,]"} ,1,"x",[2,[3]],null]`,
			[]string{`{"sg_event_id":"a"}`, `{"sg_event_id":"b,]"}`, `1`, `"x"`, `[2,[3]]`, `null`}},
		{`{"a":1}`, nil},
		{`[1,`, nil},
		{``, nil},
	} {
		got, err := SplitJSONArray([]byte(tc.body))
		if tc.want == nil {
			if err == nil {
				t.Errorf("SplitJSONArray(%q): got %q, want an error", tc.body, got)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("SplitJSONArray(%q) = %q, %v; want %q", tc.body, got, err, tc.want)
			continue
		}
		for i := range got {
			if string(got[i]) != tc.want[i] {
				t.Errorf("SplitJSONArray(%q)[%d] = %q, want %q", tc.body, i, got[i], tc.want[i])
			}
		}
	}
}

// referenceJSON is what json:PATH means, spelled with encoding/json.
func referenceJSON(body []byte, path []string) (string, bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", false
	}
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		if v, ok = m[k]; !ok {
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, x != "" && unusable(x) == ""
	case json.Number:
		return string(x), unusable(string(x)) == ""
	}
	return "", false
}

func FuzzExtract(f *testing.F) {
	for _, s := range []struct{ spec, body string }{
		{"json:id", stripeBody},
		{"json:data.object.amount_paid", stripeBody},
		{"json:id", `{"id":"first","id":"last"}`},
		{"json:a.b", `{"a":{"b":1},"a":{"c":2}}`},
		{"json:id", `{"i\u0064":"\ud800x\u00e9"}`},
		{"json:\xff", "{\"\xff\":\"inv\xffalid\"}"},
		{"json:event-data.id", `{"event-data":{"id":"CPg","event":"delivered"}}`},
		{"form:a b|json:x", "a+b=%41&x=1"},
		{"header:X-Id+json:id", `{"id":7}`},
		{"json:RecordType+json:MessageID", `{"RecordType":"Bounce","MessageID":"m-1"}`},
	} {
		f.Add(s.spec, []byte(s.body))
	}
	h := http.Header{"X-Id": {"hid"}}
	f.Fuzz(func(t *testing.T, spec string, body []byte) {
		sp, err := parse(spec)
		if err != nil {
			return
		}
		got, err := sp.Extract(h, body)
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatalf("error does not wrap ErrNotFound: %v", err)
		}
		if err == nil && unusable(got) != "" {
			t.Fatalf("returned an unusable value %q", got)
		}
		// A lone json term must agree with encoding/json.
		if len(sp.alts) != 1 || len(sp.alts[0]) != 1 || sp.alts[0][0].kind != kindJSON || !json.Valid(body) {
			return
		}
		// Values are compared only when both sides found one: a "not found"
		// carries no value, whatever either side left in it.
		want, ok := referenceJSON(body, sp.alts[0][0].path)
		if ok != (err == nil) || (ok && got != want) {
			t.Fatalf("%s on %q: got %q, %v; reference %q, %v", spec, body, got, err, want, ok)
		}
	})
}

func FuzzSplitJSONArray(f *testing.F) {
	for _, s := range []string{`[]`, `[{"a":"]"},1,[2]]`, `{}`, `[1,`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := SplitJSONArray(body)
		var ref []json.RawMessage
		refErr := json.Unmarshal(body, &ref)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("SplitJSONArray(%q): err %v, reference err %v", body, err, refErr)
		}
		if err != nil {
			return
		}
		if len(got) != len(ref) {
			t.Fatalf("SplitJSONArray(%q): %d elements, reference %d", body, len(got), len(ref))
		}
		for i := range got {
			if !bytes.Equal(got[i], trimSpace(ref[i])) {
				t.Fatalf("element %d: %q, reference %q", i, got[i], ref[i])
			}
		}
	})
}

// stripeLike is a ~1 KiB Stripe event with the id first and the type last.
var stripeLike = func() []byte {
	b := []byte(`{"id":"evt_1NvXyZ2eZvKYlo2C","object":"event","api_version":"2024-06-20","created":1700000000,` +
		`"data":{"object":{"id":"in_1NvXyZ2eZvKYlo2C","object":"invoice","account_country":"US","amount_due":2000,` +
		`"amount_paid":2000,"currency":"usd","customer":"cus_OkX","lines":{"object":"list","data":[{"id":"il_1","amount":2000,` +
		`"description":"1 × Pro (at $20.00 / month)","period":{"end":1702592000,"start":1700000000}}],"has_more":false},` +
		`"metadata":{"order":"A-1001","note":"escaped \"quote\" and \u00e9"},"status":"paid"}},` +
		`"livemode":false,"pending_webhooks":1,"request":{"id":"req_abc","idempotency_key":"5f2c"},`)
	pad := 1024 - len(b) - len(`"pad":"","type":"invoice.paid"}`)
	return append(b, []byte(`"pad":"`+strings.Repeat("x", max(pad, 0))+`","type":"invoice.paid"}`)...)
}()

func BenchmarkExtract(b *testing.B) {
	for _, spec := range []string{"json:id", "json:type", "json:data.object.id"} {
		b.Run(spec, func(b *testing.B) {
			ex, err := Parse(spec)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := ex.Extract(nil, stripeLike); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(stripeLike)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = ex.Extract(nil, stripeLike)
			}
		})
	}
}

// BenchmarkExtractReference is the map-decoding approach Extract avoids.
func BenchmarkExtractReference(b *testing.B) {
	b.SetBytes(int64(len(stripeLike)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = referenceJSON(stripeLike, []string{"id"})
	}
}

// FuzzMembers: on a valid JSON object, Members finds the value encoding/json
// decodes for each key (the last duplicate), and no value for other keys.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"c":[1,"]"]},"a":"x\"y","\u0062c":null}`), "a", "bc")
	f.Add(stripeLike, "data", "type")
	f.Add([]byte(` { "k\\"" : "v" } `), `k"`, "absent")
	f.Add([]byte(`null`), "a", "")
	f.Add([]byte(`[{"a":1}]`), "a", "")
	f.Fuzz(func(t *testing.T, doc []byte, k1, k2 string) {
		var ref map[string]json.RawMessage
		if !json.Valid(doc) {
			return
		}
		// (null decodes into a map without an error, as no map)
		isObj := json.Unmarshal(doc, &ref) == nil && ref != nil
		keys := []string{k1, k2}
		for k := range ref {
			keys = append(keys, k)
		}
		vals := make([][]byte, len(keys))
		if Members(doc, keys, vals) != isObj {
			t.Fatalf("Members(%q) reports object %v, encoding/json %v", doc, !isObj, isObj)
		}
		if !isObj {
			return
		}
		for i, k := range keys {
			want, ok := ref[k]
			if (vals[i] != nil) != ok || ok && !bytes.Equal(vals[i], trimSpace(want)) {
				t.Fatalf("Members(%q)[%q] = %q, encoding/json %q (%v)", doc, k, vals[i], want, ok)
			}
		}
	})
}
