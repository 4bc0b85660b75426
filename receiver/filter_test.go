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
	"github.com/hookwarden/hookwarden/internal/filter"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/receiver"
	"github.com/hookwarden/hookwarden/sqlitestore"
)

// filterObserver counts filter errors per destination.
type filterObserver struct {
	mu     sync.Mutex
	errors map[string]int
}

func (o *filterObserver) Request(string, string, time.Duration)          {}
func (o *filterObserver) Event(string, string, hookwarden.Outcome, bool) {}
func (o *filterObserver) Unauthorized(string, string)                    {}
func (o *filterObserver) Quarantined(string, string)                     {}
func (o *filterObserver) FilterError(d string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errors[d]++
}

func (o *filterObserver) count(d string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.errors[d]
}

func mustFilter(t *testing.T, expr string) *filter.Filter {
	t.Helper()
	f, err := filter.Compile(expr)
	if err != nil {
		t.Fatalf("Compile(%q): %v", expr, err)
	}
	return f
}

// filterSetup is an unsigned source "f" (json:id, json:type) with the given
// destinations and filters (name -> expression, "" for none), a real store,
// and a receiver counting filter errors.
func filterSetup(t *testing.T, batch bool, dests ...string) (*receiver.Receiver, *sqlitestore.Store, *filterObserver) {
	t.Helper()
	store := openStore(t)
	src := source(t, "f", signature.Params{Scheme: "none"})
	src.Batch = batch
	src.EventID, _ = extract.Parse("json:id")
	src.EventType, _ = extract.Parse("json:type")
	src.Destinations = nil
	for i := 0; i < len(dests); i += 2 {
		d := receiver.Destination{FullName: "f/" + dests[i]}
		if dests[i+1] != "" {
			d.Filter = mustFilter(t, dests[i+1])
		}
		src.Destinations = append(src.Destinations, d)
	}
	obs := &filterObserver{errors: map[string]int{}}
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return rc, store, obs
}

func postF(t *testing.T, rc *receiver.Receiver, body string, header ...string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/hooks/f", strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "accepted") {
		t.Fatalf("POST %s: %d %s", body, w.Code, w.Body)
	}
}

// jobsFor lists the event ids with a job at a destination, in id order.
func jobsFor(t *testing.T, s *sqlitestore.Store, dest string) string {
	t.Helper()
	rows, err := s.DB().Query(`SELECT e.event_id FROM jobs j JOIN events e ON e.id = j.event_ref
		WHERE j.destination = ? ORDER BY e.event_id`, dest)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	return strings.Join(ids, ",")
}

// A filter decides which destinations get a job, per event, through the real
// receiver and store; a destination without one gets every event.
func TestFilterCreatesJobsOnlyWhereTrue(t *testing.T) {
	rc, store, obs := filterSetup(t, false,
		"all", "",
		"live", `body.livemode && event.type.startsWith("invoice.")`,
		"big", `body.data.amount > 1000 && event.source == "f"`,
		"tagged", `"x-tag" in headers && headers["x-tag"] == "blue, green"`,
		"text", `body == null`)
	postF(t, rc, `{"id":"e1","type":"invoice.paid","livemode":true,"data":{"amount":2000}}`, "X-Tag", "blue", "X-Tag", "green")
	postF(t, rc, `{"id":"e2","type":"invoice.paid","livemode":false,"data":{"amount":10}}`, "X-Tag", "blue")
	postF(t, rc, `{"id":"e3","type":"customer.created","livemode":true,"data":{"amount":1001}}`)
	for dest, want := range map[string]string{"all": "e1,e2,e3", "live": "e1", "big": "e1,e3", "tagged": "e1", "text": ""} {
		if got := jobsFor(t, store, "f/"+dest); got != want {
			t.Errorf("jobs at %s: %q, want %q", dest, got, want)
		}
	}
	for _, d := range []string{"all", "live", "big", "tagged", "text"} {
		if n := obs.count("f/" + d); n != 0 {
			t.Errorf("filter errors at %s: %d, want 0", d, n)
		}
	}
}

// An evaluation error (a missing key, a wrong type, the cost limit) creates
// the job and is counted for its destination only.
func TestFilterErrorDeliversAndIsCounted(t *testing.T) {
	rc, store, obs := filterSetup(t, false,
		"missing", `body.data.object.livemode`,
		"wrongtype", `body.data.amount > 1000`,
		"costly", `body.l.all(x, body.l.all(y, x == y))`,
		"fine", `event.type == "a"`)
	list := `[` + strings.Repeat(`1,`, 1999) + `1]`
	postF(t, rc, `{"id":"e1","type":"a","data":{"amount":"lots"},"l":`+list+`}`)
	postF(t, rc, `{"id":"e2","type":"b","data":{"amount":5},"l":[1,1]}`)
	want := map[string]struct {
		jobs   string
		errors int
	}{
		"missing":   {"e1,e2", 2}, // no object in either
		"wrongtype": {"e1", 1},    // "lots" > 1000 fails; 5 > 1000 is false
		"costly":    {"e1,e2", 1}, // e1's 2,000² comparisons pass the limit; e2's 4 pass
		"fine":      {"e1", 0},
	}
	for dest, w := range want {
		if got := jobsFor(t, store, "f/"+dest); got != w.jobs {
			t.Errorf("jobs at %s: %q, want %q", dest, got, w.jobs)
		}
		if n := obs.count("f/" + dest); n != w.errors {
			t.Errorf("filter errors at %s: %d, want %d", dest, n, w.errors)
		}
	}
}

