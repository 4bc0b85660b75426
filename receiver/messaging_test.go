package receiver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/batch"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// handshakes records what the receiver reports to a HandshakeObserver.
type handshakes struct {
	mu  sync.Mutex
	got []string
}

func (h *handshakes) Request(string, string, time.Duration)          {}
func (h *handshakes) Event(string, string, hookwarden.Outcome, bool) {}
func (h *handshakes) Unauthorized(string, string)                    {}
func (h *handshakes) Quarantined(string, string)                     {}
func (h *handshakes) FilterError(string)                             {}
func (h *handshakes) Handshake(source, kind, outcome string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, source+" "+kind+" "+outcome)
}

func (h *handshakes) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.got
	h.got = nil
	return g
}

// platform is a source of a messaging scheme served unsigned (scheme none
// verifies nothing), so these tests reach what comes after verification;
// the real schemes are checked through the binary (cmd/hookwarden).
func platform(t testing.TB, name, scheme string) receiver.Source {
	src := source(t, name, signature.Params{Scheme: "none"})
	src.Scheme, src.Split = scheme, batch.For(scheme)
	src.EventType, _ = extract.Parse("json:object")
	return src
}

type door struct {
	t     *testing.T
	rc    *receiver.Receiver
	store *sqlitestore.Store
	obs   *handshakes
}

