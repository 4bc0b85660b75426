package receiver_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
)

// countingObserver keeps what the receiver reported.
type countingObserver struct {
	mu           sync.Mutex
	quarantined  map[string]int
	unauthorized map[string]int
}

func (o *countingObserver) Request(string, string, time.Duration)          {}
func (o *countingObserver) Event(string, string, hookwarden.Outcome, bool) {}
func (o *countingObserver) Unauthorized(_, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unauthorized[reason]++
}
func (o *countingObserver) FilterError(string) {}
func (o *countingObserver) Quarantined(_, kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.quarantined[kind]++
}

// A real receiver on a real store: a github body under a fresh delivery id
// is held, and a Mailgun signature block on other data is refused with 401
// and leaves nothing in the store.
func TestReplaysAtTheReceiver(t *testing.T) {
	store := openStore(t)
	gh := signature.Params{Scheme: "github", Secrets: []string{"s"}}
	mg := signature.Params{Scheme: "mailgun", Secrets: []string{"k"}}
	ghSrc := source(t, "gh", gh)
	ghSrc.BodyReplayCheck = true
	obs := &countingObserver{quarantined: map[string]int{}, unauthorized: map[string]int{}}
	rc := receiver.New([]receiver.Source{ghSrc, source(t, "mg", mg)}, receiver.Options{Recorder: store, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	post := func(name string, h http.Header, body []byte) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "/hooks/"+name, strings.NewReader(string(body)))
		for k, v := range h {
			req.Header[k] = v
		}
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, req)
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	body := []byte(`{"zen":"x"}`)
	for _, c := range []struct {
		id, want string
	}{{"d-1", "accepted"}, {"d-2", "quarantined"}, {"d-1", "duplicate"}} {
		h, err := signature.Sign(gh, body, time.Now(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if code, got := post("gh", h, body); code != 200 || got != `{"status":"`+c.want+`"}` {
			t.Fatalf("github %s: %d %s, want 200 %s", c.id, code, got, c.want)
		}
	}

	h, signed, err := signature.SignBody(mg, []byte(`{"event-data":{"id":"e-1","event":"delivered"}}`), time.Now(), "tok-1")
	if err != nil {
		t.Fatal(err)
	}
	if code, got := post("mg", h, signed); code != 200 || !strings.Contains(got, "accepted") {
		t.Fatalf("mailgun: %d %s", code, got)
	}
	var before int
	store.DB().QueryRow(`SELECT count(*) FROM receipts`).Scan(&before)
	forged := strings.Replace(string(signed), `"delivered"`, `"failed"`, 1)
	forged = strings.Replace(forged, `"e-1"`, `"e-2"`, 1)
	if code, got := post("mg", h, []byte(forged)); code != 401 || !strings.Contains(got, "unauthorized") {
		t.Fatalf("mailgun forged: %d %s, want 401", code, got)
	}
	var after int
	store.DB().QueryRow(`SELECT count(*) FROM receipts`).Scan(&after)
	if after != before {
		t.Fatalf("receipts %d after a refused replay, want %d", after, before)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.quarantined["body_replayed"] != 1 || obs.unauthorized["replayed"] != 1 {
		t.Fatalf("observed quarantined %v, unauthorized %v", obs.quarantined, obs.unauthorized)
	}
}