// In a batch each element is the body its own filters see; the headers are
// the request's.
func TestFilterSeesEachBatchElement(t *testing.T) {
	rc, store, obs := filterSetup(t, true,
		"opens", `body.type == "open" && headers["x-batch"] == "1"`,
		"clicks", `body.url.startsWith("https://")`)
	postF(t, rc, `[{"id":"a","type":"open"},{"id":"b","type":"click","url":"https://x"},`+
		`{"id":"c","type":"open"},{"id":"d","type":"click","url":"http://y"}]`, "X-Batch", "1")
	if got := jobsFor(t, store, "f/opens"); got != "a,c" {
		t.Errorf("opens: %q, want a,c", got)
	}
	// a and c have no url: an error each, so they are delivered.
	if got := jobsFor(t, store, "f/clicks"); got != "a,b,c" {
		t.Errorf("clicks: %q, want a,b,c", got)
	}
	if n := obs.count("f/clicks"); n != 2 {
		t.Errorf("errors at clicks: %d, want 2", n)
	}
}

// Filters swap with the sources: a reload's filter applies to the next
// request.
func TestFilterFollowsSetSources(t *testing.T) {
	rc, store, _ := filterSetup(t, false, "app", `event.type == "a"`)
	postF(t, rc, `{"id":"e1","type":"b"}`)
	src := source(t, "f", signature.Params{Scheme: "none"})
	src.EventID, _ = extract.Parse("json:id")
	src.EventType, _ = extract.Parse("json:type")
	src.Destinations = []receiver.Destination{{FullName: "f/app", Filter: mustFilter(t, `event.type == "b"`)}}
	rc.SetSources([]receiver.Source{src})
	postF(t, rc, `{"id":"e2","type":"b"}`)
	if got := jobsFor(t, store, "f/app"); got != "e2" {
		t.Errorf("jobs: %q, want e2", got)
	}
}

// A filter failing on every event warns once a minute per destination, with
// the count since the last warning; the rest go to DEBUG.
func TestFilterErrorWarningsAreRateLimited(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	src := source(t, "f", signature.Params{Scheme: "none"})
	src.EventID, _ = extract.Parse("json:id")
	src.EventType, _ = extract.Parse("json:type")
	src.Destinations = []receiver.Destination{{FullName: "f/app", Filter: mustFilter(t, `body.nope`)}}
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: openStore(t),
		Now:    func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, b: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for i := range 3 {
		postF(t, rc, fmt.Sprintf(`{"id":"e%d"}`, i))
	}
	mu.Lock()
	now = now.Add(61 * time.Second)
	mu.Unlock()
	postF(t, rc, `{"id":"e3"}`)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if n := strings.Count(out, "level=WARN msg=\"filter failed"); n != 2 {
		t.Errorf("%d WARN lines, want 2:\n%s", n, out)
	}
	if n := strings.Count(out, "level=DEBUG msg=\"filter failed"); n != 2 {
		t.Errorf("%d DEBUG lines, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "errors_since_last_warning=3") {
		t.Errorf("second warning does not count the 3 errors since the first:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// refusalObserver also counts the decode refusals.
type refusalObserver struct {
	filterObserver
	refused map[string]int
}

func (o *refusalObserver) FilterRefused(d string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused[d]++
}

// Issue 46 point 4: a filter that reads the whole body (size(body)) of a
// large body is refused by the decode bounds instead of decoding it: the
// job is created, as for any filter error, and the refusal is counted as
// one. A filter reading one small member of the same body still decides.
func TestFilterDecodeBoundsAtTheReceiver(t *testing.T) {
	store := openStore(t)
	src := source(t, "f", signature.Params{Scheme: "none"})
	src.Destinations = []receiver.Destination{
		{FullName: "f/whole", Filter: mustFilter(t, `size(body) > 100`)},
		{FullName: "f/member", Filter: mustFilter(t, `body.type == "other"`)},
	}
	obs := &refusalObserver{filterObserver: filterObserver{errors: map[string]int{}}, refused: map[string]int{}}
	rc := receiver.New([]receiver.Source{src}, receiver.Options{Recorder: store, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	body := `{"id":"e-1","type":"t","items":[` + strings.Repeat(`{"n":1},`, 20000) + `{"n":1}]}`
	req := httptest.NewRequest(http.MethodPost, "/hooks/f", strings.NewReader(body))
	w := httptest.NewRecorder()
	rc.ServeHTTP(w, req)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "accepted") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var dests []string
	rows, err := store.DB().Query(`SELECT destination FROM jobs ORDER BY destination`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		dests = append(dests, d)
	}
	if fmt.Sprint(dests) != "[f/whole]" {
		t.Fatalf("jobs at %v, want [f/whole] (refused: delivered; the member filter said no)", dests)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.errors["f/whole"] != 1 || obs.refused["f/whole"] != 1 || obs.errors["f/member"] != 0 || obs.refused["f/member"] != 0 {
		t.Fatalf("errors %v, refused %v; want one of each at f/whole", obs.errors, obs.refused)
	}
}
