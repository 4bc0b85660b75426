// Package admin is the operator-facing HTTP server: /healthz, /readyz,
// /metrics, the JSON API and the dashboard. When a token is configured, every
// path but /healthz and /readyz needs it.
package admin

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
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
}

// Admin is the admin HTTP handler. Other parts register routes on Router.
type Admin struct {
	opts   Options
	router *mux.Router
	authed *mux.Router
}

// New builds the handler with health, readiness and metrics routes.
func New(opts Options) *Admin {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &Admin{opts: opts, router: mux.NewRouter()}
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

// requireToken checks the bearer token (or the dashboard's session cookie,
// which carries the same token) in constant time.
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
		if a.Authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="hookwarden"`)
		WriteJSON(w, http.StatusUnauthorized, map[string]string{"status": "unauthorized"})
	})
}

// CookieName is the dashboard's session cookie.
const CookieName = "hookwarden_token"

// Authorized reports whether r carries the admin token.
func (a *Admin) Authorized(r *http.Request) bool {
	if a.opts.Token == "" {
		return true
	}
	got := ""
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		got = strings.TrimPrefix(h, "Bearer ")
	} else if c, err := r.Cookie(CookieName); err == nil {
		// The cookie holds a value derived from the token, never the token.
		return subtle.ConstantTimeCompare([]byte(c.Value), []byte(SessionValue(a.opts.Token))) == 1
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(a.opts.Token)) == 1
}

// SessionValue is what the dashboard's login cookie carries: an HMAC of the
// admin token, so a leaked cookie does not reveal the token itself (it stops
// working when the token changes).
func SessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("hookwarden admin session v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
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
