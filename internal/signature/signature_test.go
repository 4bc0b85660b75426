package signature

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Unix(1700000000, 0)

const (
	stripeBody = `{"id":"evt_1","type":"invoice.paid"}`
	formBody   = "MessageSid=SM1&MessageStatus=delivered&To=%2B15551234567"
	twilioURL  = "https://hooks.example.com/hooks/twilio?src=a"
	metaBody   = `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messages":[{"id":"wamid.1","type":"text"}]}}]}]}`
)

// testKey is a throwaway SendGrid-style key pair: only the public half is
// ever configured; the private half signs test requests.
type testKey struct {
	priv *ecdsa.PrivateKey
	pub  string // base64 DER SPKI
}

func mustTestKey(tb testing.TB) testKey {
	tb.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	return testKey{priv: priv, pub: base64.StdEncoding.EncodeToString(der)}
}

// signSendGrid signs as SendGrid does, which Sign cannot (public key only).
func (k testKey) signSendGrid(tb testing.TB, body []byte, now time.Time) http.Header {
	tb.Helper()
	ts := strconv.FormatInt(now.Unix(), 10)
	d := sha256.Sum256(append([]byte(ts), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, k.priv, d[:])
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{}
	h.Set(sendgridSigHeader, base64.StdEncoding.EncodeToString(sig))
	h.Set(sendgridTSHeader, ts)
	return h
}

// schemeCase is a scheme with the secrets, body and settings it needs.
type schemeCase struct {
	p    Params
	body string
	ts   bool // signs a timestamp
	// keyOf makes a secret of the scheme's format from a test secret (nil:
	// used as it is).
	keyOf func(string) string
}

func (c schemeCase) key(s string) string {
	if c.keyOf == nil {
		return s
	}
	return c.keyOf(s)
}

// telegramKey keeps the characters a Telegram secret_token may hold.
var telegramKey = strings.NewReplacer("=", "", "+", "-", "/", "_").Replace

// schemeCases covers every registered scheme; sendgrid keys are generated.
func schemeCases(tb testing.TB, secrets func(i int) string) map[string]schemeCase {
	tb.Helper()
	sec := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = secrets(i)
		}
		return out
	}
	return map[string]schemeCase{
		"stripe":   {p: Params{Scheme: "stripe", Secrets: sec(1)}, body: stripeBody, ts: true},
		"github":   {p: Params{Scheme: "github", Secrets: sec(1)}, body: stripeBody},
		"shopify":  {p: Params{Scheme: "shopify", Secrets: sec(1)}, body: stripeBody},
		"slack":    {p: Params{Scheme: "slack", Secrets: sec(1)}, body: stripeBody, ts: true},
		"standard": {p: Params{Scheme: "standard", Secrets: sec(1)}, body: stripeBody, ts: true},
		"paddle":   {p: Params{Scheme: "paddle", Secrets: sec(1)}, body: stripeBody, ts: true},
		"twilio":   {p: Params{Scheme: "twilio", Secrets: sec(1), PublicURL: twilioURL}, body: formBody},
		"mailgun":  {p: Params{Scheme: "mailgun", Secrets: sec(1)}, body: `{"event-data":{"id":"e1","event":"delivered"}}`, ts: true},
		"postmark": {p: Params{Scheme: "postmark", Secrets: []string{"user:" + secrets(0)}}, body: `{"RecordType":"Delivery","MessageID":"m1"}`,
			keyOf: func(s string) string { return "user:" + s }},
		"hmac": {p: Params{Scheme: "hmac", Secrets: sec(1), HMAC: genericHMAC}, body: stripeBody, ts: true},
		"none": {p: Params{Scheme: "none"}, body: stripeBody},
		// The messaging platforms (issue 47).
		"meta":     {p: Params{Scheme: "meta", Secrets: sec(1)}, body: metaBody},
		"telegram": {p: Params{Scheme: "telegram", Secrets: []string{telegramKey(secrets(0))}}, body: `{"update_id":1,"message":{"text":"hi"}}`, keyOf: telegramKey},
		"line":     {p: Params{Scheme: "line", Secrets: sec(1)}, body: `{"destination":"U1","events":[{"type":"message","webhookEventId":"01H"}]}`},
		"x":        {p: Params{Scheme: "x", Secrets: sec(1)}, body: `{"for_user_id":"1","tweet_create_events":[{"id_str":"2"}]}`},
		"zoom":     {p: Params{Scheme: "zoom", Secrets: sec(1)}, body: `{"event":"meeting.started","event_ts":1,"payload":{"object":{"uuid":"u"}}}`, ts: true},
		"viber":    {p: Params{Scheme: "viber", Secrets: sec(1)}, body: `{"event":"message","message_token":5}`},
		"vonage":   {p: Params{Scheme: "vonage", Secrets: sec(1)}, body: `{"message_uuid":"m1","message_type":"text"}`, ts: true},
		"intercom": {p: Params{Scheme: "intercom", Secrets: sec(1)}, body: `{"type":"notification_event","id":"notif_1","topic":"ping"}`},
		"zendesk":  {p: Params{Scheme: "zendesk", Secrets: sec(1)}, body: `{"id":"z1","type":"zen:event-type:user.created"}`},
		"graph":    {p: Params{Scheme: "graph", Secrets: sec(1)}, body: `{"value":[{"id":"n1","changeType":"created"},{"changeType":"updated"}]}`},
	}
}

