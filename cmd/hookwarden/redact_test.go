package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestStoredHeadersRedactCredentials: through the real receiver and store,
// Authorization (Postmark's basic auth, still verified), Proxy-Authorization,
// Cookie, X-Api-Key and a redact_headers entry, in whatever case it is
// configured or sent, are stored as [redacted]; other headers are kept.
func TestStoredHeadersRedactCredentials(t *testing.T) {
	app := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	doc := fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
redact_headers: ["x-shop-TOKEN", "X-Second-Secret"]
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: app
        url: %q
  - name: pm
    scheme: postmark
    secrets: ["hook:s3cret-pass"]
    destinations:
      - name: app
        url: %q
`, db, testSecret, app.URL, app.URL)
	a := startAppYAML(t, doc, db)

	req := signed(t, a.hookURL(), "msg_redact", []byte(`{"type":"r"}`), time.Now(), testSecret)
	req.Header.Set("Proxy-Authorization", "Basic cHJveHk6cGFzcw==")
	req.Header.Set("Cookie", "session=cookie-value")
	req.Header.Set("X-Api-Key", "api-key-value")
	req.Header["x-SHOP-token"] = []string{"shop-token-value"} // sent as spelled
	req.Header["X-SECOND-SECRET"] = []string{"second-value"}
	req.Header.Set("X-Kept", "kept-value")
	if got := do(t, req); got.Code != 200 {
		t.Fatalf("std: %+v", got)
	}
	pm, _ := http.NewRequest(http.MethodPost, "http://"+a.HookAddr()+"/hooks/pm",
		strings.NewReader(`{"RecordType":"Delivery","MessageID":"m-1","DeliveredAt":"2026-01-01T00:00:00Z"}`))
	pm.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("hook:s3cret-pass")))
	if got := do(t, pm); got.Code != 200 || got.Status != "accepted" {
		t.Fatalf("postmark with its basic auth: %+v, want 200 accepted (verified from the real header)", got)
	}

	var stored []string
	rows, err := dbOf(a.Store).Query(`SELECT headers FROM receipts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, h)
	}
	rows.Close()
	if len(stored) != 2 {
		t.Fatalf("%d receipts, want 2", len(stored))
	}
	all := strings.Join(stored, "\n")
	for _, secret := range []string{"cHJveHk6cGFzcw==", "cookie-value", "api-key-value", "shop-token-value", "second-value",
		base64.StdEncoding.EncodeToString([]byte("hook:s3cret-pass"))} {
		if strings.Contains(all, secret) {
			t.Errorf("stored headers hold %q:\n%s", secret, all)
		}
	}
	for _, line := range []string{"Proxy-Authorization: [redacted]", "Cookie: [redacted]", "X-Api-Key: [redacted]",
		"X-Shop-Token: [redacted]", "X-Second-Secret: [redacted]", "X-Kept: kept-value", "Webhook-Signature: v1,"} {
		if !strings.Contains(stored[0], line) {
			t.Errorf("std receipt headers lack %q:\n%s", line, stored[0])
		}
	}
	if !strings.Contains(stored[1], "Authorization: [redacted]") {
		t.Errorf("postmark receipt headers:\n%s", stored[1])
	}
}

// TestUnknownSourcesDoNotGrowLabels: requests to attacker-chosen paths are
// counted under source="", so they add no series to requests_total.
func TestUnknownSourcesDoNotGrowLabels(t *testing.T) {
	a := startApp(t, newSink(t).URL, "")
	series := func() int {
		mfs, err := a.Metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "hookwarden_requests_total" {
				return len(mf.GetMetric())
			}
		}
		return 0
	}
	if got := a.post("msg_known", `{"type":"k"}`); got.Code != 200 {
		t.Fatalf("known source: %+v", got)
	}
	if got := do(t, signed(t, "http://"+a.HookAddr()+"/hooks/probe-0", "m", []byte(`{}`), time.Now(), testSecret)); got.Code != 404 {
		t.Fatalf("unknown source: %+v, want 404", got)
	}
	base := series()
	for i := 1; i <= 30; i++ {
		if got := do(t, signed(t, fmt.Sprintf("http://%s/hooks/probe-%d", a.HookAddr(), i), "m", []byte(`{}`), time.Now(), testSecret)); got.Code != 404 {
			t.Fatalf("unknown source %d: %+v, want 404", i, got)
		}
	}
	if got := series(); got != base {
		t.Fatalf("requests_total has %d series after 30 unknown paths, %d before", got, base)
	}
	if got := a.metric("hookwarden_requests_total", "source", "", "outcome", "not_found"); got != 31 {
		t.Fatalf(`requests_total{source="",outcome="not_found"} = %v, want 31`, got)
	}
	mfs, _ := a.Metrics.Registry.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.HasPrefix(lp.GetValue(), "probe-") {
					t.Fatalf("%s carries the attacker's path as a label: %v", mf.GetName(), labelsOf(m))
				}
			}
		}
	}
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, lp := range m.GetLabel() {
		out[lp.GetName()] = lp.GetValue()
	}
	return out
}
