package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The platforms that never replay (SPEC 11), through the real binary.

const metaSecret = "meta-app-secret"

// metaSource is a WhatsApp source "wa" beside serveFiles' std source.
func metaSource(destURL string) string {
	return fmt.Sprintf(`  - name: wa
    scheme: meta
    secrets: [%q]
    verify_token: "meatyhamhock"
    destinations:
      - name: app
        url: %q
        backoff: { initial: 20ms, max: 200ms }
`, metaSecret, destURL)
}

func metaSign(body string) string {
	mac := hmac.New(sha256.New, []byte(metaSecret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

type hookAnswer struct {
	code  int
	ctype string
	body  string
}

func postHook(t *testing.T, url string, header map[string]string, body string) hookAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return hookAnswer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// A WhatsApp batch as Meta sends it: non-ASCII as \u escapes (and, to be
// sure nothing re-encodes, one raw UTF-8 message beside them).
func waBody(msgs ...string) string {
	return `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"Jos\u00e9"},"wa_id":"16505551234"}],"messages":[` +
		strings.Join(msgs, ",") + `]},"field":"messages"}]}]}`
}

func waMessage(id, text string) string {
	return `{"from":"16505551234","id":"` + id + `","timestamp":"1749416383","type":"text","text":{"body":"` + text + `"}}`
}

// collect waits until the app got n deliveries and returns them by
// Idempotency-Key; then it checks no more arrive while a later marker
// request is delivered.
func collect(t *testing.T, app *sink, n int) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for range n {
		r := app.wait(t)
		k := r.Header.Get("Idempotency-Key")
		got[k] = append(got[k], string(r.Body))
	}
	return got
}

func TestMetaThroughTheBinary(t *testing.T) {
	app := newSink(t)
	_, cfg, db, hook, adm := serveFiles(t, "")
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, metaSource(app.URL))
	startServe(t, cfg, hook, adm)
	url := "http://" + hook + "/hooks/wa"

	// The handshake, right and wrong.
	resp, err := http.Get(url + "?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "1158201444" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("verify: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	resp, err = http.Get(url + "?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=wrong")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || strings.Contains(string(b), "1158201444") {
		t.Fatalf("wrong token: %d %q, want 403 without the challenge", resp.StatusCode, b)
	}
	resp, err = http.Get("http://" + hook + "/hooks/std")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("GET on std: %d, want 405", resp.StatusCode)
	}
	if v := scrape(t, adm, `hookwarden_handshakes_total{kind="verify",outcome="answered",source="wa"}`); v != 1 {
		t.Errorf("handshakes answered: %v, want 1", v)
	}
	if v := scrape(t, adm, `hookwarden_handshakes_total{kind="verify",outcome="refused",source="wa"}`); v != 1 {
		t.Errorf("handshakes refused: %v, want 1", v)
	}

	// Unsigned, wrongly signed: 401, nothing stored.
	first := waBody(waMessage("wamid.A", `Ol\u00e1 caf\u00e9 \ud83d\ude00`), waMessage("wamid.B", "crème brûlée"), waMessage("wamid.C", "three"))
	for name, h := range map[string]map[string]string{
		"missing": nil, "wrong": {"X-Hub-Signature-256": metaSign(first + " ")},
	} {
		if a := postHook(t, url, h, first); a.code != 401 {
			t.Errorf("%s signature: %d %s, want 401", name, a.code, a.body)
		}
	}

	// A batch of three: one delivery each, the envelope holding only it.
	a := postHook(t, url, map[string]string{"X-Hub-Signature-256": metaSign(first)}, first)
	if a.code != 200 || a.body != `{"status":"accepted","events":3,"accepted":3,"duplicate":0}`+"\n" {
		t.Fatalf("batch: %d %s", a.code, a.body)
	}
	got := collect(t, app, 3)
	for _, m := range []struct{ id, msg string }{
		{"wamid.A", waMessage("wamid.A", `Ol\u00e1 caf\u00e9 \ud83d\ude00`)}, {"wamid.B", waMessage("wamid.B", "crème brûlée")},
		{"wamid.C", waMessage("wamid.C", "three")},
	} {
		if d := got["wa:"+m.id]; len(d) != 1 || d[0] != waBody(m.msg) {
			t.Errorf("%s delivered %q, want once, as %s", m.id, d, waBody(m.msg))
		}
	}
	// The same batch again: duplicate; old and new: only the new.
	if a := postHook(t, url, map[string]string{"X-Hub-Signature-256": metaSign(first)}, first); a.body != `{"status":"duplicate","events":3,"accepted":0,"duplicate":3}`+"\n" {
		t.Fatalf("resent: %d %s", a.code, a.body)
	}
	mixed := waBody(waMessage("wamid.C", "three"), waMessage("wamid.D", "four"))
	if a := postHook(t, url, map[string]string{"X-Hub-Signature-256": metaSign(mixed)}, mixed); a.body != `{"status":"accepted","events":2,"accepted":1,"duplicate":1}`+"\n" {
		t.Fatalf("mixed: %d %s", a.code, a.body)
	}
	if got := collect(t, app, 1); len(got["wa:wamid.D"]) != 1 || got["wa:wamid.D"][0] != waBody(waMessage("wamid.D", "four")) {
		t.Fatalf("mixed delivered %q, want only wamid.D", got)
	}

	// The receipt keeps the raw request byte for byte.
	code, out, errOut := runBin(t, "events", "show", "wa", "wamid.B", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("events show: %d %s", code, errOut)
	}
	var d struct {
		Body       []byte `json:"body"`
		Derived    bool   `json:"derived_id"`
		ReceiptLog []struct {
			Body []byte `json:"body"`
		} `json:"receipt_log"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.ReceiptLog) != 2 || !bytes.Equal(d.ReceiptLog[0].Body, []byte(first)) || d.Derived {
		t.Errorf("events show wamid.B: %d receipts, first %q, derived %v; want the raw request, twice", len(d.ReceiptLog), d.ReceiptLog, d.Derived)
	}

	// A change that is neither messages nor statuses: derived id, marked.
	other := `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"value":{"event":"VERIFIED_ACCOUNT"},"field":"account_update"}]}]}`
	if a := postHook(t, url, map[string]string{"X-Hub-Signature-256": metaSign(other)}, other); a.code != 200 || !strings.Contains(a.body, `"accepted":1`) {
		t.Fatalf("other change: %d %s", a.code, a.body)
	}
	collect(t, app, 1)
	code, out, _ = runBin(t, "events", "list", "--source", "wa", "--json", "--db", db)
	if code != 0 || strings.Count(out, `"derived_id":true`) != 1 {
		t.Errorf("events list: %d %s, want one derived_id", code, out)
	}
	sum := sha256.Sum256([]byte(`{"value":{"event":"VERIFIED_ACCOUNT"},"field":"account_update"}`))
	if code, out, _ := runBin(t, "events", "show", "wa", hex.EncodeToString(sum[:]), "--db", db); code != 0 || !strings.Contains(out, "derived") {
		t.Errorf("events show of the derived id: %d %s", code, out)
	}
}

// 64 concurrent copies of one WhatsApp batch: each event claimed once,
// delivered once.
func TestMetaConcurrentCopies(t *testing.T) {
	app := newSink(t)
	_, cfg, db, hook, adm := serveFiles(t, "")
	serveConfig(t, cfg, hook, adm, db, app.URL, []string{testSecret}, metaSource(app.URL))
	startServe(t, cfg, hook, adm)
	url := "http://" + hook + "/hooks/wa"
	var msgs []string
	for i := range 10 {
		msgs = append(msgs, waMessage(fmt.Sprint("wamid.", i), fmt.Sprintf(`m\u00e9ssage %d`, i)))
	}
	body := waBody(msgs...)
	sig := metaSign(body)
	var wg sync.WaitGroup
	answers := make([]hookAnswer, 64)
	for i := range 64 {
		wg.Go(func() { answers[i] = postHook(t, url, map[string]string{"X-Hub-Signature-256": sig}, body) })
	}
	wg.Wait()
	accepted := 0
	for _, a := range answers {
		var c struct{ Accepted, Duplicate int }
		if a.code != 200 || json.Unmarshal([]byte(a.body), &c) != nil || c.Accepted+c.Duplicate != 10 {
			t.Fatalf("answer %d %s", a.code, a.body)
		}
		accepted += c.Accepted
	}
	if accepted != 10 {
		t.Errorf("%d events accepted over 64 copies, want 10", accepted)
	}
	got := collect(t, app, 10)
	for i := range 10 {
		if d := got[fmt.Sprint("wa:wamid.", i)]; len(d) != 1 {
			t.Errorf("wamid.%d delivered %d times", i, len(d))
		}
	}
	// Nothing more comes: a marker event on std is delivered after them.
	resp, err := http.DefaultClient.Do(signed(t, "http://"+hook+"/hooks/std", "msg_marker", []byte(`{"type":"marker"}`), time.Now(), testSecret))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("marker: %v %v", resp, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for app.count() < 11 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := app.count(); n != 11 {
		t.Errorf("%d deliveries, want 10 and the marker", n)
	}
}
