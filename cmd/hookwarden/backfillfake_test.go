package main

// Loopback fakes of the providers' APIs that backfill talks to, written
// from their documentation: Stripe's List all events (GET /v1/events,
// created[gte]/created[lte], limit, starting_after, types[], newest first,
// {"object":"list","data":[...],"has_more":...}, Bearer key, 401 and 429
// with the error object) and GitHub's hook deliveries (GET
// /repos/OWNER/REPO/hooks/ID/deliveries with per_page and a Link cursor,
// POST .../deliveries/ID/attempts answering 202 and sending the delivery
// again, signed, to the hook's URL).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
)

const fakeStripeKey = "rk_test_backfill_reader"

// fakeStripeEvent is one event of the fake's history.
type fakeStripeEvent struct {
	ID      string
	Type    string
	Created time.Time
}

// json is the event as the API returns it; the webhook of the same event
// carries other bytes (liveBody), as real ones may.
func (e fakeStripeEvent) json() []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"data":{"object":{"id":"in_%s","object":"invoice"}},"livemode":false,"pending_webhooks":0,"request":{"id":null},"type":%q}`,
		e.ID, e.Created.Unix(), e.ID, e.Type))
}

func (e fakeStripeEvent) liveBody() []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","created":%d,"type":%q,"data":{"object":{"id":"in_%s"}}}`,
		e.ID, e.Created.Unix(), e.Type, e.ID))
}

// fakeStripe serves GET /v1/events over its history, pageSize a page at
// most (fewer than limit is what the docs allow). fault, when set, may
// answer request n (from 1) itself.
type fakeStripe struct {
	*httptest.Server
	mu       sync.Mutex
	events   []fakeStripeEvent
	pageSize int
	requests []string // the query of each request
	fault    func(n int, w http.ResponseWriter, r *http.Request) bool
}

func newFakeStripe(t *testing.T, pageSize int) *fakeStripe {
	f := &fakeStripe{pageSize: pageSize}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeStripe) add(evs ...fakeStripeEvent) {
	f.mu.Lock()
	f.events = append(f.events, evs...)
	f.mu.Unlock()
}

func (f *fakeStripe) history() []fakeStripeEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeStripeEvent(nil), f.events...)
}

