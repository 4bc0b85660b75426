package main

import (
	"crypto/ed25519"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/url"
	"os"
	"strings"
)

// The messaging vectors (testdata/messaging_vectors.json) come from the
// research's own generator, in Python. checkMessaging re-derives every
// verdict here, in Go, from each platform's documented scheme, with code
// that shares nothing with internal/signature: the ten published examples
// must verify (which reproduces each published value), every computed
// vector must reach its expected verdict, and every handshake answer must
// be the one given. `make vectors` fails otherwise.

type msgVector struct {
	Provider   string            `json:"provider"`
	Case       string            `json:"case"`
	Secret     *string           `json:"secret"`
	Timestamp  *int64            `json:"timestamp"`
	Now        *int64            `json:"now"`
	ToleranceS *int64            `json:"tolerance_s"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"`
	Expected   string            `json:"expected"`
	Source     string            `json:"source"`
	Query      string            `json:"query"`
	Response   *struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	} `json:"response"`
}

func (v msgVector) name() string { return v.Provider + "/" + v.Case }

// checkMessagingFile reads and checks the messaging vectors at path.
func checkMessagingFile(path string) (published int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read messaging vectors: %w", err)
	}
	var vs []msgVector
	if err := json.Unmarshal(b, &vs); err != nil {
		return 0, fmt.Errorf("parse messaging vectors: %w", err)
	}
	return checkMessaging(vs)
}

func checkMessaging(vs []msgVector) (published int, err error) {
	for _, v := range vs {
		got, err := msgVerdict(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", v.name(), err)
		}
		if want := v.Expected == "valid"; got != want {
			return 0, fmt.Errorf("%s: this code finds valid=%v, the file says %s", v.name(), got, v.Expected)
		}
		if strings.HasPrefix(v.Source, "official:") {
			published++
		}
	}
	return published, nil
}

func hexMAC(h func() hash.Hash, key, msg string) string {
	return hex.EncodeToString(mac(h, []byte(key), msg))
}
func b64MAC(key, msg string) string { return b64(mac(sha256.New, []byte(key), msg)) }

// fresh applies the vector's window (none when now or tolerance is null).
func (v msgVector) fresh(ts int64) bool {
	if v.Now == nil || v.ToleranceS == nil {
		return true
	}
	d := *v.Now - ts
	return d <= *v.ToleranceS && -d <= *v.ToleranceS
}

func (v msgVector) secret() string {
	if v.Secret == nil {
		return ""
	}
	return *v.Secret
}