func secretN(i int) string { return fmt.Sprintf("whsec_c2VjcmV0LW51bWJlci0%dLXBhZGRpbmc=", i) }

// msgSeq makes each signed request's id (mailgun: one-time token) unique.
var msgSeq atomic.Int64

// signed returns a request for c signed at ts with p's first secret.
func signed(tb testing.TB, c schemeCase, p Params, ts time.Time) *Request {
	tb.Helper()
	id := "msg_" + strconv.FormatInt(msgSeq.Add(1), 10)
	h, body, err := SignBody(p, []byte(c.body), ts, id)
	if err != nil {
		tb.Fatalf("%s: SignBody: %v", p.Scheme, err)
	}
	return &Request{Header: h, Body: body, Now: t0}
}

func TestSchemesAllCovered(t *testing.T) {
	t.Parallel()
	cases := schemeCases(t, secretN)
	for _, name := range Schemes() {
		// sendgrid, discord and telnyx verify with a public key: Sign
		// cannot sign for them (TestSignRoundTrip, TestEd25519Schemes).
		if _, ok := cases[name]; !ok && name != "sendgrid" && name != "discord" && name != "telnyx" {
			t.Errorf("scheme %q has no schemeCase: add one", name)
		}
		p, ok := PresetFor(name)
		// Telegram's type is the name of a member, which no spec reads.
		if !ok || p.EventID == "" || p.EventType == "" && name != "telegram" {
			t.Errorf("PresetFor(%q) = %+v, %v; want event id and type specs", name, p, ok)
		}
	}
	if _, ok := PresetFor("nope"); ok {
		t.Error("PresetFor(nope) found a preset")
	}
	if p, _ := PresetFor("sendgrid"); !p.Batch {
		t.Error("sendgrid preset: Batch = false, want true")
	}
}

