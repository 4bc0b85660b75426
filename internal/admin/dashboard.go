package admin

// The dashboard: GET / on the admin listener, one server-rendered page
// (html/template, embedded, no script, no CDN) that reads well on a phone:
// per-source counts for the last hour and day, each destination's outbox,
// the dead letters with a Replay button, quarantined requests, outage
// windows and silences, and the claims-retention margin.
//
// Security:
//   - It is behind the same token as the API. A browser logs in once with
//     the token (POST /login); the answer sets a signed session (12 h, see
//     auth.go) as an HttpOnly, SameSite=Strict cookie, which Authorized
//     accepts like the bearer header; "log out" revokes it on the server.
//   - Every POST (replay, login, logout) must pass net/http's
//     CrossOriginProtection (Sec-Fetch-Site / Origin against Host) and the
//     dashboard's own form token (an HMAC of the session under a per-process
//     key), so another site can neither submit the form nor forge the token.
//   - Without an admin token (loopback only), the page answers only to a
//     Host that is an IP address or "localhost": a rebound DNS name pointing
//     at 127.0.0.1 gets nothing.
//   - Frames are refused (the Replay button cannot be clickjacked) and a
//     Content-Security-Policy allows no script at all.
//
// Pause and Resume buttons per destination, and its blocked order_by keys,
// are in flow.go.
//
// Replay goes through Store.Replay, the CLI's and the API's path, so the
// three-strikes (--force) and pruned-payload rules live in one place.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/hookwarden/hookwarden"
)

//go:embed templates/*.html templates/*.css
var dashFS embed.FS

// DashboardStore is the part of the store contract (hookwarden.Store) the
// dashboard reads and does.
type DashboardStore interface {
	OutboxStats(ctx context.Context, destinations []string) ([]hookwarden.OutboxStat, error)
	LastAccepted(ctx context.Context, sources []string) (map[string]time.Time, error)
	RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]hookwarden.WindowCounts, error)
	Hourly(ctx context.Context, sources []string, since time.Time) (map[string][]hookwarden.HourCount, error)
	ListDead(ctx context.Context, f hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error)
	ListEvents(ctx context.Context, f hookwarden.EventFilter) ([]hookwarden.EventSummary, int64, error)
	Gaps(ctx context.Context, opt hookwarden.GapOptions) (hookwarden.GapReport, error)
	BackfillRuns(ctx context.Context, sources []string, since time.Time) ([]hookwarden.BackfillRun, error)
	Replay(ctx context.Context, sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) (hookwarden.ReplayResult, error)
	FlowStore // pause, resume, flow state (flow.go)
}

var _ DashboardStore = hookwarden.Store(nil)

// DashboardSource is what the dashboard shows of a configured source.
type DashboardSource struct {
	Name         string
	ExpectWithin time.Duration // 0: silences are not watched
	RetryHorizon time.Duration
	// RetentionMargin is retention.claims - (retry_horizon + redrive_window);
	// below zero, a late retry or a redrive can be delivered twice.
	RetentionMargin time.Duration
	// Backfill is the source's backfill: (zero: none).
	Backfill hookwarden.BackfillPolicy
}

// DashboardOptions configure the dashboard.
type DashboardOptions struct {
	Store DashboardStore
	// Sources and Destinations return the running configuration's view; they
	// are called per request, so a reload is seen at once.
	Sources      func() []DashboardSource
	Destinations func() []string
	// Refused counts a source's requests refused in the last d, as
	// rejected (401, 404, 405, 413, 400) and unavailable (503): the database
	// does not keep them. Optional.
	Refused func(source string, d time.Duration) (rejected, unavailable int)
	// CountingSince is when Refused began counting (the process start).
	CountingSince time.Time
	// Authorized reports whether a request carries the admin token (bearer
	// or cookie): Admin.Authorized. TokenSet says whether there is a token.
	Authorized func(*http.Request) bool
	TokenSet   bool
	// Sessions logs a browser in and out (Admin); needed with TokenSet.
	Sessions Sessions
	// Notify wakes the workers of the destinations a replay made due.
	Notify func(destinations ...string)
	// Backfill starts a backfill of an outage window [from, to] in the
	// background (the Backfill button of a recoverable window); nil: no button.
	Backfill func(ctx context.Context, source string, from, to time.Time, audit *hookwarden.AuditEntry) (int64, error)
	// Stale and MinClean are passed to Gaps (see hookwarden.GapOptions).
	Stale, MinClean time.Duration
	// GapsWindow is how far back outages and silences are listed (default 7d).
	GapsWindow time.Duration
	Version    string
	Logger     *slog.Logger
	Now        func() time.Time
}

