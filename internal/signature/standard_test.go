package signature

import (
	"errors"
	"net/http"
	"testing"
)

// The mirror of TestStandardRefusesUnsignedWebhookIDBesideSvix: with
// webhook-* signatures only webhook-id and webhook-timestamp are signed, so
// a svix-id or svix-timestamp beside them must repeat them (Svix sends both
// families alike) or the request is refused: event_id
// "header:svix-id|header:webhook-id" would otherwise name a replay as a
// new event. A single family, or both with the same values, verify.
func TestStandardRefusesUnsignedSvixBesideWebhook(t *testing.T) {
	t.Parallel()
	p := Params{Scheme: "standard", Secrets: []string{"whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	v, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	h, err := Sign(p, []byte(`{}`), t0, "msg_1")
	if err != nil {
		t.Fatal(err)
	}
	verify := func(edit func(http.Header)) error {
		c := h.Clone()
		edit(c)
		return v.Verify(&Request{Header: c, Body: []byte(`{}`), Now: t0})
	}
	both := func(c http.Header) {
		for _, k := range []string{"id", "timestamp"} {
			c.Set("svix-"+k, c.Get("webhook-"+k))
		}
	}
	if err := verify(func(http.Header) {}); err != nil {
		t.Fatalf("webhook-* alone: %v", err)
	}
	if err := verify(both); err != nil {
		t.Fatalf("both families with the same values: %v", err)
	}
	for name, edit := range map[string]func(http.Header){
		"fresh svix-id":           func(c http.Header) { c.Set("svix-id", "msg_fresh") },
		"fresh svix-timestamp":    func(c http.Header) { both(c); c.Set("svix-timestamp", "1") },
		"svix-id twice":           func(c http.Header) { both(c); c.Add("svix-id", "msg_fresh") },
		"empty svix-id":           func(c http.Header) { c["Svix-Id"] = []string{""} },
		"svix-signed, webhook-id": nil, // TestStandardRefusesUnsignedWebhookIDBesideSvix
	} {
		if edit == nil {
			continue
		}
		if err := verify(edit); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
	// Both families signed, the webhook one preferred: the svix one must
	// still repeat its values.
	if err := verify(func(c http.Header) {
		c.Set("svix-id", "msg_2")
		c.Set("svix-timestamp", c.Get("webhook-timestamp"))
		c.Set("svix-signature", c.Get("webhook-signature"))
	}); !errors.Is(err, ErrMalformed) {
		t.Errorf("svix family with another id beside the signed webhook family: got %v", err)
	}
}