func TestSignRoundTrip(t *testing.T) {
	t.Parallel()
	for name, c := range schemeCases(t, secretN) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v, err := New(c.p)
			if err != nil {
				t.Fatal(err)
			}
			r := signed(t, c, c.p, t0)
			if err := v.Verify(r); err != nil {
				t.Fatalf("Verify(Sign(...)): %v", err)
			}
			if _, body := Covered(c.p); !body || name == "graph" {
				return // nothing covers the body (graph: a secret inside it)
			}
			r.Body = append([]byte(nil), r.Body...)
			r.Body[len(r.Body)-2] ^= 1
			if err := v.Verify(r); !errors.Is(err, ErrMismatch) {
				t.Errorf("tampered body: got %v, want ErrMismatch", err)
			}
		})
	}
	t.Run("sendgrid", func(t *testing.T) {
		t.Parallel()
		k := mustTestKey(t)
		p := Params{Scheme: "sendgrid", Secrets: []string{k.pub}}
		if _, err := Sign(p, []byte("[]"), t0, "x"); err == nil || !strings.Contains(err.Error(), "public key") {
			t.Fatalf("Sign(sendgrid): got %v, want an error about the public key", err)
		}
		v, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`[{"sg_event_id":"a","event":"delivered"}]`)
		if err := v.Verify(&Request{Header: k.signSendGrid(t, body, t0), Body: body, Now: t0}); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
	t.Run("mailgun needs SignBody", func(t *testing.T) {
		t.Parallel()
		_, err := Sign(Params{Scheme: "mailgun", Secrets: []string{"k"}}, []byte(`{}`), t0, "tok")
		if err == nil || !strings.Contains(err.Error(), "SignBody") {
			t.Fatalf("got %v, want an error pointing at SignBody", err)
		}
	})
}

func TestSignStandardOfficialVector(t *testing.T) {
	t.Parallel()
	got, err := SignStandard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	// A non-whsec secret is used as raw bytes, and verifies the same way.
	sig, err := SignStandard("plain secret", "m", t0, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := New(Params{Scheme: "standard", Secrets: []string{"plain secret"}})
	h := http.Header{"Webhook-Id": {"m"}, "Webhook-Timestamp": {"1700000000"}, "Webhook-Signature": {sig}}
	if err := v.Verify(&Request{Header: h, Body: []byte("b"), Now: t0}); err != nil {
		t.Fatalf("verify raw-key signature: %v", err)
	}
	if _, err := SignStandard("whsec_!!!", "m", t0, nil); err == nil || strings.Contains(err.Error(), "!!!") {
		t.Fatalf("bad whsec: got %v, want an error without the secret", err)
	}
	if _, err := SignStandard("whsec_AAAA", "", t0, nil); err == nil {
		t.Fatal("empty message id: got nil error")
	}
}

// Either of two configured secrets passes; a third does not.
func TestRotation(t *testing.T) {
	t.Parallel()
	for name, c := range schemeCases(t, secretN) {
		if name == "none" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p2 := c.p
			p2.Secrets = []string{c.key(secretN(0)), c.key(secretN(1))}
			v, err := New(p2)
			if err != nil {
				t.Fatal(err)
			}
			for i, wantOK := range []bool{true, true, false} {
				one := c.p
				one.Secrets = []string{c.key(secretN(i))}
				err := v.Verify(signed(t, c, one, t0))
				if wantOK && err != nil {
					t.Errorf("signed with secret %d: got %v, want ok", i, err)
				}
				if !wantOK && !errors.Is(err, ErrMismatch) {
					t.Errorf("signed with secret %d: got %v, want ErrMismatch", i, err)
				}
			}
		})
	}
	t.Run("sendgrid", func(t *testing.T) {
		t.Parallel()
		a, b, c := mustTestKey(t), mustTestKey(t), mustTestKey(t)
		v, err := New(Params{Scheme: "sendgrid", Secrets: []string{a.pub, b.pub}})
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`[]`)
		for i, k := range []testKey{a, b, c} {
			err := v.Verify(&Request{Header: k.signSendGrid(t, body, t0), Body: body, Now: t0})
			if (i < 2) != (err == nil) {
				t.Errorf("key %d: got %v", i, err)
			}
		}
	})
}