func newDoor(t *testing.T, sources ...receiver.Source) *door {
	d := &door{t: t, store: openStore(t), obs: &handshakes{}}
	d.rc = receiver.New(sources, receiver.Options{Recorder: d.store, Observer: d.obs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return d
}

func (d *door) do(method, target, ctype, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	w := httptest.NewRecorder()
	d.rc.ServeHTTP(w, req)
	return w
}

func (d *door) count(q string) int {
	d.t.Helper()
	var n int
	if err := d.store.DB().QueryRow(q).Scan(&n); err != nil {
		d.t.Fatal(err)
	}
	return n
}

// The handshakes (SPEC 11) get the platform's exact answer, are counted,
// and are never events.
func TestHandshakesAtTheDoor(t *testing.T) {
	meta := platform(t, "wa", "meta")
	meta.VerifyToken = "meatyhamhock"
	unset := platform(t, "fb", "meta") // no verify_token: every GET refused
	x := platform(t, "x", "x")
	x.Secrets = []string{"z3ZX4v7mAAUGykl3EcmkqbartmuW8VFOOzCloLx9Q45P0hLrFu"}
	zoom := platform(t, "zoom", "zoom")
	zoom.Secrets = []string{"zoom_webhook_secret_token_0123"}
	d := newDoor(t, meta, unset, x, zoom, platform(t, "graph", "graph"), platform(t, "discord", "discord"),
		platform(t, "line", "line"), platform(t, "viber", "viber"), source(t, "plain", signature.Params{Scheme: "none"}))

	cases := []struct {
		name, method, target, body string
		code                       int
		ctype, answer, handshake   string
	}{
		{"meta verify", "GET", "/hooks/wa?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock", "",
			200, "text/plain; charset=utf-8", "1158201444", "wa verify answered"},
		{"meta wrong token", "GET", "/hooks/wa?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=wrong", "",
			403, "application/json", `{"status":"forbidden"}` + "\n", "wa verify refused"},
		{"meta no token configured", "GET", "/hooks/fb?hub.mode=subscribe&hub.challenge=1&hub.verify_token=", "",
			403, "application/json", `{"status":"forbidden"}` + "\n", "fb verify refused"},
		{"x crc", "GET", "/hooks/x?crc_token=9b4507b3-9040-4669-9ca3-6b94edb50553", "",
			200, "application/json", `{"response_token":"sha256=Cytd4Sq+NvEcV3MMrXxWJGJx5A+y/lXzzU2Maartkx8="}` + "\n", "x crc answered"},
		{"x crc without token", "GET", "/hooks/x", "", 400, "application/json", `{"status":"bad_request"}` + "\n", "x crc refused"},
		{"graph validation", "POST", "/hooks/graph?validationToken=Validation%3A%20Testing%20client%20application%20reachability", "",
			200, "text/plain; charset=utf-8", "Validation: Testing client application reachability", "graph validation answered"},
		{"graph validation too long", "POST", "/hooks/graph?validationToken=" + strings.Repeat("a", 1025), "",
			400, "application/json", `{"status":"bad_request"}` + "\n", "graph validation refused"},
		{"zoom url_validation", "POST", "/hooks/zoom", `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1700000000123,"event":"endpoint.url_validation"}`,
			200, "application/json", `{"encryptedToken":"64255dfa2cf85cfe2c3ad02dacfd98c00cce5f67af679b8da1906b173268d98d","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}` + "\n", "zoom url_validation answered"},
		{"discord interaction ping", "POST", "/hooks/discord", `{"application_id":"1","id":"787053080478613555","token":"T","type":1,"version":1}`,
			200, "application/json", `{"type":1}` + "\n", "discord ping answered"},
		{"discord webhook events ping", "POST", "/hooks/discord", `{"version":1,"application_id":"1","type":0}`,
			204, "", "", "discord ping answered"},
		{"line verify", "POST", "/hooks/line", `{"destination":"U0123","events":[]}`, 200, "application/json", `{"status":"ok"}` + "\n", "line verify answered"},
		{"viber webhook", "POST", "/hooks/viber", `{"event":"webhook","timestamp":1457764197627,"message_token":241256543215}`,
			200, "application/json", `{"status":"ok"}` + "\n", "viber webhook answered"},
		{"GET without a GET handshake", "GET", "/hooks/plain", "", 405, "application/json", `{"status":"method_not_allowed"}` + "\n", ""},
		{"GET on line", "GET", "/hooks/line", "", 405, "application/json", `{"status":"method_not_allowed"}` + "\n", ""},
	}
	for _, c := range cases {
		w := d.do(c.method, c.target, "", c.body)
		if w.Code != c.code || w.Header().Get("Content-Type") != c.ctype || w.Body.String() != c.answer {
			t.Errorf("%s: %d %q %q, want %d %q %q", c.name, w.Code, w.Header().Get("Content-Type"), w.Body.String(), c.code, c.ctype, c.answer)
		}
		if strings.HasPrefix(c.ctype, "text/plain") && w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", c.name)
		}
		got := d.obs.take()
		if (c.handshake == "" && len(got) != 0) || (c.handshake != "" && (len(got) != 1 || got[0] != c.handshake)) {
			t.Errorf("%s: handshakes counted %v, want %q", c.name, got, c.handshake)
		}
	}
	if n := d.count(`SELECT count(*) FROM receipts`) + d.count(`SELECT count(*) FROM events`); n != 0 {
		t.Errorf("handshakes left %d receipts and events, want none", n)
	}
}

const waBatch = `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"value":{"messaging_product":"whatsapp","contacts":[{"profile":{"name":"Jos\u00e9"}}],"messages":[%s],"statuses":[%s]},"field":"messages"}]}]}`

func waMsg(id, text string) string {
	return `{"from":"1650","id":"` + id + `","timestamp":"1","type":"text","text":{"body":"` + text + `"}}`
}

func waStatus(id, st string) string { return `{"id":"` + id + `","status":"` + st + `"}` }

func wab(msgs, statuses []string) string {
	return strings.Replace(strings.Replace(waBatch, "%s", strings.Join(msgs, ","), 1), "%s", strings.Join(statuses, ","), 1)
}

func counts(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var c struct {
		Status                      string
		Events, Accepted, Duplicate int
	}
	if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil {
		t.Fatalf("answer %q: %v", w.Body, err)
	}
	return strings.Join([]string{c.Status, strconv.Itoa(c.Events), strconv.Itoa(c.Accepted), strconv.Itoa(c.Duplicate)}, " ")
}

// One request, several events (SPEC 11): each claimed on its own id, the
// answer counts them, each new event is delivered as the envelope holding
// only it, byte for byte.
func TestMetaBatchPerEvent(t *testing.T) {
	d := newDoor(t, platform(t, "wa", "meta"))
	first := wab([]string{waMsg("wamid.A", `caf\u00e9`), waMsg("wamid.B", "crème")}, []string{waStatus("wamid.Z", "read")})
	w := d.do("POST", "/hooks/wa", "application/json", first)
	if w.Code != 200 || counts(t, w) != "accepted 3 3 0" {
		t.Fatalf("first batch: %d %s", w.Code, w.Body)
	}
	if w := d.do("POST", "/hooks/wa", "application/json", first); counts(t, w) != "duplicate 3 0 3" {
		t.Fatalf("resent: %s", w.Body)
	}
	mixed := wab([]string{waMsg("wamid.B", "crème"), waMsg("wamid.C", "new")}, []string{waStatus("wamid.Z", "read"), waStatus("wamid.Z", "delivered")})
	if w := d.do("POST", "/hooks/wa", "application/json", mixed); counts(t, w) != "accepted 4 2 2" {
		t.Fatalf("mixed: %s", w.Body)
	}
	jobs, err := d.store.Lease(context.Background(), "wa/app", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"wamid.A":           wab([]string{waMsg("wamid.A", `caf\u00e9`)}, nil),
		"wamid.B":           wab([]string{waMsg("wamid.B", "crème")}, nil),
		"wamid.Z:read":      wab(nil, []string{waStatus("wamid.Z", "read")}),
		"wamid.C":           wab([]string{waMsg("wamid.C", "new")}, nil),
		"wamid.Z:delivered": wab(nil, []string{waStatus("wamid.Z", "delivered")}),
	}
	// The other event array is left out, not emptied.
	for id, b := range want {
		if strings.HasPrefix(id, "wamid.Z") {
			want[id] = strings.Replace(b, `"messages":[],`, "", 1)
		} else {
			want[id] = strings.Replace(b, `,"statuses":[]`, "", 1)
		}
	}
	if len(jobs) != len(want) {
		t.Fatalf("%d jobs, want %d", len(jobs), len(want))
	}
	for _, j := range jobs {
		if string(j.Body) != want[j.EventID] {
			t.Errorf("job %s: %s\nwant %s", j.EventID, j.Body, want[j.EventID])
		}
	}
	var raw []byte
	if err := d.store.DB().QueryRow(`SELECT body FROM receipts ORDER BY id LIMIT 1`).Scan(&raw); err != nil || string(raw) != first {
		t.Errorf("receipt body %q, want the request byte for byte", raw)
	}
	if n := d.count(`SELECT count(*) FROM receipts`); n != 3 {
		t.Errorf("%d receipts, want 3 (one a request)", n)
	}
}

// The answers a platform waits for, after the commit.
func TestAnswersPlatformsWaitFor(t *testing.T) {
	dc := platform(t, "dc", "discord")
	dc6 := platform(t, "dc6", "discord")
	dc6.DeferredType = 6
	slack := source(t, "slack", signature.Params{Scheme: "none"})
	slack.Scheme = "slack"
	slack.EventID, _ = extract.Parse("form:trigger_id")
	graph := platform(t, "graph", "graph")
	tg := platform(t, "tg", "telegram")
	d := newDoor(t, dc, dc6, slack, graph, tg)

	cases := []struct {
		name, target, ctype, body string
		code                      int
		answer                    string
	}{
		{"discord interaction", "/hooks/dc", "application/json", `{"id":"111","type":2,"token":"T","data":{"name":"x"}}`, 200, `{"type":5}` + "\n"},
		{"discord interaction again", "/hooks/dc", "application/json", `{"id":"111","type":2,"token":"T","data":{"name":"x"}}`, 200, `{"type":5}` + "\n"},
		{"discord component, deferred_type 6", "/hooks/dc6", "application/json", `{"id":"222","type":3,"token":"T"}`, 200, `{"type":6}` + "\n"},
		{"discord webhook event", "/hooks/dc", "application/json", `{"version":1,"application_id":"1","type":1,"event":{"type":"APPLICATION_AUTHORIZED","timestamp":"2024"}}`, 204, ""},
		{"slack slash command", "/hooks/slack", "application/x-www-form-urlencoded", "command=%2Fweather&trigger_id=13345224609.738474920.8088930838d88f008e0", 200, ""},
		{"graph notification", "/hooks/graph", "application/json", `{"value":[{"id":"n1","clientState":"s"},{"clientState":"s","changeType":"updated"}]}`, 202, `{"status":"accepted","events":2,"accepted":2,"duplicate":0}` + "\n"},
		{"telegram", "/hooks/tg", "application/json", "{\"update_id\":10000,\n\"message\":{\"text\":\"hi\"}}", 200, `{"status":"accepted"}` + "\n"},
	}
	for _, c := range cases {
		w := d.do("POST", c.target, c.ctype, c.body)
		if w.Code != c.code || w.Body.String() != c.answer {
			t.Errorf("%s: %d %q, want %d %q", c.name, w.Code, w.Body, c.code, c.answer)
		}
		if strings.Contains(w.Body.String(), "method") {
			t.Errorf("%s: a Bot API method in the answer: %s", c.name, w.Body)
		}
	}
	var derived int
	if err := d.store.DB().QueryRow(`SELECT count(*) FROM events WHERE derived = 1`).Scan(&derived); err != nil || derived != 2 {
		t.Errorf("%d derived claims, want 2 (the webhook event, graph's item without id): %v", derived, err)
	}
	if n := d.count(`SELECT count(*) FROM events WHERE source = 'tg' AND event_id = '10000'`); n != 1 {
		t.Errorf("telegram update_id not claimed")
	}
}

// A request that cannot be split (not JSON, not the platform's shape, over
// batch.MaxEvents) is authentic: held for a human, never dropped and never
// a 200 accepted.
func TestUnsplittableRequestsQuarantined(t *testing.T) {
	d := newDoor(t, platform(t, "wa", "meta"), platform(t, "line", "line"))
	huge := make([]string, batch.MaxEvents+1)
	for i := range huge {
		huge[i] = `{"webhookEventId":"e` + strconv.Itoa(i) + `"}`
	}
	for _, c := range []struct{ src, body string }{
		{"wa", `not json`},
		{"wa", `{"object":"page","entry":{}}`},
		{"wa", `{"object":"page","entry":[]}`},
		{"line", `{"destination":"U","events":[` + strings.Join(huge, ",") + `]}`},
	} {
		w := d.do("POST", "/hooks/"+c.src, "application/json", c.body)
		if w.Code != 200 || w.Body.String() != `{"status":"quarantined"}`+"\n" {
			t.Errorf("%s %.40s: %d %s, want quarantined", c.src, c.body, w.Code, w.Body)
		}
	}
	if n := d.count(`SELECT count(*) FROM events`); n != 0 {
		t.Errorf("%d events claimed, want none", n)
	}
	if n := d.count(`SELECT count(*) FROM quarantine`); n != 4 {
		t.Errorf("%d held requests, want 4", n)
	}
}
