package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	stripe "github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookwarden/hookwarden/internal/signature"
)

// TestSignAsThroughServe: through the real binary, a Stripe and a GitHub
// event wait behind paused destinations, then are delivered signed as the
// provider: the app's stripe-go ConstructEvent (with a tolerance shorter
// than the wait) and go-github ValidatePayload accept them, the Stripe
// signature's timestamp is the attempt's (after the wait), and GitHub's
// event, delivery and hook headers are the ones GitHub sent.
func TestSignAsThroughServe(t *testing.T) {
	const (
		stripeSecret = "whsec_stripe_signas_secret"
		githubSecret = "It's a Secret to Everybody"
		wait         = 4 * time.Second // the events wait this long
		tolerance    = 3 * time.Second // the app's Stripe tolerance: shorter than the wait
	)
	type got struct {
		name string
		err  error
		hdr  http.Header
	}
	arrived := make(chan got, 4)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var err error
		switch r.URL.Path {
		case "/stripe":
			_, err = webhook.ConstructEventWithTolerance(body, r.Header.Get("Stripe-Signature"), stripeSecret, tolerance)
		case "/github":
			_, err = github.ValidatePayloadFromBody(r.Header.Get("Content-Type"), bytes.NewReader(body),
				r.Header.Get(github.SHA256SignatureHeader), []byte(githubSecret))
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
		}
		arrived <- got{strings.TrimPrefix(r.URL.Path, "/"), err, r.Header.Clone()}
	}))
	defer app.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	hook, adm := freeAddr(t), freeAddr(t)
	doc := fmt.Sprintf(`
listen: %q
admin: { listen: %q }
database: { path: %q }
sources:
  - name: stripe
    scheme: stripe
    secrets: [%q]
    destinations:
      - { name: app, url: %q, sign_as: stripe, signing_secret: %q, max_attempts: 1 }
  - name: gh
    scheme: github
    secrets: [%q]
    destinations:
      - { name: app, url: %q, sign_as: github, signing_secret: %q, max_attempts: 1 }
`, hook, adm, filepath.Join(dir, "hw.db"), stripeSecret, app.URL+"/stripe", stripeSecret,
		githubSecret, app.URL+"/github", githubSecret)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, cfg, hook, adm)
	flow := func(dest, action string) {
		t.Helper()
		resp, err := http.Post("http://"+adm+"/api/destinations/"+dest+"/"+action, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d", action, dest, resp.StatusCode)
		}
	}
	flow("stripe/app", "pause")
	flow("gh/app", "pause")

	send := func(source string, p signature.Params, body string, extra http.Header) {
		t.Helper()
		h, err := signature.Sign(p, []byte(body), time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range extra {
			h[k] = vs
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+hook+"/hooks/"+source, strings.NewReader(body))
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "accepted") {
			t.Fatalf("POST /hooks/%s: %d %s", source, resp.StatusCode, b)
		}
	}
	receivedAt := time.Now()
	send("stripe", signature.Params{Scheme: "stripe", Secrets: []string{stripeSecret}},
		`{"id":"evt_signas","object":"event","api_version":"`+stripe.APIVersion+`","type":"invoice.paid","data":{"object":{}}}`, nil)
	send("gh", signature.Params{Scheme: "github", Secrets: []string{githubSecret}}, `{"action":"opened","issue":{"number":1}}`,
		http.Header{"X-Github-Event": {"issues"}, "X-Github-Delivery": {"5f1e0c60-0000-11ee-8000-000000000001"},
			"X-Github-Hook-Id": {"42"}})

	// The events wait behind the pause for longer than the app's Stripe
	// tolerance: the point is the elapsed time, so this waits on the clock.
	select {
	case g := <-arrived:
		t.Fatalf("%s delivered while paused", g.name)
	case <-time.After(time.Until(receivedAt.Add(wait))):
	}
	flow("stripe/app", "resume")
	flow("gh/app", "resume")

	for range 2 {
		var g got
		select {
		case g = <-arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("a delivery never arrived after resume")
		}
		if g.err != nil {
			t.Errorf("%s: the provider's SDK refused the delivery %s after the receipt: %v", g.name, wait, g.err)
			continue
		}
		switch g.name {
		case "stripe":
			ts, _, _ := strings.Cut(strings.TrimPrefix(g.hdr.Get("Stripe-Signature"), "t="), ",")
			n, _ := strconv.ParseInt(ts, 10, 64)
			if n < receivedAt.Unix()+int64(wait/time.Second) {
				t.Errorf("Stripe-Signature t=%d is not the attempt's: the receipt was at %d, the attempt after %s",
					n, receivedAt.Unix(), wait)
			}
			t.Logf("stripe: stripe-go ConstructEvent (tolerance %s) verified it %s after the receipt", tolerance, wait)
		case "github":
			r := &http.Request{Header: g.hdr}
			if github.WebHookType(r) != "issues" || github.DeliveryID(r) != "5f1e0c60-0000-11ee-8000-000000000001" ||
				g.hdr.Get("X-GitHub-Hook-ID") != "42" {
				t.Errorf("github headers %v, want GitHub's own event, delivery and hook id", g.hdr)
			}
			t.Logf("github: go-github ValidatePayload verified it %s after the receipt", wait)
		}
		for _, h := range []string{"webhook-signature", "webhook-id"} {
			if g.hdr.Get(h) != "" {
				t.Errorf("%s: %s sent beside the provider's signature", g.name, h)
			}
		}
		if g.hdr.Get("Idempotency-Key") == "" || g.hdr.Get("Hookwarden-Event-Id") == "" {
			t.Errorf("%s: Idempotency-Key or Hookwarden-Event-Id missing", g.name)
		}
	}
}

// TestCheckRefusesSignAs: check names the key path and the reason of a
// sign_as that cannot work, and exits non-zero; the secret is never shown.
func TestCheckRefusesSignAs(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`
database: { path: "hw.db" }
sources:
  - name: sg
    scheme: stripe
    secrets: ["whsec_x"]
    destinations:
      - { name: a, url: "http://127.0.0.1:3000/", sign_as: sendgrid, signing_secret: "sekrit-value" }
      - { name: b, url: "http://127.0.0.1:3000/", sign_as: github }
      - { name: c, url: "http://127.0.0.1:3000/", sign_as: mailgun, signing_secret: "sekrit-value" }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runBinIn(t, dir, nil, "check", "--config", cfg)
	if code == 0 {
		t.Fatalf("check exit 0 for refused sign_as:\n%s", out)
	}
	for _, want := range []string{
		"sources[0].destinations[0].sign_as: cannot sign as sendgrid",
		"sources[0].destinations[1].sign_as: needs signing_secret: the github secret",
		"sources[0].destinations[2].sign_as: cannot sign as mailgun: Mailgun's signature is inside the body",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sekrit-value") {
		t.Errorf("check shows the secret:\n%s", out)
	}
}