// A 5-minute-old request passes with a 10m tolerance and fails with 1m; one
// an hour in the future fails.
func TestTolerance(t *testing.T) {
	t.Parallel()
	for name, c := range schemeCases(t, secretN) {
		if !c.ts {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				age, tol time.Duration
				want     error
			}{
				{5 * time.Minute, 10 * time.Minute, nil},
				{5 * time.Minute, time.Minute, ErrStale},
				{-time.Hour, 10 * time.Minute, ErrStale},
				{-4 * time.Minute, 5 * time.Minute, nil},
			} {
				p := c.p
				p.Tolerance = tc.tol
				v, err := New(p)
				if err != nil {
					t.Fatal(err)
				}
				err = v.Verify(signed(t, c, c.p, t0.Add(-tc.age)))
				if !errors.Is(err, tc.want) && (err != nil || tc.want != nil) {
					t.Errorf("age %s, tolerance %s: got %v, want %v", tc.age, tc.tol, err, tc.want)
				}
			}
		})
	}
	t.Run("sendgrid", func(t *testing.T) {
		t.Parallel()
		k := mustTestKey(t)
		v, _ := New(Params{Scheme: "sendgrid", Secrets: []string{k.pub}, Tolerance: time.Minute})
		body := []byte(`[]`)
		if err := v.Verify(&Request{Header: k.signSendGrid(t, body, t0.Add(-5*time.Minute)), Body: body, Now: t0}); !errors.Is(err, ErrStale) {
			t.Errorf("got %v, want ErrStale", err)
		}
	})
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value"
	for _, tc := range []struct {
		name string
		p    Params
		want string
	}{
		{"empty scheme", Params{}, "scheme is empty"},
		{"unknown scheme", Params{Scheme: "strype", Secrets: []string{secret}}, `unknown scheme "strype"`},
		{"no secrets", Params{Scheme: "stripe"}, "at least one secret"},
		{"empty secret", Params{Scheme: "stripe", Secrets: []string{secret, ""}}, "secrets[1] is empty"},
		{"none with secret", Params{Scheme: "none", Secrets: []string{secret}}, "takes no secrets"},
		{"negative tolerance", Params{Scheme: "stripe", Secrets: []string{secret}, Tolerance: -1}, "negative"},
		{"hmac on stripe", Params{Scheme: "stripe", Secrets: []string{secret}, HMAC: HMACParams{Header: "X"}}, "only apply to scheme hmac"},
		{"bad whsec", Params{Scheme: "standard", Secrets: []string{"whsec_" + secret + "!"}}, "secrets[0]: whsec_ secret is not valid base64"},
		{"twilio without url", Params{Scheme: "twilio", Secrets: []string{secret}}, "public URL is required"},
		{"twilio relative url", Params{Scheme: "twilio", Secrets: []string{secret}, PublicURL: "/hooks/t"}, "absolute"},
		{"sendgrid not a key", Params{Scheme: "sendgrid", Secrets: []string{secret}}, "secrets[0]: public key"},
		{"postmark no colon", Params{Scheme: "postmark", Secrets: []string{secret}}, `want "user:password"`},
		{"hmac no header", Params{Scheme: "hmac", Secrets: []string{secret}}, "hmac.header is required"},
		{"hmac algorithm", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X", Algorithm: "md5"}}, `hmac.algorithm "md5"`},
		{"hmac encoding", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X", Encoding: "b32"}}, `hmac.encoding "b32"`},
		{"hmac no body", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X", Signed: "{timestamp}", TimestampHeader: "T"}}, "lacks {body}"},
		{"hmac unsigned ts", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X", Signed: "{body}", TimestampHeader: "T"}}, "lacks {timestamp}"},
		{"hmac ts without header", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X", Signed: "{timestamp}.{body}"}}, "timestamp_header is empty"},
		{"hmac id without header", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X", Signed: "{id}.{body}"}}, "id_header is empty"},
		{"hmac placeholder", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X", Signed: "{bdy}"}}, "unknown placeholder {bdy}"},
		{"hmac unclosed", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X", Signed: "{body"}}, "unclosed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q leaks the secret", err)
			}
		})
	}
}

func TestReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fail("x", ErrMissing, "d"), "missing"},
		{fail("x", ErrMalformed, "d"), "malformed"},
		{fail("x", ErrMismatch, "d"), "mismatch"},
		{fail("x", ErrStale, "d"), "stale"},
		{fmt.Errorf("wrapped: %w", fail("x", ErrReplayed, "d")), "replayed"},
		{errors.New("other"), "invalid"},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestMalformedInputs(t *testing.T) {
	t.Parallel()
	now := strconv.FormatInt(t0.Unix(), 10)
	long := strings.Repeat("v1=ab,", 20)
	for _, tc := range []struct {
		p    Params
		h    http.Header
		body string
		want error
	}{
		{Params{Scheme: "stripe", Secrets: []string{"s"}}, http.Header{}, "", ErrMissing},
		{Params{Scheme: "stripe", Secrets: []string{"s"}}, http.Header{"Stripe-Signature": {"garbage"}}, "", ErrMalformed},
		{Params{Scheme: "stripe", Secrets: []string{"s"}}, http.Header{"Stripe-Signature": {"t=" + now + "," + long}}, "", ErrMalformed},
		{Params{Scheme: "stripe", Secrets: []string{"s"}}, http.Header{"Stripe-Signature": {"t=-5,v1=" + strings.Repeat("ab", 32)}}, "", ErrMalformed},
		{Params{Scheme: "stripe", Secrets: []string{"s"}}, http.Header{"Stripe-Signature": {"t=1,t=2,v1=" + strings.Repeat("ab", 32)}}, "", ErrMalformed},
		{Params{Scheme: "stripe", Secrets: []string{"s"}}, http.Header{"Stripe-Signature": {strings.Repeat("x", maxHeaderLen+1)}}, "", ErrMalformed},
		{Params{Scheme: "standard", Secrets: []string{"whsec_AAAA"}}, http.Header{"Webhook-Signature": {"v1a,xx v2,yy"}, "Webhook-Id": {"m"}, "Webhook-Timestamp": {now}}, "", ErrMalformed},
		{Params{Scheme: "standard", Secrets: []string{"whsec_AAAA"}}, http.Header{"Webhook-Signature": {"v1,xx"}, "Webhook-Timestamp": {now}}, "", ErrMissing},
		{Params{Scheme: "paddle", Secrets: []string{"s"}}, http.Header{"Paddle-Signature": {"ts=1;h1=zz"}}, "", ErrMalformed},
		{Params{Scheme: "slack", Secrets: []string{"s"}}, http.Header{"X-Slack-Signature": {"v1=ab"}, "X-Slack-Request-Timestamp": {now}}, "", ErrMalformed},
		{Params{Scheme: "github", Secrets: []string{"s"}}, http.Header{"X-Hub-Signature-256": {"md5=ab"}}, "", ErrMalformed},
		{Params{Scheme: "twilio", Secrets: []string{"s"}, PublicURL: twilioURL}, http.Header{"X-Twilio-Signature": {"x"}}, "a=%zz", ErrMalformed},
		{Params{Scheme: "mailgun", Secrets: []string{"s"}}, http.Header{}, `{"signature":`, ErrMalformed},
		{Params{Scheme: "mailgun", Secrets: []string{"s"}}, http.Header{}, `{"event-data":{}}`, ErrMissing},
		{Params{Scheme: "postmark", Secrets: []string{"u:p"}}, http.Header{"Authorization": {"Bearer x"}}, "", ErrMalformed},
		{Params{Scheme: "postmark", Secrets: []string{"u:p"}}, http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("u:q"))}}, "", ErrMismatch},
		{Params{Scheme: "hmac", Secrets: []string{"s"}, HMAC: genericHMAC}, http.Header{"X-Webhook-Signature": {"sha1=ab"}, "X-Webhook-Timestamp": {now}}, "", ErrMalformed},
	} {
		v, err := New(tc.p)
		if err != nil {
			t.Fatal(err)
		}
		err = v.Verify(&Request{Header: tc.h, Body: []byte(tc.body), Now: t0})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s %v %q: got %v, want %v", tc.p.Scheme, tc.h, tc.body, err, tc.want)
		}
	}
}