// msgVerdict is the reference verifier: true when the request (or
// handshake answer) is what the platform documents.
func msgVerdict(v msgVector) (bool, error) {
	s, h, body := v.secret(), v.Headers, v.Body
	switch v.Provider {
	case "meta":
		if v.Query != "" {
			q, err := url.ParseQuery(v.Query)
			if err != nil {
				return false, err
			}
			ok := q.Get("hub.mode") == "subscribe" && q.Get("hub.verify_token") == s
			if ok != (v.Response.Status == 200) || ok && v.Response.Body != q.Get("hub.challenge") {
				return false, fmt.Errorf("the handshake answer %+v is not Meta's", v.Response)
			}
			return ok, nil
		}
		return h["X-Hub-Signature-256"] == "sha256="+hexMAC(sha256.New, s, body), nil
	case "telegram":
		return h["X-Telegram-Bot-Api-Secret-Token"] == s && s != "", nil
	case "line":
		return h["x-line-signature"] == b64MAC(s, body), nil
	case "x":
		if v.Query != "" {
			q, err := url.ParseQuery(v.Query)
			if err != nil {
				return false, err
			}
			return v.Response.Body == `{"response_token":"sha256=`+b64MAC(s, q.Get("crc_token"))+`"}`, nil
		}
		return h["x-twitter-webhooks-signature"] == "sha256="+b64MAC(s, body), nil
	case "zoom":
		ts := h["x-zm-request-timestamp"]
		ok := h["x-zm-signature"] == "v0="+hexMAC(sha256.New, s, "v0:"+ts+":"+body) && v.fresh(*v.Timestamp)
		if ok && v.Response != nil {
			var in struct{ Payload struct{ PlainToken string } }
			if err := json.Unmarshal([]byte(body), &in); err != nil {
				return false, err
			}
			want := `{"plainToken":"` + in.Payload.PlainToken + `","encryptedToken":"` + hexMAC(sha256.New, s, in.Payload.PlainToken) + `"}`
			if v.Response.Body != want {
				return false, fmt.Errorf("url_validation answer %s, want %s", v.Response.Body, want)
			}
		}
		return ok, nil
	case "slack":
		ts := h["X-Slack-Request-Timestamp"]
		return h["X-Slack-Signature"] == "v0="+hexMAC(sha256.New, s, "v0:"+ts+":"+body) && v.fresh(*v.Timestamp), nil
	case "viber":
		return h["X-Viber-Content-Signature"] == hexMAC(sha256.New, s, body), nil
	case "intercom":
		return h["X-Hub-Signature"] == "sha1="+hexMAC(sha1.New, s, body), nil
	case "zendesk":
		return h["X-Zendesk-Webhook-Signature"] == b64MAC(s, h["X-Zendesk-Webhook-Signature-Timestamp"]+body), nil
	case "ed25519":
		return edVerify(hex.DecodeString, s, h["signature_hex"], hex.DecodeString, "", body)
	case "discord":
		return edVerify(hex.DecodeString, s, h["X-Signature-Ed25519"], hex.DecodeString, h["X-Signature-Timestamp"], body)
	case "telnyx":
		ts := h["telnyx-timestamp"]
		ok, err := edVerify(base64.StdEncoding.DecodeString, s, h["telnyx-signature-ed25519"], base64.StdEncoding.DecodeString, ts+"|", body)
		return ok && v.fresh(*v.Timestamp), err
	case "vonage":
		return vonageVerdict(v)
	case "msgraph":
		if v.Query != "" {
			q, err := url.ParseQuery(v.Query)
			if err != nil {
				return false, err
			}
			return v.Response.Body == q.Get("validationToken"), nil
		}
		var n struct {
			Value []struct {
				ClientState string `json:"clientState"`
			} `json:"value"`
		}
		if err := json.Unmarshal([]byte(body), &n); err != nil {
			return false, err
		}
		ok := len(n.Value) > 0
		for _, it := range n.Value {
			ok = ok && it.ClientState == s
		}
		return ok, nil
	}
	return false, fmt.Errorf("no reference verifier for provider %q", v.Provider)
}

// edVerify checks an Ed25519 signature (sig, decoded by decSig) of prefix +
// body under the public key pub (decoded by decKey); an undecodable
// signature is simply not valid.
func edVerify(decKey func(string) ([]byte, error), pub, sig string, decSig func(string) ([]byte, error), prefix, body string) (bool, error) {
	k, err := decKey(pub)
	if err != nil || len(k) != ed25519.PublicKeySize {
		return false, fmt.Errorf("public key does not decode to %d bytes", ed25519.PublicKeySize)
	}
	sg, err := decSig(sig)
	if err != nil || len(sg) != ed25519.SignatureSize {
		return false, nil
	}
	return ed25519.Verify(k, []byte(prefix+body), sg), nil
}

// vonageVerdict: HS256 only, the MAC of header.payload, payload_hash the hex
// SHA-256 of the body (a token without one covers an empty body only), iat
// inside the window when one is set.
func vonageVerdict(v msgVector) (bool, error) {
	tok := strings.TrimPrefix(v.Headers["Authorization"], "Bearer ")
	p := strings.Split(tok, ".")
	if len(p) != 3 {
		return false, fmt.Errorf("not a JWT")
	}
	dec := base64.RawURLEncoding
	hb, err := dec.DecodeString(p[0])
	if err != nil {
		return false, err
	}
	var head struct{ Alg string }
	if err := json.Unmarshal(hb, &head); err != nil {
		return false, err
	}
	if head.Alg != "HS256" || p[2] != dec.EncodeToString(mac(sha256.New, []byte(v.secret()), p[0]+"."+p[1])) {
		return false, nil
	}
	cb, err := dec.DecodeString(p[1])
	if err != nil {
		return false, err
	}
	var c struct {
		Iat         int64   `json:"iat"`
		PayloadHash *string `json:"payload_hash"`
	}
	if err := json.Unmarshal(cb, &c); err != nil {
		return false, err
	}
	sum := sha256.Sum256([]byte(v.Body))
	// Without payload_hash the token covers no body: only an empty one.
	if c.PayloadHash == nil && v.Body != "" || c.PayloadHash != nil && *c.PayloadHash != hex.EncodeToString(sum[:]) {
		return false, nil
	}
	return v.fresh(c.Iat), nil
}
