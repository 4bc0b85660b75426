package admin

// The JSON API (docs/reference.md, "Admin server"), on the admin listener behind the token:
//
//	GET  /api/events                      ?source= &status= &type= &since= &limit= &cursor=
//	GET  /api/events/{source}/{event_id}
//	GET  /api/dead                        ?source= &destination= &since= &limit= &cursor=
//	POST /api/replay                      {"source","event_ids"} | {"dead":true,...} | {"job_ids"}
//	GET  /api/gaps                        ?since= &min=
//	GET  /api/stats
//	GET  /api/quarantine                  ?source= &limit= &cursor=
//	GET  /api/destinations, POST /api/destinations/{source}/{name}/pause|resume (flow.go)
//	POST /api/backfill                    {"source","from","to"} → 202 {"id","status":"running"}, 409 while one runs
//
// Lists answer {"items": [...], "next_cursor": "..."}; pass next_cursor back
// as ?cursor= for the next page (absent on the last page).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/gorilla/mux"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/config"
)

// Store is the part of the store contract (hookwarden.Store) the API uses.
type Store interface {
	ListEvents(ctx context.Context, f hookwarden.EventFilter) ([]hookwarden.EventSummary, int64, error)
	ShowEvent(ctx context.Context, source, eventID string) (*hookwarden.EventDetail, error)
	ListDead(ctx context.Context, f hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error)
	Replay(ctx context.Context, sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) (hookwarden.ReplayResult, error)
	Gaps(ctx context.Context, opt hookwarden.GapOptions) (hookwarden.GapReport, error)
	BackfillRuns(ctx context.Context, sources []string, since time.Time) ([]hookwarden.BackfillRun, error)
	Stats(ctx context.Context, sources, destinations []string) (hookwarden.Stats, error)
	Hourly(ctx context.Context, sources []string, since time.Time) (map[string][]hookwarden.HourCount, error)
	ListQuarantine(ctx context.Context, f hookwarden.QuarantineFilter) ([]hookwarden.Held, int64, error)
	FlowStore
}

var _ Store = hookwarden.Store(nil)

// APIOptions configure the JSON API.
type APIOptions struct {
	Store Store
	// Sources and Destinations return the running configuration's view; they
	// are called per request, so a reload is seen at once. Either may be nil.
	Sources      func() []hookwarden.SourcePolicy
	Destinations func() []string
	// Rates maps each destination to its configured rate ("20/s"; absent:
	// none), for GET /api/destinations. Optional.
	Rates func() map[string]string
	// Stale and MinClean are passed to Gaps (see hookwarden.GapOptions).
	Stale, MinClean time.Duration
	// Notify wakes the workers of the destinations a replay made due, so they
	// do not wait for their next poll. Optional.
	Notify func(destinations ...string)
	// Backfill starts a backfill of the window in the background and returns
	// its run's id; hookwarden.ErrBackfillRunning answers 409, ErrNotFound
	// 404, a BadRequest error 400. Nil: POST /api/backfill answers 404.
	Backfill func(ctx context.Context, source string, from, to time.Time, audit *hookwarden.AuditEntry) (int64, error)
	Logger   *slog.Logger
	// Now is the clock of ?since= (default time.Now).
	Now func() time.Time
}

// API serves the JSON API.
type API struct{ o APIOptions }

// maxReplayBody caps a POST /api/replay body.
const maxReplayBody = 1 << 20

// NewAPI returns the API; Register mounts it.
func NewAPI(o APIOptions) *API {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &API{o: o}
}

// Register adds the routes to r, normally Admin.Router() (token-guarded).
func (api *API) Register(r *mux.Router) {
	r.HandleFunc("/api/events", api.events).Methods(http.MethodGet)
	r.HandleFunc("/api/events/{source}/{event_id:.+}", api.event).Methods(http.MethodGet)
	r.HandleFunc("/api/dead", api.dead).Methods(http.MethodGet)
	r.HandleFunc("/api/replay", api.replay).Methods(http.MethodPost)
	r.HandleFunc("/api/gaps", api.gaps).Methods(http.MethodGet)
	r.HandleFunc("/api/stats", api.stats).Methods(http.MethodGet)
	r.HandleFunc("/api/quarantine", api.quarantine).Methods(http.MethodGet)
	api.registerFlow(r) // flow.go
	r.HandleFunc("/api/backfill", api.backfill).Methods(http.MethodPost)
}

// page is the shape of every list answer.
type page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func newPage[T any](items []T, next int64) page[T] {
	p := page[T]{Items: items}
	if p.Items == nil {
		p.Items = []T{}
	}
	if next != 0 {
		p.NextCursor = strconv.FormatInt(next, 10)
	}
	return p
}

// badRequest is a client error whose message is safe to show.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// BadRequest marks err as the client's mistake: its message is answered with 400.
func BadRequest(err error) error { return &badRequest{err.Error()} }

