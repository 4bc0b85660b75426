package signature

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// The fuzz targets feed arbitrary header values and bodies to each scheme's
// parser through Verify. Properties: no panic, and every error wraps one of
// the sentinels (so the receiver can always label it). Seeds are the vectors.

// fuzzSetup returns the vectors of the given providers and a verifier built
// from the first one (with its clock), for seeding and checking.
func fuzzSetup(f *testing.F, providers ...string) ([]vector, Verifier, time.Time) {
	f.Helper()
	var out []vector
	for _, v := range MustLoadVectors(f) {
		for _, p := range providers {
			if v.Provider == p {
				out = append(out, v)
			}
		}
	}
	if len(out) == 0 {
		f.Fatalf("no vectors for %v", providers)
	}
	ver, err := New(out[0].params(f))
	if err != nil {
		f.Fatal(err)
	}
	return out, ver, out[0].request().Now
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && Reason(err) == "invalid" {
		t.Fatalf("error wraps no sentinel: %v", err)
	}
}

func FuzzStripe(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "stripe")
	for _, v := range vs {
		f.Add(v.Headers["Stripe-Signature"], []byte(v.Body))
	}
	f.Add("t=,v1=,v0=,=,,t", []byte{})
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		if ts, v1, err := parseStripe(sig); err == nil && (ts == "" || len(v1) == 0 || len(v1) > maxSignatures) {
			t.Fatalf("parseStripe(%q) = %q, %d sigs", sig, ts, len(v1))
		}
		checkErr(t, ver.Verify(&Request{Header: http.Header{"Stripe-Signature": {sig}}, Body: body, Now: now}))
	})
}

func FuzzStandard(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "standard-webhooks", "svix")
	for _, v := range vs {
		r := v.request()
		f.Add(r.Header.Get("webhook-id")+r.Header.Get("svix-id"),
			r.Header.Get("webhook-timestamp")+r.Header.Get("svix-timestamp"),
			r.Header.Get("webhook-signature")+r.Header.Get("svix-signature"), []byte(v.Body))
	}
	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte) {
		h := http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, Now: now}))
		h = http.Header{"Svix-Id": {id}, "Svix-Timestamp": {ts}, "Svix-Signature": {sig}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, Now: now}))
	})
}

func FuzzPaddle(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "paddle")
	for _, v := range vs {
		f.Add(v.Headers["Paddle-Signature"], []byte(v.Body))
	}
	f.Add("ts=;h1=;;=", []byte{})
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		if ts, h1, err := parsePaddle(sig); err == nil && (ts == "" || len(h1) == 0 || len(h1) > maxSignatures) {
			t.Fatalf("parsePaddle(%q) = %q, %d sigs", sig, ts, len(h1))
		}
		checkErr(t, ver.Verify(&Request{Header: http.Header{"Paddle-Signature": {sig}}, Body: body, Now: now}))
	})
}

func FuzzSlack(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "slack")
	for _, v := range vs {
		f.Add(v.Headers["X-Slack-Request-Timestamp"], v.Headers["X-Slack-Signature"], []byte(v.Body))
	}
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		h := http.Header{"X-Slack-Request-Timestamp": {ts}, "X-Slack-Signature": {sig}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, Now: now}))
	})
}

func FuzzHMAC(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "generic-ts-body")
	for _, v := range vs {
		f.Add(v.Headers["X-Webhook-Timestamp"], v.Headers["X-Webhook-Signature"], []byte(v.Body))
	}
	f.Add("1", "sha256=,,  ,sha256", []byte{})
	b64, err := New(Params{Scheme: "hmac", Secrets: []string{"k"}, HMAC: HMACParams{
		Header: "X-Webhook-Signature", Encoding: "base64", Algorithm: "sha512", IDHeader: "X-Id", Signed: "{id}{body}"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		h := http.Header{"X-Webhook-Timestamp": {ts}, "X-Webhook-Signature": {sig}, "X-Id": {ts}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, Now: now}))
		checkErr(t, b64.Verify(&Request{Header: h, Body: body, Now: now}))
	})
}

func FuzzGitHub(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "github")
	for _, v := range vs {
		f.Add(v.Headers["X-Hub-Signature-256"], []byte(v.Body))
	}
	shopify, err := New(Params{Scheme: "shopify", Secrets: []string{"k"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{"X-Hub-Signature-256": {sig}, "X-Shopify-Hmac-Sha256": {sig}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, Now: now}))
		checkErr(t, shopify.Verify(&Request{Header: h, Body: body, Now: now}))
	})
}

func FuzzTwilio(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "twilio")
	for _, v := range vs {
		f.Add(v.Headers["X-Twilio-Signature"], v.URL, []byte(v.Body))
		f.Add(v.Headers["X-Twilio-Signature"], "/p?bodySHA256=00", []byte(v.Body))
	}
	f.Add("", "http://[::1]:80/x?%zz", []byte("a&&=&%"))
	f.Fuzz(func(t *testing.T, sig, u string, body []byte) {
		h := http.Header{"X-Twilio-Signature": {sig}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, URL: u, Now: now}))
		if n := len(twilioURLVariants(u)); n < 1 || n > 2 {
			t.Fatalf("twilioURLVariants(%q): %d variants", u, n)
		}
	})
}

func FuzzSendGrid(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "sendgrid")
	for _, v := range vs {
		f.Add(v.Headers[sendgridSigHeader], v.Headers[sendgridTSHeader], []byte(v.Body))
	}
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		h := http.Header{sendgridSigHeader: {sig}, sendgridTSHeader: {ts}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, Now: now}))
	})
}

