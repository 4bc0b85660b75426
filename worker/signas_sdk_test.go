package worker_test

// sign_as, checked by the providers' own verifiers as the app would run
// them: stripe-go, go-github, slack-go and the Standard Webhooks library
// where a Go SDK exists, the provider's published algorithm (written here
// again, independently of internal/signature) for the rest. Every event was
// received an hour before its delivery, far past every tolerance (Stripe,
// Slack, Zoom, Standard Webhooks 300 s; Paddle's SDK 5 s): only a signature
// made at the attempt verifies.

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/slack-go/slack"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	stripe "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/sqlitestore"
	"github.com/hookwarden/hookwarden/worker"
)

// signAsCase is one provider: the secret the app holds, the request the
// provider sent to Hookwarden (its headers and body), and the app's check.
type signAsCase struct {
	name, scheme, secret string
	contentType, body    string
	eventID, eventType   string
	received             http.Header // the provider's headers, as the receipt keeps them
	// verify is the app's own check, with the SDK or the published
	// algorithm; url is the URL the app was called at.
	verify func(r *http.Request, body []byte, url string) error
	by     string // what verified it, for the report
}

const waited = time.Hour // between the receipt and the delivery

func hmac256(key, msg string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

func hmac1(key, msg string) []byte {
	m := hmac.New(sha1.New, []byte(key))
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// within is the freshness check of a provider's SDK: |now - ts| <= tol.
func within(ts string, tol time.Duration) error {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: %v", ts, err)
	}
	if d := time.Since(time.Unix(n, 0)); d > tol || d < -tol {
		return fmt.Errorf("timestamp %s is %s from now, past the tolerance of %s", ts, d.Round(time.Second), tol)
	}
	return nil
}

func equalHeader(r *http.Request, name, want string) error {
	if got := r.Header.Get(name); got != want {
		return fmt.Errorf("%s = %q, want %q", name, got, want)
	}
	return nil
}

func signAsCases() []signAsCase {
	stripeBody := `{"id":"evt_1","object":"event","api_version":"` + stripe.APIVersion + `","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`
	return []signAsCase{
		{name: "stripe", scheme: "stripe", secret: "whsec_stripe_test_secret", contentType: "application/json; charset=utf-8",
			body: stripeBody, eventID: "evt_1", eventType: "invoice.paid",
			received: http.Header{"Stripe-Signature": {"t=1,v1=00"}, "User-Agent": {"Stripe/1.0"}},
			by:       "stripe-go v82 webhook.ConstructEvent (tolerance 300 s)",
			verify: func(r *http.Request, body []byte, _ string) error {
				ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), "whsec_stripe_test_secret")
				if err != nil {
					return err
				}
				if ev.ID != "evt_1" || ev.Type != "invoice.paid" {
					return fmt.Errorf("event %s %s", ev.ID, ev.Type)
				}
				return nil
			}},
		{name: "github", scheme: "github", secret: "It's a Secret to Everybody", contentType: "application/json",
			body: `{"ref":"refs/heads/main","repository":{"id":1}}`, eventID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", eventType: "push",
			received: http.Header{"X-Github-Event": {"push"}, "X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"},
				"X-Github-Hook-Id": {"292430182"}, "X-Github-Hook-Installation-Target-Id": {"79929171"},
				"X-Github-Hook-Installation-Target-Type": {"repository"}, "X-Hub-Signature-256": {"sha256=00"}},
			by: "go-github v75 github.ValidatePayload (+ ValidateSignature of the legacy SHA-1)",
			verify: func(r *http.Request, body []byte, _ string) error {
				if _, err := github.ValidatePayloadFromBody(r.Header.Get("Content-Type"), strings.NewReader(string(body)),
					r.Header.Get(github.SHA256SignatureHeader), []byte("It's a Secret to Everybody")); err != nil {
					return err
				}
				if err := github.ValidateSignature(r.Header.Get(github.SHA1SignatureHeader), body, []byte("It's a Secret to Everybody")); err != nil {
					return fmt.Errorf("legacy X-Hub-Signature: %w", err)
				}
				if github.WebHookType(r) != "push" || github.DeliveryID(r) != "72d3162e-cc78-11e3-81ab-4c9367dc0958" {
					return fmt.Errorf("WebHookType %q DeliveryID %q, want the receipt's", github.WebHookType(r), github.DeliveryID(r))
				}
				if _, err := github.ParseWebHook(github.WebHookType(r), body); err != nil {
					return err
				}
				return errors.Join(equalHeader(r, "X-GitHub-Hook-ID", "292430182"),
					equalHeader(r, "X-GitHub-Hook-Installation-Target-Type", "repository"))
			}},
		{name: "shopify", scheme: "shopify", secret: "shpss_client_secret", contentType: "application/json",
			body: `{"id":820982911946154508,"email":"jon@example.com"}`, eventID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", eventType: "orders/create",
			received: http.Header{"X-Shopify-Topic": {"orders/create"}, "X-Shopify-Shop-Domain": {"example.myshopify.com"},
				"X-Shopify-Api-Version": {"2025-07"}, "X-Shopify-Webhook-Id": {"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"},
				"X-Shopify-Event-Id": {"98880550-7158-44d4-b7cd-2c97c8a091b5"}, "X-Shopify-Triggered-At": {"2025-09-01T10:00:00Z"},
				"X-Shopify-Hmac-Sha256": {"AAAA"}},
			by: "Shopify's published algorithm (shopify-app-js hmac-validator: base64 HMAC-SHA256 of the raw body)",
			verify: func(r *http.Request, body []byte, _ string) error {
				want := base64.StdEncoding.EncodeToString(hmac256("shpss_client_secret", string(body)))
				if !hmac.Equal([]byte(r.Header.Get("X-Shopify-Hmac-Sha256")), []byte(want)) {
					return errors.New("X-Shopify-Hmac-Sha256 does not match")
				}
				// webhooks/validate.ts requires these besides the HMAC.
				return errors.Join(equalHeader(r, "X-Shopify-Topic", "orders/create"),
					equalHeader(r, "X-Shopify-Shop-Domain", "example.myshopify.com"),
					equalHeader(r, "X-Shopify-API-Version", "2025-07"),
					equalHeader(r, "X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
					equalHeader(r, "X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5"))
			}},
		{name: "slack", scheme: "slack", secret: "8f742231b10e8888abcd99yyyzzz85a5", contentType: "application/json",
			body: `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}`, eventID: "Ev1", eventType: "app_mention",
			received: http.Header{"X-Slack-Retry-Num": {"1"}, "X-Slack-Retry-Reason": {"http_timeout"},
				"X-Slack-Signature": {"v0=00"}, "X-Slack-Request-Timestamp": {"1"}},
			by: "slack-go v0.35 slack.NewSecretsVerifier (tolerance 5 min)",
			verify: func(r *http.Request, body []byte, _ string) error {
				sv, err := slack.NewSecretsVerifier(r.Header, "8f742231b10e8888abcd99yyyzzz85a5")
				if err != nil {
					return err
				}
				if _, err := sv.Write(body); err != nil {
					return err
				}
				if err := sv.Ensure(); err != nil {
					return err
				}
				return errors.Join(equalHeader(r, "X-Slack-Retry-Num", "1"), equalHeader(r, "X-Slack-Retry-Reason", "http_timeout"))
			}},
		{name: "standard", scheme: "standard", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", contentType: "application/json",
			body: `{"type":"user.created","data":{"id":"u_1"}}`, eventID: "msg_p5jXN8AQM9LWM0D4loKWxJek", eventType: "user.created",
			received: http.Header{"Webhook-Id": {"msg_p5jXN8AQM9LWM0D4loKWxJek"}, "Webhook-Timestamp": {"1"}, "Webhook-Signature": {"v1,AA=="}},
			by:       "standard-webhooks Go library v1.3.0 Webhook.Verify (tolerance 5 min)",
			verify: func(r *http.Request, body []byte, _ string) error {
				wh, err := standardwebhooks.NewWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
				if err != nil {
					return err
				}
				if err := wh.Verify(body, r.Header); err != nil {
					return err
				}
				return equalHeader(r, "webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
			}},
		{name: "svix", scheme: "svix", secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", contentType: "application/json",
			body: `{"type":"invoice.paid"}`, eventID: "msg_svix_1", eventType: "invoice.paid",
			received: http.Header{"Svix-Id": {"msg_svix_1"}},
			by:       "standard-webhooks Go library v1.3.0 over the svix-* headers (Svix's libraries' math)",
			verify: func(r *http.Request, body []byte, _ string) error {
				if r.Header.Get("webhook-signature") != "" {
					return errors.New("webhook-* headers beside svix-*")
				}
				h := http.Header{}
				for _, f := range []string{"id", "timestamp", "signature"} {
					h.Set("webhook-"+f, r.Header.Get("svix-"+f))
				}
				wh, err := standardwebhooks.NewWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
				if err != nil {
					return err
				}
				if err := wh.Verify(body, h); err != nil {
					return err
				}
				return equalHeader(r, "svix-id", "msg_svix_1")
			}},
		{name: "paddle", scheme: "paddle", secret: "pdl_ntfset_01_secret", contentType: "application/json",
			body: `{"event_id":"evt_01h","event_type":"transaction.completed","notification_id":"ntf_01"}`, eventID: "evt_01h",
			eventType: "transaction.completed", received: http.Header{"Paddle-Signature": {"ts=1;h1=00"}},
			by: "Paddle's published algorithm (paddle-go-sdk webhook_verifier: ts:body, 5 s tolerance)",
			verify: func(r *http.Request, body []byte, _ string) error {
				var ts, h1 string
				for _, kv := range strings.Split(r.Header.Get("Paddle-Signature"), ";") {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "ts":
						ts = v
					case "h1":
						h1 = v
					}
				}
				if err := within(ts, 5*time.Second); err != nil {
					return err
				}
				if !hmac.Equal([]byte(h1), []byte(hex.EncodeToString(hmac256("pdl_ntfset_01_secret", ts+":"+string(body))))) {
					return errors.New("h1 does not match")
				}
				return nil
			}},
		{name: "twilio", scheme: "twilio", secret: "12345", contentType: "application/x-www-form-urlencoded",
			body:    "CallSid=CA1234567890ABCDE&Caller=%2B12349013030&Digits=1234&From=%2B12349013030&To=%2B18005551212",
			eventID: "idem-1", eventType: "completed",
			received: http.Header{"I-Twilio-Idempotency-Token": {"idem-1"}, "X-Twilio-Signature": {"AA=="}, "X-Home-Region": {"us1"}},
			by:       "Twilio's published algorithm (webhooks-security: URL + sorted name+value, HMAC-SHA1, base64)",
			verify: func(r *http.Request, body []byte, u string) error {
				vals, err := url.ParseQuery(string(body))
				if err != nil {
					return err
				}
				keys := make([]string, 0, len(vals))
				for k := range vals {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				data := u
				for _, k := range keys {
					for _, v := range vals[k] {
						data += k + v
					}
				}
				if !hmac.Equal([]byte(r.Header.Get("X-Twilio-Signature")), []byte(base64.StdEncoding.EncodeToString(hmac1("12345", data)))) {
					return errors.New("X-Twilio-Signature does not match")
				}
				return errors.Join(equalHeader(r, "I-Twilio-Idempotency-Token", "idem-1"), equalHeader(r, "X-Home-Region", "us1"))
			}},
		{name: "twiliojson", scheme: "twilio", secret: "12345", contentType: "application/json",
			body: `{"CallSid":"CA1","CallStatus":"completed"}`, eventID: "idem-2", eventType: "completed",
			by: "Twilio's published algorithm for JSON bodies (bodySHA256 in the URL, HMAC-SHA1 of the URL)",
			verify: func(r *http.Request, body []byte, u string) error {
				sum := sha256.Sum256(body)
				if got := r.URL.Query().Get("bodySHA256"); got != hex.EncodeToString(sum[:]) {
					return fmt.Errorf("bodySHA256 = %q, want the body's", got)
				}
				if !hmac.Equal([]byte(r.Header.Get("X-Twilio-Signature")), []byte(base64.StdEncoding.EncodeToString(hmac1("12345", u)))) {
					return errors.New("X-Twilio-Signature does not match")
				}
				return nil
			}},
		{name: "zoom", scheme: "zoom", secret: "zoom_secret_token", contentType: "application/json",
			body: `{"event":"meeting.started","event_ts":1626230691572,"payload":{"object":{"uuid":"u1"}}}`, eventID: "zoom-1",
			eventType: "meeting.started",
			by:        "Zoom's published algorithm (webhook-sample: v0:ts:body, hex HMAC-SHA256; 300 s)",
			verify: func(r *http.Request, body []byte, _ string) error {
				ts := r.Header.Get("x-zm-request-timestamp")
				if err := within(ts, 300*time.Second); err != nil {
					return err
				}
				want := "v0=" + hex.EncodeToString(hmac256("zoom_secret_token", "v0:"+ts+":"+string(body)))
				if r.Header.Get("x-zm-signature") != want {
					return errors.New("x-zm-signature does not match")
				}
				return nil
			}},
		{name: "meta", scheme: "meta", secret: "meta_app_secret", contentType: "application/json",
			body: `{"id":"wamid.1","type":"text"}`, eventID: "wamid.1", eventType: "text",
			by: "Meta's published algorithm (WhatsApp-Nodejs-SDK: sha256= hex HMAC-SHA256 of the raw body)",
			verify: func(r *http.Request, body []byte, _ string) error {
				if r.Header.Get("X-Hub-Signature-256") != "sha256="+hex.EncodeToString(hmac256("meta_app_secret", string(body))) {
					return errors.New("X-Hub-Signature-256 does not match")
				}
				return nil
			}},
		{name: "line", scheme: "line", secret: "line_channel_secret", contentType: "application/json",
			body: `{"webhookEventId":"01H","type":"message"}`, eventID: "01H", eventType: "message",
			by: "LINE's published algorithm (line-bot-sdk-go: base64 HMAC-SHA256 of the body)",
			verify: func(r *http.Request, body []byte, _ string) error {
				if r.Header.Get("X-Line-Signature") != base64.StdEncoding.EncodeToString(hmac256("line_channel_secret", string(body))) {
					return errors.New("X-Line-Signature does not match")
				}
				return nil
			}},
		{name: "x", scheme: "x", secret: "x_consumer_secret", contentType: "application/json",
			body: `{"id_str":"1","type":"tweet_create_events"}`, eventID: "1", eventType: "tweet_create_events",
			by: "X's published algorithm (securing-webhooks: sha256= base64 HMAC-SHA256 of the body)",
			verify: func(r *http.Request, body []byte, _ string) error {
				if r.Header.Get("X-Twitter-Webhooks-Signature") != "sha256="+base64.StdEncoding.EncodeToString(hmac256("x_consumer_secret", string(body))) {
					return errors.New("X-Twitter-Webhooks-Signature does not match")
				}
				return nil
			}},
		{name: "viber", scheme: "viber", secret: "viber_auth_token", contentType: "application/json",
			body: `{"event":"message","message_token":4912661846655238145}`, eventID: "message4912661846655238145", eventType: "message",
			by: "Viber's published algorithm (viber-bot-python: hex HMAC-SHA256 of the body)",
			verify: func(r *http.Request, body []byte, _ string) error {
				if r.Header.Get("X-Viber-Content-Signature") != hex.EncodeToString(hmac256("viber_auth_token", string(body))) {
					return errors.New("X-Viber-Content-Signature does not match")
				}
				return nil
			}},
		{name: "intercom", scheme: "intercom", secret: "intercom_client_secret", contentType: "application/json",
			body: `{"id":"notif_1","topic":"conversation.user.created"}`, eventID: "notif_1", eventType: "conversation.user.created",
			by: "Intercom's published algorithm (signed-notifications: sha1= hex HMAC-SHA1 of the body)",
			verify: func(r *http.Request, body []byte, _ string) error {
				if r.Header.Get("X-Hub-Signature") != "sha1="+hex.EncodeToString(hmac1("intercom_client_secret", string(body))) {
					return errors.New("X-Hub-Signature does not match")
				}
				return nil
			}},
		{name: "zendesk", scheme: "zendesk", secret: "dGhpc19zZWNyZXQ=", contentType: "application/json",
			body: `{"id":"z1","type":"zen:event-type:ticket.created"}`, eventID: "z1", eventType: "zen:event-type:ticket.created",
			received: http.Header{"X-Zendesk-Webhook-Id": {"01GXYZ"}, "X-Zendesk-Webhook-Invocation-Id": {"8350205582"}},
			by:       "Zendesk's published algorithm (webhooks/verifying: base64 HMAC-SHA256 of timestamp + body)",
			verify: func(r *http.Request, body []byte, _ string) error {
				ts := r.Header.Get("X-Zendesk-Webhook-Signature-Timestamp")
				if at, err := time.Parse(time.RFC3339, ts); err != nil || time.Since(at) > time.Minute {
					return fmt.Errorf("timestamp %q is not the attempt's", ts)
				}
				if r.Header.Get("X-Zendesk-Webhook-Signature") != base64.StdEncoding.EncodeToString(hmac256("dGhpc19zZWNyZXQ=", ts+string(body))) {
					return errors.New("X-Zendesk-Webhook-Signature does not match")
				}
				return equalHeader(r, "X-Zendesk-Webhook-Invocation-Id", "8350205582")
			}},
		{name: "telegram", scheme: "telegram", secret: "tg_secret-Token_1", contentType: "application/json",
			body: `{"update_id":10000,"message":{"text":"hi"}}`, eventID: "10000",
			received: http.Header{"X-Telegram-Bot-Api-Secret-Token": {"[redacted]"}},
			by:       "Telegram's published check (setWebhook secret_token equals X-Telegram-Bot-Api-Secret-Token)",
			verify: func(r *http.Request, _ []byte, _ string) error {
				return equalHeader(r, "X-Telegram-Bot-Api-Secret-Token", "tg_secret-Token_1")
			}},
		{name: "vonage", scheme: "vonage", secret: "vonage_signature_secret", contentType: "application/json",
			body: `{"message_uuid":"aaaaaaaa-bbbb","status":"delivered"}`, eventID: "aaaaaaaa-bbbbdelivered", eventType: "delivered",
			by: "Vonage's published algorithm (signed-webhooks: HS256 JWT, iat, payload_hash = SHA-256 of the body)",
			verify: func(r *http.Request, body []byte, _ string) error {
				tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
				parts := strings.Split(tok, ".")
				if !ok || len(parts) != 3 {
					return errors.New("no bearer JWT")
				}
				mac := base64.RawURLEncoding.EncodeToString(hmac256("vonage_signature_secret", parts[0]+"."+parts[1]))
				if !hmac.Equal([]byte(mac), []byte(parts[2])) {
					return errors.New("JWT signature does not match")
				}
				raw, err := base64.RawURLEncoding.DecodeString(parts[1])
				if err != nil {
					return err
				}
				var c struct {
					Iat         int64  `json:"iat"`
					PayloadHash string `json:"payload_hash"`
				}
				if err := json.Unmarshal(raw, &c); err != nil {
					return err
				}
				if err := within(strconv.FormatInt(c.Iat, 10), 300*time.Second); err != nil {
					return err
				}
				sum := sha256.Sum256(body)
				if c.PayloadHash != hex.EncodeToString(sum[:]) {
					return errors.New("payload_hash is not the body's")
				}
				return nil
			}},
	}
}

