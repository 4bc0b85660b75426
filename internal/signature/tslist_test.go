package signature

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestTimestampListStrictness: Stripe skips an element it cannot read (as
// stripe-go does) and accepts the header on another valid v1; Paddle refuses
// the whole header (as its SDK does).
func TestTimestampListStrictness(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1"}`)
	for _, tc := range []struct {
		scheme, header string
		garble         func(valid string) string
		want           error
	}{
		{"stripe", "Stripe-Signature", func(v string) string { return strings.Replace(v, ",", ",v1=zz,junk,", 1) }, nil},
		{"paddle", "Paddle-Signature", func(v string) string { return strings.Replace(v, ";", ";h1=zz;", 1) }, ErrMalformed},
		{"paddle", "Paddle-Signature", func(v string) string { return strings.Replace(v, ";", ";junk;", 1) }, ErrMalformed},
	} {
		p := Params{Scheme: tc.scheme, Secrets: []string{"whsec_s3cret"}}
		h, err := Sign(p, body, t0, "")
		if err != nil {
			t.Fatal(err)
		}
		v, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(&Request{Header: h, Body: body, Now: t0}); err != nil {
			t.Fatalf("%s: own signature refused: %v", tc.scheme, err)
		}
		garbled := tc.garble(h.Get(tc.header))
		err = v.Verify(&Request{Header: http.Header{tc.header: {garbled}}, Body: body, Now: t0})
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s %q: got %v, want %v", tc.scheme, garbled, err, tc.want)
		}
	}
}