// fail answers an error: the client's own mistakes are explained, internal
// ones are logged and answered without details.
func (api *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var br *badRequest
	switch {
	case errors.As(err, &br):
		WriteJSON(w, http.StatusBadRequest, map[string]string{"status": "bad_request", "error": br.msg})
	case errors.Is(err, hookwarden.ErrNotFound):
		WriteJSON(w, http.StatusNotFound, map[string]string{"status": "not_found"})
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
	default:
		api.o.Logger.Error("admin api", "path", r.URL.Path, "err", err)
		WriteJSON(w, http.StatusInternalServerError, map[string]string{"status": "error"})
	}
}

type query struct {
	r   *http.Request
	err error
}

func (q *query) str(name string) string { return q.r.URL.Query().Get(name) }

func (q *query) int64(name string) int64 {
	s := q.str(name)
	if s == "" || q.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		q.err = badf("%s: want a non-negative integer", name)
	}
	return n
}

// since reads a duration ("90m", "7d") and returns now minus it.
func (q *query) since(name string, now time.Time) time.Time {
	d := q.duration(name)
	if d == 0 {
		return time.Time{}
	}
	return now.Add(-d)
}

func (q *query) duration(name string) time.Duration {
	s := q.str(name)
	if s == "" || q.err != nil {
		return 0
	}
	d, err := config.ParseDuration(s)
	if err != nil {
		q.err = badf("%s: %v", name, err)
	}
	return d.D()
}

func (api *API) events(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	status, err := hookwarden.ParseStatus(q.str("status"))
	if err != nil {
		api.fail(w, r, badf("status: %v", err))
		return
	}
	f := hookwarden.EventFilter{Source: q.str("source"), Type: q.str("type"), Status: status,
		Since: q.since("since", api.o.Now()), Limit: int(q.int64("limit")), Cursor: q.int64("cursor")}
	if q.err != nil {
		api.fail(w, r, q.err)
		return
	}
	items, next, err := api.o.Store.ListEvents(r.Context(), f)
	if err != nil {
		api.fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, newPage(items, next))
}

func (api *API) event(w http.ResponseWriter, r *http.Request) {
	v := mux.Vars(r)
	d, err := api.o.Store.ShowEvent(r.Context(), v["source"], v["event_id"])
	if err != nil {
		api.fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, d)
}

func (api *API) dead(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	f := hookwarden.DeadFilter{Source: q.str("source"), Destination: q.str("destination"),
		Since: q.since("since", api.o.Now()), Limit: int(q.int64("limit")), Cursor: q.int64("cursor")}
	if q.err != nil {
		api.fail(w, r, q.err)
		return
	}
	items, next, err := api.o.Store.ListDead(r.Context(), f)
	if err != nil {
		api.fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, newPage(items, next))
}

// replayRequest is the body of POST /api/replay.
type replayRequest struct {
	Source      string   `json:"source"`
	EventIDs    []string `json:"event_ids"`
	Dead        bool     `json:"dead"`
	JobIDs      []int64  `json:"job_ids"`
	Destination string   `json:"destination"`
	Since       string   `json:"since"` // with dead: a duration, "7d"
	Force       bool     `json:"force"`
}

// apiCross is the dashboard's defence for the API's state-changing routes:
// Sec-Fetch-Site when the browser sends it, else Origin against Host (an
// older browser, or one that sends no Sec-Fetch-Site to plain http). A
// request with neither is no browser's and passes: it carries the token.
var apiCross = http.NewCrossOriginProtection()

// refuseCrossOrigin answers 403 to a request from another site or origin.
func refuseCrossOrigin(w http.ResponseWriter, r *http.Request) bool {
	if apiCross.Check(r) == nil {
		return false
	}
	WriteJSON(w, http.StatusForbidden, map[string]string{"status": "forbidden", "error": "cross-origin request"})
	return true
}

func (api *API) replay(w http.ResponseWriter, r *http.Request) {
	// The dashboard authenticates with a cookie, so this state-changing
	// route must not be reachable from another site's form: a form cannot
	// send application/json without a CORS preflight, which is never granted,
	// and browsers say when a request is cross-site.
	if refuseCrossOrigin(w, r) {
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		WriteJSON(w, http.StatusUnsupportedMediaType, map[string]string{"status": "bad_request", "error": "want Content-Type: application/json"})
		return
	}
	var req replayRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxReplayBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		api.fail(w, r, badf("body: %v", err))
		return
	}
	sel := hookwarden.ReplaySelector{Source: req.Source, EventIDs: req.EventIDs, Dead: req.Dead, JobIDs: req.JobIDs,
		Destination: req.Destination}
	n := 0
	for _, b := range []bool{req.Dead, len(req.EventIDs) > 0, len(req.JobIDs) > 0} {
		if b {
			n++
		}
	}
	switch {
	case n != 1:
		api.fail(w, r, badf(`want exactly one of "dead": true, "event_ids" (with "source") or "job_ids"`))
		return
	case len(req.EventIDs) > 0 && req.Source == "":
		api.fail(w, r, badf(`"event_ids" need "source"`))
		return
	case req.Since != "" && !req.Dead:
		api.fail(w, r, badf(`"since" goes with "dead"`))
		return
	}
	if req.Since != "" {
		d, err := config.ParseDuration(req.Since)
		if err != nil {
			api.fail(w, r, badf("since: %v", err))
			return
		}
		sel.Since = api.o.Now().Add(-d.D())
	}
	// A replay in flight finishes even if the client disconnects: its
	// batches are committed one by one and a half-done replay is confusing.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Minute)
	defer cancel()
	res, err := api.o.Store.Replay(ctx, sel, hookwarden.ReplayOptions{Force: req.Force,
		Audit: &hookwarden.AuditEntry{Origin: hookwarden.AuditAPI, Actor: r.RemoteAddr}})
	if err != nil {
		api.fail(w, r, err)
		return
	}
	if api.o.Notify != nil && len(res.Destinations) > 0 {
		api.o.Notify(res.Destinations...)
	}
	api.o.Logger.Info("replay from the admin API", "selected", res.Selected, "replayed", res.Replayed,
		"skipped", len(res.Skipped), "remote", r.RemoteAddr)
	WriteJSON(w, http.StatusOK, res)
}