func TestTwilio(t *testing.T) {
	t.Parallel()
	p := Params{Scheme: "twilio", Secrets: []string{"12345"}, PublicURL: "https://mycompany.com/myapp.php"}
	v, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	// Official twilio-php vector, with the URL given as a RequestURI resolved
	// against PublicURL, then with an explicit default port.
	body := []byte("CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212")
	h := http.Header{"X-Twilio-Signature": {"RSOYDt4T1cUTdK1PDd93/VVr8B8="}}
	for _, u := range []string{"/myapp.php?foo=1&bar=2", "https://mycompany.com:443/myapp.php?foo=1&bar=2"} {
		if err := v.Verify(&Request{Header: h, Body: body, URL: u}); err != nil {
			t.Errorf("URL %q: %v", u, err)
		}
	}
	if err := v.Verify(&Request{Header: h, Body: body, URL: "/myapp.php?foo=1&bar=3"}); !errors.Is(err, ErrMismatch) {
		t.Errorf("other query: got %v, want ErrMismatch", err)
	}
	// Duplicate keys: values deduplicated and sorted, as the SDKs do.
	got, _ := twilioParams([]byte("b=2&a=z&a=y&a=z&c="))
	if want := "ayazb2c"; string(got) != want {
		t.Errorf("twilioParams = %q, want %q", got, want)
	}
	for _, tc := range []struct{ in, want string }{
		{"https://h.example/p?q", "https://h.example:443/p?q"},
		{"http://h.example", "http://h.example:80"},
		{"https://h.example:8443/p", "https://h.example/p"},
	} {
		if got := twilioURLVariants(tc.in); len(got) != 2 || got[1] != tc.want {
			t.Errorf("twilioURLVariants(%q) = %q, want [_ %q]", tc.in, got, tc.want)
		}
	}
}