// TestSignAsProviderVerifiers delivers one event per provider, received an
// hour before, through a real store and pool, to a loopback app that
// checks each with the provider's verifier; it reports per provider.
func TestSignAsProviderVerifiers(t *testing.T) {
	cases := signAsCases()
	var mu sync.Mutex
	results := map[string]error{}
	byName := map[string]signAsCase{}
	for _, c := range cases {
		byName[c.name] = c
	}
	done := make(chan string, len(cases))
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		c, ok := byName[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		// The URL the app is called at, as Twilio's validator is given it.
		err := c.verify(r, body, "http://"+r.Host+r.URL.RequestURI())
		if string(body) != c.body {
			err = errors.Join(err, fmt.Errorf("body %q, want the byte-exact %q", body, c.body))
		}
		err = errors.Join(err, equalHeader(r, "Idempotency-Key", name+":"+c.eventID), equalHeader(r, "Hookwarden-Event-Id", c.eventID),
			equalHeader(r, "Hookwarden-Source", name), equalHeader(r, "Hookwarden-Attempt", "1"))
		if ct := r.Header.Get("Content-Type"); ct != c.contentType {
			err = errors.Join(err, fmt.Errorf("Content-Type %q, want the provider's %q", ct, c.contentType))
		}
		if c.scheme != "standard" && r.Header.Get("webhook-signature") != "" {
			err = errors.Join(err, errors.New("a Standard Webhooks signature beside the provider's"))
		}
		mu.Lock()
		results[name] = err
		mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusBadRequest) // poison: dead at once, no retry
		}
		done <- name
	}))
	defer app.Close()

	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "hw.db"), sqlitestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var dests []worker.Destination
	for _, c := range cases {
		h, err := worker.NewHTTP(worker.HTTPConfig{URL: app.URL + "/" + c.name, SignAs: c.scheme, SigningSecret: c.secret})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		dests = append(dests, worker.Destination{Name: c.name + "/app", Deliverer: h, MaxAttempts: 1})
	}
	// Recorded before the pool runs: every job is read back by Lease, with
	// the receipt's headers, as after a restart or a long pause.
	receivedAt := time.Now().Add(-waited)
	for _, c := range cases {
		hdr := c.received.Clone()
		if hdr == nil {
			hdr = http.Header{}
		}
		hdr.Set("Content-Type", c.contentType)
		sum := sha256.Sum256([]byte(c.body))
		res, err := s.Record(ctx, &hookwarden.Receipt{Source: c.name, Header: hdr, Body: []byte(c.body), BodySHA256: sum,
			RemoteAddr: "127.0.0.1:5555", ReceivedAt: receivedAt,
			Events: []hookwarden.Event{{ID: c.eventID, Type: c.eventType, BodySHA256: sum, Destinations: []string{c.name + "/app"}}}})
		if err != nil || res.Outcome != hookwarden.Accepted {
			t.Fatalf("record %s: %+v %v", c.name, res, err)
		}
	}
	p := worker.New(s, dests, worker.Options{PollInterval: 50 * time.Millisecond, DrainTimeout: 10 * time.Second})
	if err := p.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	deadline := time.After(30 * time.Second)
	for range cases {
		select {
		case <-done:
		case <-deadline:
			t.Fatalf("only %d of %d providers were delivered", len(results), len(cases))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range cases {
		if err := results[c.name]; err != nil {
			t.Errorf("%-10s FAILED %s, %s after the receipt: %v", c.name, c.by, waited, err)
		} else {
			t.Logf("%-10s verified by %s, %s after the receipt", c.name, c.by, waited)
		}
	}
}