// Sessions is the login side of Admin, which the login form and the log-out
// button use.
type Sessions interface {
	Login(r *http.Request, token string) (session string, ttl, retry time.Duration, ok bool)
	Logout(r *http.Request)
}

var _ Sessions = (*Admin)(nil)

// Dashboard serves the HTML dashboard.
type Dashboard struct {
	o     DashboardOptions
	tmpl  *template.Template
	css   []byte
	key   []byte // per-process key of the form tokens
	cross *http.CrossOriginProtection
}

// dashDeadLimit caps the dead letters listed; the rest are counted.
const dashDeadLimit = 50

// NewDashboard builds the dashboard; Register and Front mount it.
func NewDashboard(o DashboardOptions) (*Dashboard, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.GapsWindow <= 0 {
		o.GapsWindow = 7 * 24 * time.Hour
	}
	if o.Sources == nil {
		o.Sources = func() []DashboardSource { return nil }
	}
	if o.Destinations == nil {
		o.Destinations = func() []string { return nil }
	}
	if o.Authorized == nil {
		o.Authorized = func(*http.Request) bool { return !o.TokenSet }
	}
	if o.TokenSet && o.Sessions == nil {
		return nil, fmt.Errorf("dashboard: a token is set but no Sessions log browsers in")
	}
	d := &Dashboard{o: o, key: make([]byte, 32), cross: http.NewCrossOriginProtection()}
	if _, err := rand.Read(d.key); err != nil {
		return nil, fmt.Errorf("dashboard key: %w", err)
	}
	t, err := template.New("").Funcs(template.FuncMap{
		"ago":    func(t time.Time) string { return dashDuration(o.Now().Sub(t)) + " ago" },
		"dur":    dashDuration,
		"ts":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"short":  func(t time.Time) string { return t.UTC().Format("Jan 2 15:04 UTC") },
		"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"shortp": func(t *time.Time) string { return t.UTC().Format("Jan 2 15:04 UTC") },
		"deref": func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		},
		// rfc3339 keeps the fraction: a window's exact bounds, for a form.
		"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"recovery": func(r string) string {
			switch r {
			case hookwarden.RecoveryLost:
				return "lost for good"
			case hookwarden.RecoveryRetried:
				return "retried by the provider"
			}
			return r
		},
	}).ParseFS(dashFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard templates: %w", err)
	}
	d.tmpl = t
	if d.css, err = dashFS.ReadFile("templates/dashboard.css"); err != nil {
		return nil, fmt.Errorf("dashboard css: %w", err)
	}
	return d, nil
}

// Register adds the token-guarded routes to r, normally Admin.Router().
func (d *Dashboard) Register(r *mux.Router) {
	r.HandleFunc("/", d.page).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/dashboard/replay", d.replay).Methods(http.MethodPost)
	r.HandleFunc("/dashboard/pause", d.pauseResume("pause")).Methods(http.MethodPost)
	r.HandleFunc("/dashboard/resume", d.pauseResume("resume")).Methods(http.MethodPost)
	r.HandleFunc("/dashboard/backfill", d.backfill).Methods(http.MethodPost)
}