func (api *API) gaps(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	opt := hookwarden.GapOptions{Since: q.since("since", api.o.Now()), MinClean: api.o.MinClean, Stale: api.o.Stale}
	if d := q.duration("min"); d > 0 {
		opt.MinClean = d
	}
	if q.err != nil {
		api.fail(w, r, q.err)
		return
	}
	if api.o.Sources != nil {
		opt.Sources = api.o.Sources()
	}
	rep, err := hookwarden.GapsWithRecovery(r.Context(), api.o.Store, opt)
	if err != nil {
		api.fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, rep)
}

// backfillRequest is the body of POST /api/backfill.
type backfillRequest struct {
	Source string    `json:"source"`
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
}

// backfill starts a backfill of one window (docs/backfill.md); the run goes
// on in the background, and gaps shows its result with the window.
func (api *API) backfill(w http.ResponseWriter, r *http.Request) {
	// The same cross-site defences as replay: a state-changing route.
	if refuseCrossOrigin(w, r) {
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		WriteJSON(w, http.StatusUnsupportedMediaType, map[string]string{"status": "bad_request", "error": "want Content-Type: application/json"})
		return
	}
	if api.o.Backfill == nil {
		WriteJSON(w, http.StatusNotFound, map[string]string{"status": "not_found"})
		return
	}
	var req backfillRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		api.fail(w, r, badf("body: %v (want {\"source\",\"from\",\"to\"}, times in RFC 3339)", err))
		return
	}
	if req.Source == "" || req.From.IsZero() || req.To.IsZero() || !req.From.Before(req.To) {
		api.fail(w, r, badf(`want "source", and "from" before "to" (RFC 3339)`))
		return
	}
	id, err := api.o.Backfill(r.Context(), req.Source, req.From, req.To,
		&hookwarden.AuditEntry{Origin: hookwarden.AuditAPI, Actor: r.RemoteAddr})
	if errors.Is(err, hookwarden.ErrBackfillRunning) {
		WriteJSON(w, http.StatusConflict, map[string]string{"status": "conflict", "error": err.Error()})
		return
	}
	if err != nil {
		api.fail(w, r, err)
		return
	}
	api.o.Logger.Info("backfill from the admin API", "source", req.Source, "from", req.From, "to", req.To, "run", id, "remote", r.RemoteAddr)
	WriteJSON(w, http.StatusAccepted, map[string]any{"id": id, "status": "running"})
}

func (api *API) stats(w http.ResponseWriter, r *http.Request) {
	var sources, dests []string
	if api.o.Sources != nil {
		for _, s := range api.o.Sources() {
			sources = append(sources, s.Name)
		}
	}
	if api.o.Destinations != nil {
		dests = api.o.Destinations()
	}
	st, err := api.o.Store.Stats(r.Context(), sources, dests)
	if err != nil {
		api.fail(w, r, err)
		return
	}
	names := make([]string, len(st.Sources))
	for i, s := range st.Sources {
		names[i] = s.Source
	}
	// The dashboard chart's series: every source's hours of the last 7
	// days that had traffic, oldest first.
	hourly, err := api.o.Store.Hourly(r.Context(), names, api.o.Now().Add(-ChartHours*time.Hour))
	if err != nil {
		api.fail(w, r, err)
		return
	}
	for _, n := range names {
		if hourly[n] == nil {
			hourly[n] = []hookwarden.HourCount{}
		}
	}
	WriteJSON(w, http.StatusOK, statsAnswer{Stats: st, Hourly: hourly})
}

// statsAnswer is GET /api/stats: Stats' fields, and hourly.
type statsAnswer struct {
	hookwarden.Stats
	Hourly map[string][]hookwarden.HourCount `json:"hourly"`
}

func (api *API) quarantine(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	f := hookwarden.QuarantineFilter{Source: q.str("source"), Limit: int(q.int64("limit")), Cursor: q.int64("cursor")}
	if q.err != nil {
		api.fail(w, r, q.err)
		return
	}
	items, next, err := api.o.Store.ListQuarantine(r.Context(), f)
	if err != nil {
		api.fail(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, newPage(items, next))
}
