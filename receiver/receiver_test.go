package receiver_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/internal/vectors"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// vector is one of the repository's test vectors: the same embedded file the
// signature package's tests read (internal/vectors).
type vector struct{ vectors.Vector }

func loadVectors(t *testing.T) []vector {
	t.Helper()
	vs, err := vectors.Load()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]vector, len(vs))
	for i, v := range vs {
		out[i] = vector{v}
	}
	return out
}

func (v vector) secrets(t *testing.T) []string {
	s, err := v.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openStore(t testing.TB) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "hw.db"), sqlitestore.Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// source builds a served source the way cmd/hookwarden does, from a scheme's
// preset.
func source(t testing.TB, name string, p signature.Params) receiver.Source {
	t.Helper()
	v, err := signature.New(p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	preset, _ := signature.PresetFor(p.Scheme)
	id, err := extract.Parse(preset.EventID)
	if err != nil {
		t.Fatal(err)
	}
	typ, err := extract.Parse(preset.EventType)
	if err != nil {
		typ, _ = extract.Parse("json:type")
	}
	return receiver.Source{Name: name, Scheme: p.Scheme, Verifier: v, EventID: id, EventType: typ, Batch: preset.Batch,
		Destinations: []receiver.Destination{{FullName: name + "/app"}}}
}

// quarantinedVectors are valid vectors without an event id where the preset
// looks for one: GitHub's docs vector has no X-GitHub-Delivery, Twilio's have
// no idempotency token or SID, SendGrid's SDK body is one object, not a batch.
var quarantinedVectors = map[string]bool{
	"github/official_docs_vector":      true,
	"twilio/official_form_vector":      true,
	"twilio/official_json_body_vector": true,
	"sendgrid/official_sdk_vector":     true,
}

// Every vector through the real HTTP receiver and a real store: valid ones
// are answered 200 and recorded, invalid ones 401 and not stored.
func TestVectorsThroughTheReceiver(t *testing.T) {
	store := openStore(t)
	vs := loadVectors(t)
	ran := 0
	for i, v := range vs {
		t.Run(v.Provider+"/"+v.Case, func(t *testing.T) {
			ran++
			name := fmt.Sprintf("v%d", i)
			p := signature.Params{Scheme: v.Provider, Secrets: v.secrets(t)}
			switch v.Provider {
			case "standard-webhooks", "svix":
				p.Scheme = "standard"
			case "generic-ts-body": // the generic convention of internal/vectors
				p.Scheme = "hmac"
				p.HMAC = signature.HMACParams{Header: "X-Webhook-Signature", Prefix: "sha256=",
					TimestampHeader: "X-Webhook-Timestamp", Signed: "{timestamp}.{body}"}
			}
			if v.ToleranceS != nil {
				p.Tolerance = time.Duration(*v.ToleranceS) * time.Second
			}
			target := "/hooks/" + name
			if v.URL != "" {
				u, err := url.Parse(v.URL)
				if err != nil {
					t.Fatal(err)
				}
				p.PublicURL = u.Scheme + "://" + u.Host + u.Path
				if u.RawQuery != "" {
					target += "?" + u.RawQuery
				}
			}
			now := time.Now()
			switch {
			case v.Now != nil:
				now = time.Unix(*v.Now, 0)
			case v.Timestamp != nil:
				now = time.Unix(*v.Timestamp, 0)
			}
			rc := receiver.New([]receiver.Source{source(t, name, p)}, receiver.Options{
				Recorder: store, Now: func() time.Time { return now },
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(v.Body))
			for k, val := range v.Headers {
				req.Header.Set(k, val)
			}
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, req)
			var ans struct{ Status string }
			_ = json.Unmarshal(w.Body.Bytes(), &ans)

			var receipts int
			store.DB().QueryRow(`SELECT count(*) FROM receipts WHERE source = ?`, name).Scan(&receipts)
			if v.Expected == "valid" {
				if w.Code != 200 {
					t.Fatalf("valid vector answered %d %s (%s)", w.Code, w.Body, v.Reason)
				}
				if receipts != 1 {
					t.Fatalf("valid vector stored %d receipts, want 1", receipts)
				}
				// Official vectors that carry no event id are stored and
				// quarantined, never dropped; every other one is a new event.
				want := "accepted"
				if quarantinedVectors[v.Provider+"/"+v.Case] {
					want = "quarantined"
				}
				if ans.Status != want {
					t.Fatalf("answer %q, want %q", ans.Status, want)
				}
			} else {
				if w.Code != 401 || ans.Status != "unauthorized" {
					t.Fatalf("invalid vector answered %d %s (%s)", w.Code, w.Body, v.Reason)
				}
				if receipts != 0 {
					t.Fatalf("refused request stored %d receipts; failed auth must store nothing", receipts)
				}
			}
		})
	}
	// Every vector ran, unless a -run pattern picked some subtests.
	if !strings.Contains(flag.Lookup("test.run").Value.String(), "/") && (ran != len(vs) || ran < vectors.Min) {
		t.Errorf("ran %d of %d vectors (want all, and at least %d)", ran, len(vs), vectors.Min)
	}
}

func TestSlackURLVerificationIsAnsweredWithoutAnEvent(t *testing.T) {
	store := openStore(t)
	p := signature.Params{Scheme: "slack", Secrets: []string{"8f742231b10e8888abcd99yyyzzz85a5"}}
	rc := receiver.New([]receiver.Source{source(t, "slack", p)}, receiver.Options{Recorder: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	body := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	h, err := signature.Sign(p, body, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/hooks/slack", strings.NewReader(string(body)))
	for k, v := range h {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	var got struct{ Challenge string }
	json.Unmarshal(w.Body.Bytes(), &got)
	if w.Code != 200 || got.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("got %d %s, want 200 with the challenge", w.Code, w.Body)
	}
	var events int
	store.DB().QueryRow(`SELECT count(*) FROM receipts`).Scan(&events)
	if events != 0 {
		t.Fatalf("url_verification stored %d receipts, want none", events)
	}
	// An unsigned challenge is refused like anything else.
	req = httptest.NewRequest(http.MethodPost, "/hooks/slack", strings.NewReader(string(body)))
	w = httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	if w.Code != 401 {
		t.Fatalf("unsigned challenge: %d, want 401", w.Code)
	}
}

func TestSendGridBatchYieldsOneEventPerElement(t *testing.T) {
	store := openStore(t)
	// The key pair of sendgrid-go's own tests is not needed: sign with a
	// generated one through the signature package's test helper is not
	// exported, so use the hmac-free path: a batch source with scheme none.
	src := source(t, "sg", signature.Params{Scheme: "none"})
	src.Batch = true
	src.EventID, _ = extract.Parse("json:sg_event_id")
	src.EventType, _ = extract.Parse("json:event")
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	post := func(body string) string {
		w := httptest.NewRecorder()
		rc.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/hooks/sg", strings.NewReader(body)))
		return w.Body.String()
	}
	post(`[{"sg_event_id":"a","event":"delivered"},{"sg_event_id":"b","event":"open"}]`)
	if got := post(`[{"sg_event_id":"b","event":"open"},{"sg_event_id":"c","event":"click"}]`); !strings.Contains(got, "accepted") {
		t.Fatalf("second batch: %s", got)
	}
	var events, jobs int
	store.DB().QueryRow(`SELECT count(*) FROM events WHERE source = 'sg'`).Scan(&events)
	store.DB().QueryRow(`SELECT count(*) FROM jobs`).Scan(&jobs)
	if events != 3 || jobs != 3 {
		t.Fatalf("events %d jobs %d, want 3 and 3 (b once)", events, jobs)
	}
}