// TestTwilioQueryWithURL: a callback URL in the query ("cb=https://...")
// does not make the request URI absolute; it is still resolved against
// public_url. An absolute-form request URI is still taken as it is.
func TestTwilioQueryWithURL(t *testing.T) {
	t.Parallel()
	const public = "https://hooks.example.com/hooks/twilio"
	const query = "?cb=https://x.example/y"
	body := []byte("MessageSid=SM1&MessageStatus=delivered")
	// What Twilio signs is the URL it called: public_url plus the query.
	h, err := Sign(Params{Scheme: "twilio", Secrets: []string{"tok"}, PublicURL: public + query}, body, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	v, err := New(Params{Scheme: "twilio", Secrets: []string{"tok"}, PublicURL: public})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"/hooks/twilio" + query, public + query} {
		if err := v.Verify(&Request{Header: h, Body: body, URL: u}); err != nil {
			t.Errorf("URL %q: %v", u, err)
		}
	}
	// The query is still covered: another callback fails.
	if err := v.Verify(&Request{Header: h, Body: body, URL: "/hooks/twilio?cb=https://evil.example/y"}); !errors.Is(err, ErrMismatch) {
		t.Errorf("other callback: got %v, want ErrMismatch", err)
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{{"http://a/b", true}, {"HTTPS://a", true}, {"/p?x=https://a", false}, {"ftp://a", false}, {"http:/a", false}, {"", false}} {
		if got := absoluteHTTP(tc.in); got != tc.want {
			t.Errorf("absoluteHTTP(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestHMACVariants(t *testing.T) {
	t.Parallel()
	for _, hp := range []HMACParams{
		{Header: "X-Sig"},
		{Header: "X-Sig", Algorithm: "sha1", Encoding: "base64"},
		{Header: "X-Sig", Algorithm: "SHA512", Prefix: "v1="},
		{Header: "X-Sig", TimestampHeader: "X-Ts", IDHeader: "X-Id", Signed: "{id}:{timestamp}:{body}"},
	} {
		p := Params{Scheme: "hmac", Secrets: []string{"k"}, HMAC: hp}
		v, err := New(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Sign(p, []byte("body"), t0, "id-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(&Request{Header: h, Body: []byte("body"), Now: t0}); err != nil {
			t.Errorf("%+v: %v", hp, err)
		}
		if hp.IDHeader != "" {
			h.Set(hp.IDHeader, "id-2")
			if err := v.Verify(&Request{Header: h, Body: []byte("body"), Now: t0}); !errors.Is(err, ErrMismatch) {
				t.Errorf("%+v: changed id: got %v, want ErrMismatch", hp, err)
			}
		}
	}
}

// What each scheme's signature covers decides the body-replay check and
// check's warning about type filters on unsigned headers.
func TestCovered(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p      Params
		header string
		want   bool
	}{
		{Params{Scheme: "github"}, "X-GitHub-Delivery", false},
		{Params{Scheme: "github"}, "X-GitHub-Event", false},
		{Params{Scheme: "shopify"}, "X-Shopify-Webhook-Id", false},
		{Params{Scheme: "twilio"}, "I-Twilio-Idempotency-Token", false},
		{Params{Scheme: "standard"}, "webhook-id", true},
		{Params{Scheme: "standard"}, "Svix-Id", true},
		{Params{Scheme: "hmac", HMAC: HMACParams{IDHeader: "X-Id", Signed: "{id}.{body}"}}, "x-id", true},
		{Params{Scheme: "hmac", HMAC: HMACParams{IDHeader: "X-Id"}}, "X-Id", false},
		{Params{Scheme: "hmac", HMAC: HMACParams{TimestampHeader: "X-Ts"}}, "X-Ts", true},
		{Params{Scheme: "discord"}, "x-signature-timestamp", true},
		{Params{Scheme: "telnyx"}, "telnyx-timestamp", true},
		{Params{Scheme: "zoom"}, "x-zm-request-timestamp", true},
		{Params{Scheme: "zendesk"}, "X-Zendesk-Webhook-Signature-Timestamp", true},
		{Params{Scheme: "zoom"}, "x-zm-trackingid", false},
		{Params{Scheme: "telegram"}, telegramHeader, false},
	} {
		if got := HeaderCovered(c.p, c.header); got != c.want {
			t.Errorf("%s %+v covers %s: got %v, want %v", c.p.Scheme, c.p.HMAC, c.header, got, c.want)
		}
	}
	for scheme, want := range map[string]bool{"github": true, "stripe": true, "mailgun": false, "postmark": false, "none": false,
		"meta": true, "line": true, "x": true, "viber": true, "intercom": true, "vonage": true, "discord": true, "telnyx": true,
		"zoom": true, "zendesk": true, "telegram": false, "graph": false} {
		if _, body := Covered(Params{Scheme: scheme}); body != want {
			t.Errorf("%s covers the body: got %v, want %v", scheme, body, want)
		}
	}
}

// A Svix-signed request may not name itself with an unsigned webhook-id.
func TestStandardRefusesUnsignedWebhookIDBesideSvix(t *testing.T) {
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
	svix := http.Header{}
	for _, k := range []string{"id", "timestamp", "signature"} {
		svix.Set("svix-"+k, h.Get("webhook-"+k))
	}
	if err := v.Verify(&Request{Header: svix, Body: []byte(`{}`), Now: t0}); err != nil {
		t.Fatalf("svix headers: %v", err)
	}
	svix.Set("webhook-id", "msg_fresh")
	if err := v.Verify(&Request{Header: svix, Body: []byte(`{}`), Now: t0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("svix-signed with another webhook-id: got %v, want ErrMalformed", err)
	}
}

func ExampleNew() {
	v, err := New(Params{Scheme: "github", Secrets: []string{"It's a Secret to Everybody"}})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	err = v.Verify(&Request{Header: h, Body: []byte("Hello, World!")})
	fmt.Printf("%v %q\n", err, Reason(err))

	err = v.Verify(&Request{Header: h, Body: []byte("Hello, World?")})
	fmt.Printf("%v %q\n", err, Reason(err))
	// Output:
	// <nil> ""
	// signature: github: mismatch: X-Hub-Signature-256 matches no secret "mismatch"
}