// backfill handles the Backfill button of a recoverable outage window:
// source, and the window's start and end (RFC 3339). The run goes on in the
// background; the page shows it with the window.
func (d *Dashboard) backfill(w http.ResponseWriter, r *http.Request) {
	dashHeaders(w)
	if !d.checkPost(w, r) {
		return
	}
	if d.o.Backfill == nil {
		http.Error(w, "backfill is not available", http.StatusNotFound)
		return
	}
	f := r.PostForm
	from, err1 := time.Parse(time.RFC3339Nano, f.Get("from"))
	to, err2 := time.Parse(time.RFC3339Nano, f.Get("to"))
	if err1 != nil || err2 != nil || f.Get("source") == "" || !from.Before(to) {
		http.Error(w, "want source, from and to (RFC 3339)", http.StatusBadRequest)
		return
	}
	id, err := d.o.Backfill(r.Context(), f.Get("source"), from, to,
		&hookwarden.AuditEntry{Origin: hookwarden.AuditDashboard, Actor: r.RemoteAddr})
	switch {
	case errors.Is(err, hookwarden.ErrBackfillRunning):
		http.Redirect(w, r, "/?error=backfill_running#gaps", http.StatusSeeOther)
		return
	case err != nil:
		d.o.Logger.Error("dashboard backfill", "source", f.Get("source"), "err", err)
		http.Redirect(w, r, "/?error=backfill#gaps", http.StatusSeeOther)
		return
	}
	d.o.Logger.Info("backfill from the dashboard", "source", f.Get("source"), "run", id, "remote", r.RemoteAddr)
	http.Redirect(w, r, "/?backfill="+strconv.FormatInt(id, 10)+"#gaps", http.StatusSeeOther)
}

// Front wraps the whole admin handler: it serves the login form, logout and
// the stylesheet (which need no token), and sends a browser that asks for
// the dashboard without the token to the login form instead of a JSON 401.
func (d *Dashboard) Front(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/dashboard.css" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			w.Header().Set("Content-Type", "text/css; charset=utf-8")
			w.Header().Set("Cache-Control", "max-age=300")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			_, _ = w.Write(d.css)
		case r.URL.Path == "/login":
			d.login(w, r)
		case r.URL.Path == "/logout" && r.Method == http.MethodPost:
			d.logout(w, r)
		case r.URL.Path == "/" && r.Method == http.MethodGet && !d.o.Authorized(r):
			http.Redirect(w, r, "/login", http.StatusSeeOther)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// dashHeaders sets the headers every dashboard page carries.
func dashHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

// hostOK refuses, when no token protects the dashboard, any Host that is a
// name other than localhost: the defence against DNS rebinding.
func (d *Dashboard) hostOK(w http.ResponseWriter, r *http.Request) bool {
	if d.o.TokenSet {
		return true
	}
	if LocalHost(r.Host) {
		return true
	}
	http.Error(w, "the dashboard without admin.token answers only to an IP address or localhost; set admin.token to use a host name", http.StatusForbidden)
	return false
}

// formToken is the anti-forgery token of the session: an HMAC of the session
// cookie (empty without a token) under the per-process key.
func (d *Dashboard) formToken(r *http.Request) string {
	session := ""
	if c, err := r.Cookie(CookieName); err == nil {
		session = c.Value
	}
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte("hookwarden dashboard form\x00"))
	m.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkPost applies both cross-site defences to a form POST.
func (d *Dashboard) checkPost(w http.ResponseWriter, r *http.Request) bool {
	if !d.hostOK(w, r) {
		return false
	}
	if err := d.cross.Check(r); err != nil {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return false
	}
	if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(d.formToken(r))) {
		http.Error(w, "stale or forged form: reload the page and try again", http.StatusForbidden)
		return false
	}
	return true
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	dashHeaders(w)
	if !d.hostOK(w, r) {
		return
	}
	if !d.o.TokenSet {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	data := struct{ CSRF, Error string }{CSRF: d.formToken(r)}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPost:
		if !d.checkPost(w, r) {
			return
		}
		session, ttl, retry, ok := d.o.Sessions.Login(r, r.PostForm.Get("token"))
		switch {
		case ok:
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: session, Path: "/", HttpOnly: true,
				Secure: dashHTTPS(r), SameSite: http.SameSiteStrictMode, MaxAge: int(ttl / time.Second)})
			d.o.Logger.Info("dashboard login", "remote", r.RemoteAddr)
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		case retry > 0:
			// The limiter held the attempt back: the token was not compared.
			d.o.Logger.Warn("dashboard login held back after repeated wrong tokens", "remote", r.RemoteAddr)
			data.Error = fmt.Sprintf("Too many wrong tokens from your address: try again in %d s.", RetrySeconds(retry))
			w.Header().Set("Retry-After", strconv.Itoa(RetrySeconds(retry)))
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			d.o.Logger.Warn("dashboard login refused", "remote", r.RemoteAddr)
			data.Error = "That token is not the admin token."
			w.WriteHeader(http.StatusUnauthorized)
		}
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := d.tmpl.ExecuteTemplate(w, "login.html", data); err != nil {
		d.o.Logger.Error("render login", "err", err)
	}
}