func FuzzMailgunBody(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "mailgun")
	for _, v := range vs {
		f.Add([]byte(v.Body))
	}
	f.Add([]byte("timestamp=1700000000&token=t&signature=00"))
	f.Add([]byte(`{"signature":{"timestamp":1700000000,"token":"t","signature":"00"}}`))
	f.Add([]byte(`{"signature":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if s, err := parseMailgun(body); err == nil && (s.Token == "" || s.Signature == "" || s.Timestamp == "") {
			t.Fatalf("parseMailgun accepted an incomplete block %+v", s)
		}
		checkErr(t, ver.Verify(&Request{Header: http.Header{}, Body: body, Now: now}))
	})
}

// The messaging schemes (issue 47). Each target feeds its signature and
// timestamp headers and the body; the seeds are the scheme's vectors.

// fuzzHeaders seeds f with the named headers and body of each vector.
func fuzzHeaders(f *testing.F, vs []vector, names ...string) {
	f.Helper()
	for _, v := range vs {
		r := v.request()
		args := []any{}
		for _, n := range names {
			args = append(args, r.Header.Get(n))
		}
		f.Add(append(args, []byte(v.Body))...)
	}
}

func FuzzBodyMAC(f *testing.F) {
	// meta, line, x, viber and intercom share one parser (bodyMAC).
	vs, _, now := fuzzSetup(f, "meta", "line", "x", "viber", "intercom")
	fuzzHeaders(f, vs, "X-Hub-Signature-256", "X-Line-Signature")
	var vers []Verifier
	for _, s := range []string{"meta", "line", "x", "viber", "intercom"} {
		v, err := New(Params{Scheme: s, Secrets: []string{"k"}})
		if err != nil {
			f.Fatal(err)
		}
		vers = append(vers, v)
	}
	f.Fuzz(func(t *testing.T, sig, sig2 string, body []byte) {
		h := http.Header{"X-Hub-Signature-256": {sig}, "X-Line-Signature": {sig2}, "X-Twitter-Webhooks-Signature": {sig},
			"X-Viber-Content-Signature": {sig2}, "X-Hub-Signature": {sig2}}
		for _, v := range vers {
			checkErr(t, v.Verify(&Request{Header: h, Body: body, Now: now}))
		}
	})
}

func FuzzTelegram(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "telegram")
	fuzzHeaders(f, vs, telegramHeader)
	f.Fuzz(func(t *testing.T, tok string, body []byte) {
		err := ver.Verify(&Request{Header: http.Header{telegramHeader: {tok}}, Body: body, Now: now})
		checkErr(t, err)
		if err == nil && tok != "tg_Secret-Token_0123456789abcdef" {
			t.Fatalf("token %q accepted", tok)
		}
	})
}

func FuzzEd25519(f *testing.F) {
	vs, discord, now := fuzzSetup(f, "discord", "telnyx")
	fuzzHeaders(f, vs, "X-Signature-Ed25519", "X-Signature-Timestamp")
	fuzzHeaders(f, vs, "Telnyx-Signature-Ed25519", "Telnyx-Timestamp")
	var telnyx Verifier
	for _, v := range vs {
		if v.Provider == "telnyx" {
			var err error
			if telnyx, err = New(v.params(f)); err != nil {
				f.Fatal(err)
			}
			break
		}
	}
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		h := http.Header{"X-Signature-Ed25519": {sig}, "X-Signature-Timestamp": {ts},
			"Telnyx-Signature-Ed25519": {sig}, "Telnyx-Timestamp": {ts}}
		checkErr(t, discord.Verify(&Request{Header: h, Body: body, Now: now}))
		checkErr(t, telnyx.Verify(&Request{Header: h, Body: body, Now: now}))
	})
}

func FuzzZoom(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "zoom")
	fuzzHeaders(f, vs, zoomTSHeader, zoomSigHeader)
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		h := http.Header{zoomTSHeader: {ts}, zoomSigHeader: {sig}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, Now: now}))
	})
}

func FuzzVonage(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "vonage")
	fuzzHeaders(f, vs, "Authorization")
	f.Add("Bearer ..", []byte{})
	f.Add("Bearer e30.e30.", []byte("{}"))
	f.Fuzz(func(t *testing.T, auth string, body []byte) {
		checkErr(t, ver.Verify(&Request{Header: http.Header{"Authorization": {auth}}, Body: body, Now: now}))
	})
}

func FuzzZendesk(f *testing.F) {
	vs, ver, now := fuzzSetup(f, "zendesk")
	fuzzHeaders(f, vs, zendeskSigHeader, zendeskTSHeader)
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte) {
		h := http.Header{zendeskSigHeader: {sig}, zendeskTSHeader: {ts}}
		checkErr(t, ver.Verify(&Request{Header: h, Body: body, Now: now}))
	})
}

func FuzzGraph(f *testing.F) {
	ver, err := New(Params{Scheme: "graph", Secrets: []string{"SecretClientState"}})
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range MustLoadVectors(f) {
		if v.Provider == "msgraph" {
			f.Add([]byte(v.Body))
		}
	}
	now := t0
	f.Add([]byte(`{"value":[{"clientState":"SecretClientState"},{"ClientState":"SecretClientState"}]}`))
	f.Add([]byte(`{"value":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := ver.Verify(&Request{Header: http.Header{}, Body: body, Now: now})
		checkErr(t, err)
		if err == nil && !strings.Contains(string(body), "SecretClientState") {
			t.Fatalf("accepted without the client state: %q", body)
		}
	})
}
