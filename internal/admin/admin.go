// Package admin is the operator-facing HTTP server: /healthz, /readyz,
// /metrics, the JSON API and the dashboard. When a token is configured, every
// path but /healthz and /readyz needs it.
package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
)

// Options configure the admin server.
type Options struct {
	// Token, when non-empty, is required as "Authorization: Bearer TOKEN".
	Token string
	// Ready reports whether the database is writable and workers are running.
	Ready func(ctx context.Context) error
	// Metrics serves /metrics.
	Metrics http.Handler
	Logger  *slog.Logger
	// TrustedProxies are reverse proxies whose X-Forwarded-For names the
	// client that wrong tokens are counted against (trusted_proxies).
	TrustedProxies []netip.Prefix
	// SessionTTL is how long a dashboard login lasts (default SessionTTL).
	SessionTTL time.Duration
	// Now is the clock of sessions and failure delays (tests set it).
	Now func() time.Time
}

// Admin is the admin HTTP handler. Other parts register routes on Router.
type Admin struct {
	opts   Options
	auth   *auth
	router *mux.Router
	authed *mux.Router
}

// New builds the handler with health, readiness and metrics routes.
func New(opts Options) *Admin {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &Admin{opts: opts, auth: newAuth(opts), router: mux.NewRouter()}
	a.router.HandleFunc("/healthz", a.healthz).Methods(http.MethodGet, http.MethodHead)
	a.router.HandleFunc("/readyz", a.readyz).Methods(http.MethodGet, http.MethodHead)
	a.authed = a.router.PathPrefix("/").Subrouter()
	a.authed.Use(a.requireToken)
	if opts.Metrics != nil {
		a.authed.Handle("/metrics", opts.Metrics).Methods(http.MethodGet)
	}
	return a
}

// Router is where the API and dashboard add their routes; all of them are
// behind the token check.
func (a *Admin) Router() *mux.Router { return a.authed }

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.router.ServeHTTP(w, r) }

func (a *Admin) healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	if a.opts.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := a.opts.Ready(ctx); err != nil {
			WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "error": err.Error()})
			return
		}
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// requireToken lets through a request with the token (bearer header) or a
// live dashboard session (cookie). A client that failed too often gets 429
// with Retry-After, and its token is not even compared.
func (a *Admin) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.opts.Token == "" {
			// Without a token the listener is on loopback (check enforces
			// it); refuse host names other than localhost so a DNS-rebound
			// page in a local browser cannot read or replay anything.
			if !LocalHost(r.Host) {
				WriteJSON(w, http.StatusForbidden, map[string]string{"status": "forbidden",
					"error": "without admin.token only an IP address or localhost is answered"})
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		ok, retry := a.authenticate(r)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		if retry > 0 {
			TooManyAttempts(w, retry)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="hookwarden"`)
		WriteJSON(w, http.StatusUnauthorized, map[string]string{"status": "unauthorized"})
	})
}

// TooManyAttempts answers a client held back after wrong tokens.
func TooManyAttempts(w http.ResponseWriter, retry time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(RetrySeconds(retry)))
	WriteJSON(w, http.StatusTooManyRequests, map[string]string{"status": "too_many_attempts",
		"error": "too many wrong admin tokens from this address; wait Retry-After seconds"})
}

// RetrySeconds rounds a wait up to whole seconds, at least 1.
func RetrySeconds(d time.Duration) int { return max(1, int((d+time.Second-1)/time.Second)) }

// CookieName is the dashboard's session cookie.
const CookieName = "hookwarden_token"

// Authorized reports whether r carries the admin token or a live session.
// A bearer token counts against the client's failures like a login.
func (a *Admin) Authorized(r *http.Request) bool {
	ok, _ := a.authenticate(r)
	return ok
}

func (a *Admin) authenticate(r *http.Request) (bool, time.Duration) {
	if a.opts.Token == "" {
		return true, 0
	}
	if h := r.Header.Get("Authorization"); h != "" {
		token, _ := strings.CutPrefix(h, "Bearer ")
		return a.auth.checkToken(r, token)
	}
	if c, err := r.Cookie(CookieName); err == nil {
		// A session is 256 bits of HMAC: it cannot be guessed, so a stale
		// cookie (expired, revoked, from before a restart) is not counted
		// as a failure; the browser is sent to the login form.
		_, _, ok := a.auth.session(c.Value)
		return ok, 0
	}
	return false, 0
}

// Login checks a token typed into the dashboard's login form. On success
// it returns a new session value and how long it lasts; retry > 0 means the
// client is held back after too many wrong tokens.
func (a *Admin) Login(r *http.Request, token string) (session string, ttl, retry time.Duration, ok bool) {
	if ok, retry = a.auth.checkToken(r, token); !ok {
		return "", 0, retry, false
	}
	session, _ = a.auth.newSession()
	return session, a.auth.ttl, 0, true
}

// Logout revokes the session r carries, if any.
func (a *Admin) Logout(r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil {
		a.auth.revoke(c.Value)
	}
}

// LocalHost reports whether a Host header names an IP address or localhost.
func LocalHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	return host == "localhost" || net.ParseIP(host) != nil
}

// WriteJSON writes v as a JSON response.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// NewServer returns an http.Server for the admin listener with timeouts set.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}
