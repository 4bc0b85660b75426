package receiver_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
)

// eventObserver keeps the receiver's event and quarantine reports.
type eventObserver struct {
	countingObserver
	mu        sync.Mutex
	divergent int
}

func (o *eventObserver) Event(_, _ string, _ hookwarden.Outcome, divergent bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if divergent {
		o.divergent++
	}
}

// Twilio signs the URL and the decoded, sorted form parameters, not the
// bytes: a captured status callback re-encoded (pairs reordered, a letter
// percent-encoded, a pair repeated, a trailing "&", a pair glued into its
// neighbour's value) carries the same signature. Sent under fresh
// idempotency tokens, each is held as body_replayed, not delivered again;
// under the first one's token each is a duplicate that is not divergent,
// while a signed callback with another status under that token is.
func TestTwilioReencodedReplaysAreQuarantined(t *testing.T) {
	store := openStore(t)
	p := signature.Params{Scheme: "twilio", Secrets: []string{"auth-token"}, PublicURL: "https://hooks.example.com/hooks/tw"}
	src := source(t, "tw", p)
	src.BodyReplayCheck = true // as config sets it: the default id is an unsigned header
	obs := &eventObserver{countingObserver: countingObserver{quarantined: map[string]int{}, unauthorized: map[string]int{}}}
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	post := func(h http.Header, body string) string {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/hooks/tw", strings.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%q: %d %s", body, w.Code, w.Body)
		}
		return strings.TrimSpace(w.Body.String())
	}
	const body = "AccountSid=AC1&MessageSid=SM1&MessageStatus=delivered&To=%2B15555550100"
	h, err := signature.Sign(p, []byte(body), time.Now(), "tok-0")
	if err != nil {
		t.Fatal(err)
	}
	if got := post(h, body); got != `{"status":"accepted"}` {
		t.Fatalf("first copy: %s", got)
	}
	variants := map[string]string{
		"reordered":       "MessageStatus=delivered&To=%2B15555550100&AccountSid=AC1&MessageSid=SM1",
		"percent-encoded": "AccountSid=AC1&MessageSid=SM1&MessageStatus=%64elivered&To=%2B15555550100",
		"repeated pair":   body + "&MessageStatus=delivered",
		"trailing &":      body + "&",
		"glued pair":      "AccountSid=AC1MessageSidSM1&MessageStatus=delivered&To=%2B15555550100",
	}
	i := 0
	for name, v := range variants {
		i++
		hv := h.Clone()
		hv.Set("I-Twilio-Idempotency-Token", "tok-"+name)
		if got := post(hv, v); got != `{"status":"quarantined"}` {
			t.Errorf("%s under a fresh token: %s, want quarantined", name, got)
		}
		// The same again: the held copy's count, not a new receipt.
		if got := post(hv, v); got != `{"status":"quarantined"}` {
			t.Errorf("%s again: %s, want quarantined", name, got)
		}
		if got := post(h, v); got != `{"status":"duplicate"}` {
			t.Errorf("%s under the first token: %s, want duplicate", name, got)
		}
	}
	var jobs, held int
	if err := store.DB().QueryRow(`SELECT count(*) FROM jobs`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if err := store.DB().QueryRow(`SELECT count(*) FROM receipts WHERE kind = 'quarantined'`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if jobs != 1 || held != 1 {
		t.Fatalf("%d jobs and %d quarantined receipts, want 1 and 1 (one signed request, however encoded)", jobs, held)
	}
	obs.mu.Lock()
	q, div := obs.quarantined[hookwarden.QuarantineBodyReplayed], obs.divergent
	obs.mu.Unlock()
	if q != 2*len(variants) || div != 0 {
		t.Fatalf("body_replayed %d, divergent %d; want %d and 0", q, div, 2*len(variants))
	}

	// Another status of the same message, signed, under the first token: a
	// divergent duplicate, as for any scheme.
	other := strings.Replace(body, "delivered", "failed", 1)
	ho, err := signature.Sign(p, []byte(other), time.Now(), "tok-0")
	if err != nil {
		t.Fatal(err)
	}
	if got := post(ho, other); got != `{"status":"duplicate"}` {
		t.Fatalf("other status under the first token: %s", got)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.divergent != 1 {
		t.Fatalf("divergent %d after a signed copy with other content, want 1", obs.divergent)
	}
}

// Issue 46 point 5: with event_id "header:svix-id|header:webhook-id" and a
// webhook-* signature, only webhook-id is signed. A captured request sent
// again within the tolerance with a fresh svix-id is refused, not accepted
// as a new event; with svix-id repeating the signed id it is a duplicate.
func TestStandardFreshSvixIDIsRefused(t *testing.T) {
	store := openStore(t)
	p := signature.Params{Scheme: "standard", Secrets: []string{"whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	src := source(t, "std", p)
	id, err := extract.Parse("header:svix-id|header:webhook-id")
	if err != nil {
		t.Fatal(err)
	}
	src.EventID = id
	obs := &countingObserver{quarantined: map[string]int{}, unauthorized: map[string]int{}}
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	body := []byte(`{"type":"invoice.paid"}`)
	h, err := signature.Sign(p, body, time.Now(), "msg_1")
	if err != nil {
		t.Fatal(err)
	}
	post := func(svixID string) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/hooks/std", strings.NewReader(string(body)))
		for k, v := range h {
			req.Header[k] = v
		}
		if svixID != "" {
			req.Header.Set("svix-id", svixID)
		}
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	if code, got := post(""); code != 200 || got != `{"status":"accepted"}` {
		t.Fatalf("first copy: %d %s", code, got)
	}
	for i := range 3 {
		if code, got := post(fmt.Sprintf("msg_fresh_%d", i)); code != 401 {
			t.Fatalf("replay %d with a fresh svix-id: %d %s, want 401", i, code, got)
		}
	}
	if code, got := post("msg_1"); code != 200 || got != `{"status":"duplicate"}` {
		t.Fatalf("svix-id repeating the signed id: %d %s, want duplicate", code, got)
	}
	var jobs int
	if err := store.DB().QueryRow(`SELECT count(*) FROM jobs`).Scan(&jobs); err != nil || jobs != 1 {
		t.Fatalf("%d jobs (%v), want 1", jobs, err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.unauthorized["malformed"] != 3 {
		t.Fatalf("unauthorized %v, want 3 malformed", obs.unauthorized)
	}
}
