package signature

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerify measures one successful verification per scheme of a
// 1 KiB body signed with one secret: the work the receiver does per request
// before anything is parsed or stored. Run with -benchmem.
func BenchmarkVerify(b *testing.B) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Unix(1700000000, 0)
	jsonBody := benchJSONBody(1024)
	formBody := benchFormBody(1024)
	cases := []struct {
		scheme string
		p      Params
		body   []byte
	}{
		{"github", Params{Scheme: "github", Secrets: []string{secret}}, jsonBody},
		{"hmac", Params{Scheme: "hmac", Secrets: []string{secret}, HMAC: HMACParams{Header: "X-Signature",
			TimestampHeader: "X-Timestamp", Prefix: "sha256="}}, jsonBody},
		{"mailgun", Params{Scheme: "mailgun", Secrets: []string{secret}}, jsonBody},
		{"none", Params{Scheme: "none"}, jsonBody},
		{"paddle", Params{Scheme: "paddle", Secrets: []string{secret}}, jsonBody},
		{"postmark", Params{Scheme: "postmark", Secrets: []string{"user:" + secret}}, jsonBody},
		{"shopify", Params{Scheme: "shopify", Secrets: []string{secret}}, jsonBody},
		{"slack", Params{Scheme: "slack", Secrets: []string{secret}}, jsonBody},
		{"standard", Params{Scheme: "standard", Secrets: []string{secret}}, jsonBody},
		{"stripe", Params{Scheme: "stripe", Secrets: []string{secret}}, jsonBody},
		{"twilio", Params{Scheme: "twilio", Secrets: []string{secret}, PublicURL: "https://hooks.example.com/hooks/twilio"}, formBody},
		// The messaging platforms (issue 47); graph's body gets its clientState from SignBody.
		{"meta", Params{Scheme: "meta", Secrets: []string{secret}}, jsonBody},
		{"telegram", Params{Scheme: "telegram", Secrets: []string{secret}}, jsonBody},
		{"line", Params{Scheme: "line", Secrets: []string{secret}}, jsonBody},
		{"x", Params{Scheme: "x", Secrets: []string{secret}}, jsonBody},
		{"zoom", Params{Scheme: "zoom", Secrets: []string{secret}}, jsonBody},
		{"vonage", Params{Scheme: "vonage", Secrets: []string{secret}}, jsonBody},
		{"viber", Params{Scheme: "viber", Secrets: []string{secret}}, jsonBody},
		{"intercom", Params{Scheme: "intercom", Secrets: []string{secret}}, jsonBody},
		{"zendesk", Params{Scheme: "zendesk", Secrets: []string{secret}}, jsonBody},
		{"graph", Params{Scheme: "graph", Secrets: []string{secret}}, jsonBody},
	}
	covered := map[string]bool{"sendgrid": true, "discord": true, "telnyx": true}
	for _, c := range cases {
		covered[c.scheme] = true
		b.Run(c.scheme, func(b *testing.B) {
			v, err := New(c.p)
			if err != nil {
				b.Fatal(err)
			}
			if c.scheme == "mailgun" {
				// Each token verifies once (replay cache): sign every request.
				reqs := make([]*Request, b.N)
				for i := range reqs {
					h, body, err := SignBody(c.p, c.body, now, "tok_"+strconv.Itoa(i))
					if err != nil {
						b.Fatal(err)
					}
					reqs[i] = &Request{Header: h, Body: body, URL: "/hooks/x", Now: now}
				}
				b.SetBytes(int64(len(reqs[0].Body)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if err := v.Verify(reqs[i]); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			h, body, err := SignBody(c.p, c.body, now, "msg_2Lh6h1cP3Ym0iJ0w")
			if err != nil {
				b.Fatal(err)
			}
			r := &Request{Header: h, Body: body, URL: "/hooks/x", Now: now}
			if err := v.Verify(r); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := v.Verify(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("sendgrid", func(b *testing.B) {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
		if err != nil {
			b.Fatal(err)
		}
		v, err := New(Params{Scheme: "sendgrid", Secrets: []string{base64.StdEncoding.EncodeToString(der)}})
		if err != nil {
			b.Fatal(err)
		}
		body := []byte("[" + string(jsonBody) + "]")
		ts := strconv.FormatInt(now.Unix(), 10)
		d := sha256.Sum256(append([]byte(ts), body...))
		sig, err := ecdsa.SignASN1(rand.Reader, priv, d[:])
		if err != nil {
			b.Fatal(err)
		}
		h := http.Header{}
		h.Set(sendgridSigHeader, base64.StdEncoding.EncodeToString(sig))
		h.Set(sendgridTSHeader, ts)
		r := &Request{Header: h, Body: body, Now: now}
		if err := v.Verify(r); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := v.Verify(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, scheme := range []string{"discord", "telnyx"} {
		b.Run(scheme, func(b *testing.B) {
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				b.Fatal(err)
			}
			key := hex.EncodeToString(pub)
			if scheme == "telnyx" {
				key = base64.StdEncoding.EncodeToString(pub)
			}
			v, err := New(Params{Scheme: scheme, Secrets: []string{key}})
			if err != nil {
				b.Fatal(err)
			}
			h, err := SignEd25519(scheme, priv, jsonBody, now)
			if err != nil {
				b.Fatal(err)
			}
			r := &Request{Header: h, Body: jsonBody, Now: now}
			b.SetBytes(int64(len(jsonBody)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := v.Verify(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, s := range Schemes() {
		if !covered[s] {
			b.Errorf("scheme %s has no verify benchmark", s)
		}
	}
}

// benchJSONBody is a JSON event of exactly n bytes (n >= 64).
func benchJSONBody(n int) []byte {
	head := `{"id":"evt_1NvH2cLkdIwHu7ix","type":"invoice.paid","data":{"pad":"`
	tail := `"}}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// benchFormBody is a form body of exactly n bytes (n >= 64).
func benchFormBody(n int) []byte {
	head := "MessageSid=SM1&MessageStatus=delivered&Body="
	return []byte(head + strings.Repeat("x", n-len(head)))
}