// dashHTTPS reports whether the browser reached us over HTTPS, directly or
// through a proxy. Trusting a forged X-Forwarded-Proto only makes the cookie
// stricter (Secure), so no proxy list is needed.
func dashHTTPS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// logout revokes the session on the server, not only in this browser: a
// copied cookie stops working too.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if !d.checkPost(w, r) {
		return
	}
	if d.o.Sessions != nil {
		d.o.Sessions.Logout(r)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true,
		Secure: dashHTTPS(r), SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// replay handles the Replay buttons: one job (job=ID), or every dead letter
// of a destination (all=1, destination=D). force=1 replays jobs dead three
// times or more; the store decides what that means.
func (d *Dashboard) replay(w http.ResponseWriter, r *http.Request) {
	dashHeaders(w)
	if !d.checkPost(w, r) {
		return
	}
	f := r.PostForm
	sel := hookwarden.ReplaySelector{}
	if f.Get("all") == "1" {
		sel.Dead, sel.Destination = true, f.Get("destination")
	} else {
		id, err := strconv.ParseInt(f.Get("job"), 10, 64)
		if err != nil || id <= 0 {
			http.Error(w, "job: want a job id", http.StatusBadRequest)
			return
		}
		sel.JobIDs = []int64{id}
	}
	// Like the API: a replay finishes even if the browser goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Minute)
	defer cancel()
	res, err := d.o.Store.Replay(ctx, sel, hookwarden.ReplayOptions{Force: f.Get("force") == "1",
		Audit: &hookwarden.AuditEntry{Origin: hookwarden.AuditDashboard, Actor: r.RemoteAddr}})
	if err != nil {
		d.o.Logger.Error("dashboard replay", "err", err)
		http.Redirect(w, r, "/?error=replay", http.StatusSeeOther)
		return
	}
	if d.o.Notify != nil && len(res.Destinations) > 0 {
		d.o.Notify(res.Destinations...)
	}
	d.o.Logger.Info("replay from the dashboard", "selected", res.Selected, "replayed", res.Replayed,
		"skipped", len(res.Skipped), "remote", r.RemoteAddr)
	q := url.Values{"replayed": {strconv.Itoa(res.Replayed)}}
	if len(res.Skipped) > 0 {
		q.Set("skipped", strconv.Itoa(len(res.Skipped)))
		q.Set("reason", res.Skipped[0].Reason)
	}
	http.Redirect(w, r, "/?"+q.Encode(), http.StatusSeeOther)
}

// dashSkipText explains a replay's skip reason (hookwarden.Skip* codes).
var dashSkipText = map[string]string{
	hookwarden.SkipNeedsForce: "dead-lettered 3 times or more: the app keeps refusing it; use \"Replay anyway\" once it is fixed",
	hookwarden.SkipPruned:     "its payload was pruned (retention.payloads): there is nothing left to deliver",
	hookwarden.SkipInFlight:   "an attempt is in flight; it finishes or is retried on its own",
	hookwarden.SkipNotFound:   "no such job (replayed or pruned already?)",
}

type dashSourceRow struct {
	DashboardSource
	LastAccepted   time.Time
	Silent         bool // longer than ExpectWithin since the last accepted event
	Hour, Day      hookwarden.WindowCounts
	RejectedHour   int
	RejectedDay    int
	Unavailable    int // 503 in the last day
	MarginNegative bool
	Chart          dashChart
}

type dashDestRow struct {
	hookwarden.OutboxStat
	Stale bool // oldest pending older than 30 minutes (the alert's threshold)
	Flow  hookwarden.DestinationState
	// Replayable is how many of Dead the bulk button replays (those dead
	// ForceAfter times need Replay anyway, one by one): -1 when the list
	// shown is not all of them, so the count is unknown.
	Replayable int
}

type dashDead struct {
	hookwarden.DeadLetter
	NeedsForce bool
}

type dashData struct {
	Now, CountingSince time.Time
	Version            string
	CSRF               string
	TokenSet           bool
	Flash, FlashError  string
	Sources            []dashSourceRow
	Dests              []dashDestRow
	Dead               []dashDead
	DeadTotal          int
	DeadMore           bool
	Quarantined        []hookwarden.EventSummary
	Gaps               hookwarden.GapReport
	GapsWindow         time.Duration
	CanBackfill        bool
	Problems           []string // sections that could not be read
}

func (d *Dashboard) page(w http.ResponseWriter, r *http.Request) {
	dashHeaders(w)
	if !d.hostOK(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	now := d.o.Now()
	data := dashData{Now: now, CountingSince: d.o.CountingSince, Version: d.o.Version, CSRF: d.formToken(r),
		TokenSet: d.o.TokenSet, GapsWindow: d.o.GapsWindow}
	d.flash(r.URL.Query(), &data)
	problem := func(what string, err error) {
		d.o.Logger.Error("dashboard: read "+what, "err", err)
		data.Problems = append(data.Problems, what)
	}

	sources := d.o.Sources()
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.Name
	}
	last, err := d.o.Store.LastAccepted(ctx, names)
	if err != nil {
		problem("last accepted", err)
	}
	counts, err := d.o.Store.RecentCounts(ctx, names, now.Add(-time.Hour), now.Add(-24*time.Hour))
	if err != nil {
		problem("recent counts", err)
	}
	// The chart spans 7 days; the outages and silences listed span at
	// least that, so that every shaded window is also listed.
	chartFrom := now.Add(-ChartHours * time.Hour)
	hourly, err := d.o.Store.Hourly(ctx, names, chartFrom)
	if err != nil {
		problem("hourly counts", err)
	}
	policies := make([]hookwarden.SourcePolicy, len(sources))
	for i, s := range sources {
		policies[i] = hookwarden.SourcePolicy{Name: s.Name, RetryHorizon: s.RetryHorizon, ExpectWithin: s.ExpectWithin,
			Backfill: s.Backfill}
	}
	data.CanBackfill = d.o.Backfill != nil
	if data.GapsWindow < ChartHours*time.Hour {
		data.GapsWindow = ChartHours * time.Hour
	}
	if data.Gaps, err = hookwarden.GapsWithRecovery(ctx, d.o.Store, hookwarden.GapOptions{Since: now.Add(-data.GapsWindow),
		Stale: d.o.Stale, MinClean: d.o.MinClean, Sources: policies}); err != nil {
		problem("outage windows", err)
	}

	for _, s := range sources {
		row := dashSourceRow{DashboardSource: s, LastAccepted: last[s.Name], MarginNegative: s.RetentionMargin < 0}
		row.Hour, row.Day = counts[s.Name][0], counts[s.Name][1]
		row.Chart = buildChart(s.Name, hourly[s.Name], data.Gaps, now)
		if d.o.Refused != nil {
			row.RejectedHour, _ = d.o.Refused(s.Name, time.Hour)
			row.RejectedDay, row.Unavailable = d.o.Refused(s.Name, 24*time.Hour)
		}
		if s.ExpectWithin > 0 {
			since := row.LastAccepted
			if since.IsZero() {
				since = d.o.CountingSince
			}
			row.Silent = !since.IsZero() && now.Sub(since) > s.ExpectWithin
		}
		data.Sources = append(data.Sources, row)
	}

	stats, err := d.o.Store.OutboxStats(ctx, d.o.Destinations())
	if err != nil {
		problem("outbox", err)
	}
	for _, st := range stats {
		data.Dests = append(data.Dests, dashDestRow{OutboxStat: st, Stale: st.OldestPendingAge > 30*time.Minute})
		data.DeadTotal += st.Dead
	}
	if err := d.withFlow(ctx, data.Dests); err != nil {
		problem("flow control", err)
	}

	dead, next, err := d.o.Store.ListDead(ctx, hookwarden.DeadFilter{Limit: dashDeadLimit})
	if err != nil {
		problem("dead letters", err)
	}
	for _, dl := range dead {
		data.Dead = append(data.Dead, dashDead{DeadLetter: dl, NeedsForce: dl.DeadCount >= hookwarden.ForceAfter})
	}
	data.DeadMore = next != 0
	for i := range data.Dests {
		row := &data.Dests[i]
		row.Replayable = -1
		if !data.DeadMore {
			row.Replayable = 0
			for _, dl := range data.Dead {
				if dl.Destination == row.Destination && !dl.NeedsForce {
					row.Replayable++
				}
			}
		}
	}

	if data.Quarantined, _, err = d.o.Store.ListEvents(ctx, hookwarden.EventFilter{
		Status: hookwarden.StatusQuarantined, Limit: 20}); err != nil {
		problem("quarantined", err)
	}

	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodHead {
		return
	}
	if err := d.tmpl.ExecuteTemplate(w, "dashboard.html", data); err != nil {
		d.o.Logger.Error("render dashboard", "err", err)
	}
}

// flash turns the redirect's query into a message from a fixed set: nothing
// from the URL is shown as text except numbers.
func (d *Dashboard) flash(q url.Values, data *dashData) {
	if flowFlash(q, data) {
		return
	}
	switch q.Get("error") {
	case "replay":
		data.FlashError = "The replay failed; the log has the details."
		return
	case "backfill":
		data.FlashError = "The backfill could not start; the log has the details."
		return
	case "backfill_running":
		data.FlashError = "A backfill of this source is running already: wait for it to end."
		return
	}
	if n, _ := strconv.ParseInt(q.Get("backfill"), 10, 64); n > 0 {
		data.Flash = fmt.Sprintf("Backfill run %d started: the window below shows its result when it ends.", n)
		return
	}
	if q.Get("replayed") == "" {
		return
	}
	if n, _ := strconv.Atoi(q.Get("replayed")); n > 0 {
		data.Flash = fmt.Sprintf("Replayed %d job(s): they are due now.", n)
	}
	if s, _ := strconv.Atoi(q.Get("skipped")); s > 0 {
		why := dashSkipText[q.Get("reason")]
		if why == "" {
			why = "see `hookwarden dead list`"
		}
		data.FlashError = fmt.Sprintf("%d not replayed: %s.", s, why)
	}
}

// dashDuration prints a duration the way a person reads it: "45s", "12m",
// "3h 5m", "2d 4h".
func dashDuration(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%s%ds", neg, int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%s%dm", neg, int(d.Minutes()))
	case d < 24*time.Hour:
		h := int(d.Hours())
		m := int(d.Minutes()) - 60*h
		if m == 0 {
			return fmt.Sprintf("%s%dh", neg, h)
		}
		return fmt.Sprintf("%s%dh %dm", neg, h, m)
	default:
		days := int(d.Hours()) / 24
		h := int(d.Hours()) - 24*days
		if h == 0 {
			return fmt.Sprintf("%s%dd", neg, days)
		}
		return fmt.Sprintf("%s%dd %dh", neg, days, h)
	}
}