func (f *fakeStripe) setFault(fl func(n int, w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	f.fault, f.requests = fl, nil
	f.mu.Unlock()
}

func stripeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"type":%q,"message":%q}}`, typ, msg)
}

func (f *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.RawQuery)
	n, fault := len(f.requests), f.fault
	evs := append([]fakeStripeEvent(nil), f.events...)
	size := f.pageSize
	f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/v1/events" {
		stripeError(w, http.StatusNotFound, "invalid_request_error", "Unrecognized request URL")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+fakeStripeKey {
		stripeError(w, http.StatusUnauthorized, "invalid_request_error", "Invalid API Key provided: rk_test_****")
		return
	}
	if fault != nil && fault(n, w, r) {
		return
	}
	q := r.URL.Query()
	gte, _ := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	lte, err := strconv.ParseInt(q.Get("created[lte]"), 10, 64)
	if err != nil {
		lte = 1 << 62
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit < 1 || limit > 100 {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "limit must be between 1 and 100")
		return
	}
	types := q["types[]"]
	sort.Slice(evs, func(i, j int) bool {
		if !evs[i].Created.Equal(evs[j].Created) {
			return evs[i].Created.After(evs[j].Created)
		}
		return evs[i].ID > evs[j].ID
	})
	var sel []fakeStripeEvent
	for _, e := range evs {
		c := e.Created.Unix()
		if c < gte || c > lte || (len(types) > 0 && !contains(types, e.Type)) {
			continue
		}
		sel = append(sel, e)
	}
	if after := q.Get("starting_after"); after != "" {
		i := 0
		for i < len(sel) && sel[i].ID != after {
			i++
		}
		if i == len(sel) {
			stripeError(w, http.StatusBadRequest, "invalid_request_error", "No such event: "+after)
			return
		}
		sel = sel[i+1:]
	}
	size = min(size, limit)
	more := len(sel) > size
	if more {
		sel = sel[:size]
	}
	var b bytes.Buffer
	b.WriteString(`{"object":"list","url":"/v1/events","has_more":` + strconv.FormatBool(more) + `,"data":[`)
	for i, e := range sel {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e.json())
	}
	b.WriteString(`]}`)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b.Bytes())
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

const fakeGitHubToken = "github_pat_backfill"

// fakeDelivery is one delivery of the fake hook's history.
type fakeDelivery struct {
	ID          int64
	GUID        string
	DeliveredAt time.Time
	Event       string
	Body        []byte
}

// fakeGitHub serves a repository hook's deliveries and redelivers to hookURL.
type fakeGitHub struct {
	*httptest.Server
	mu          sync.Mutex
	deliveries  []fakeDelivery // newest first
	pageSize    int
	hookURL     string
	secret      string
	redelivered []string // guids, in order
}

func newFakeGitHub(t *testing.T, hookURL, secret string, pageSize int) *fakeGitHub {
	f := &fakeGitHub{hookURL: hookURL, secret: secret, pageSize: pageSize}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

const fakeHookPath = "/repos/octo/shop/hooks/12345678"

func ghError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q,"documentation_url":"https://docs.github.com/rest"}`, msg)
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+fakeGitHubToken {
		ghError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == fakeHookPath+"/deliveries":
		f.list(w, r)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, fakeHookPath+"/deliveries/") && strings.HasSuffix(r.URL.Path, "/attempts"):
		id, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, fakeHookPath+"/deliveries/"), "/attempts"), 10, 64)
		f.redeliver(w, id)
	default:
		ghError(w, http.StatusNotFound, "Not Found")
	}
}

func (f *fakeGitHub) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	ds := append([]fakeDelivery(nil), f.deliveries...)
	size := f.pageSize
	f.mu.Unlock()
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		start, _ = strconv.Atoi(c)
	}
	if pp, _ := strconv.Atoi(r.URL.Query().Get("per_page")); pp > 0 && pp < size {
		size = pp
	}
	end := min(start+size, len(ds))
	if end < len(ds) {
		w.Header().Set("Link", fmt.Sprintf(`<%s%s/deliveries?per_page=%d&cursor=%d>; rel="next"`, f.URL, fakeHookPath, size, end))
	}
	var out []map[string]any
	for _, d := range ds[start:end] {
		out = append(out, map[string]any{"id": d.ID, "guid": d.GUID, "delivered_at": d.DeliveredAt.UTC().Format(time.RFC3339),
			"redelivery": false, "duration": 0.27, "status": "failed to connect", "status_code": 0, "event": d.Event,
			"action": nil, "installation_id": nil, "repository_id": 42})
	}
	if out == nil {
		out = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// redeliver answers 202 once it has sent the delivery again, signed, with
// its original guid, as GitHub does.
func (f *fakeGitHub) redeliver(w http.ResponseWriter, id int64) {
	f.mu.Lock()
	var d *fakeDelivery
	for i := range f.deliveries {
		if f.deliveries[i].ID == id {
			d = &f.deliveries[i]
		}
	}
	f.mu.Unlock()
	if d == nil {
		ghError(w, http.StatusNotFound, "Not Found")
		return
	}
	if err := sendGitHub(f.hookURL, f.secret, *d); err != nil {
		ghError(w, http.StatusBadGateway, err.Error())
		return
	}
	f.mu.Lock()
	f.redelivered = append(f.redelivered, d.GUID)
	f.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	w.Write([]byte(`{}`))
}

// sendGitHub delivers d to the receiver as GitHub signs it.
func sendGitHub(url, secret string, d fakeDelivery) error {
	h, err := signature.Sign(signature.Params{Scheme: "github", Secrets: []string{secret}}, d.Body, time.Now(), d.GUID)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", d.Event)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return nil
}
