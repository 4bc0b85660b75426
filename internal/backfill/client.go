package backfill

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Window is a closed span of time [From, To].
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Event is one event listed by a provider, with its bytes as the API gave them.
type Event struct {
	ID         string
	Type       string
	Created    time.Time
	Body       []byte
	APIVersion string // Stripe only
}

// Report counts what one run saw. Listed counts the distinct events (or
// deliveries) of the window the provider returned, Failed those that could
// not be used (FailedBy gives the reasons), Requested the redeliveries the
// provider accepted, AlreadyClaimed the deliveries the caller said it has.
type Report struct {
	Listed         int
	Requested      int
	AlreadyClaimed int
	Failed         int
	FailedBy       map[string]int
	Pages          int
	// BeyondHistory is the part of the window older than the provider keeps
	// (or redelivers); nothing was asked for it. Nil when the window is within.
	BeyondHistory *Window
	// CountsUnknown is set when the provider does the work in the background
	// without saying how much (Svix recover): Listed and AlreadyClaimed mean
	// nothing then.
	CountsUnknown bool
	// Task is the provider's id of a background task (Svix), if any.
	Task string
}

func (r *Report) fail(reason string) {
	r.Failed++
	if r.FailedBy == nil {
		r.FailedBy = map[string]int{}
	}
	r.FailedBy[reason]++
}

// Lister lists the events of a window, each once, in the provider's order.
// yield returning an error stops the walk with that error.
type Lister interface {
	List(ctx context.Context, from, to time.Time, yield func(Event) error) (Report, error)
}

// Redeliverer asks the provider to resend the window's events. claimed is
// asked per delivery id (GitHub's guid) and may be nil when the provider
// cannot tell ids in advance (Svix).
type Redeliverer interface {
	Redeliver(ctx context.Context, from, to time.Time, claimed func(id string) (bool, error)) (Report, error)
}

var (
	// ErrKeyRefused: the provider answered 401 or 403 (the key is wrong,
	// revoked or lacks the scope).
	ErrKeyRefused = errors.New("provider refused the api key")
	// ErrInsecureBase: api_base (or a link the provider gave) is not https on
	// a non-loopback host, or leads to another origin.
	ErrInsecureBase = errors.New("insecure or foreign api address")
	// ErrMalformedPage: a page did not parse; nothing from it was used.
	ErrMalformedPage = errors.New("malformed page")
	// ErrTooLarge: a response exceeded Options.MaxBody.
	ErrTooLarge = errors.New("response too large")
	// ErrPageBound: the walk reached Options.MaxPages before the window's end.
	ErrPageBound = errors.New("page bound reached")
	// ErrTimeBound: the walk ran longer than Options.MaxTime.
	ErrTimeBound = errors.New("time bound reached")
	// ErrRetriesExhausted: 429/5xx/transport failures outlasted the attempts.
	ErrRetriesExhausted = errors.New("retries exhausted")
	// ErrBadWindow: from is after to, or a bound is zero.
	ErrBadWindow = errors.New("bad window")
)

// PageError names the page that failed: its number (from 1) and the cursor
// it was asked with ("" for the first).
type PageError struct {
	Page   int
	Cursor string
	Err    error
}

func (e *PageError) Error() string {
	c := e.Cursor
	if c == "" {
		c = "first"
	}
	return fmt.Sprintf("page %d (cursor %s): %v", e.Page, c, e.Err)
}

func (e *PageError) Unwrap() error { return e.Err }

// StatusError is an answer the client does not retry (a 4xx other than 429),
// with the provider's message, cut short.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("provider answered %d", e.Status)
	}
	return fmt.Sprintf("provider answered %d: %s", e.Status, e.Message)
}

// Options are common to every client; zero values take the defaults.
type Options struct {
	APIBase       string        // default: the provider's
	APIKey        string        // sent as the provider documents
	Client        *http.Client  // default: a client with a 60s timeout
	MaxPages      int           // default 1000
	MaxTime       time.Duration // whole run; default 15m
	MaxAttempts   int           // per request, counting the first; default 6
	MaxRetryAfter time.Duration // longest Retry-After honoured; default 2m
	Backoff       time.Duration // first 5xx wait, doubled each time up to 30s; default 500ms
	MaxBody       int64         // per response; default 16 MiB
	History       time.Duration // how far back the provider keeps; default the provider's
	Now           func() time.Time
	// DryRun: a Redeliverer lists and counts what it would ask for
	// (Requested) but sends no redelivery or recover request.
	DryRun bool
}

const (
	defaultMaxPages      = 1000
	defaultMaxTime       = 15 * time.Minute
	defaultMaxAttempts   = 6
	defaultMaxRetryAfter = 2 * time.Minute
	defaultBackoff       = 500 * time.Millisecond
	maxBackoff           = 30 * time.Second
	// DefaultMaxBody caps one response: the largest page (100 Stripe events
	// or 200 Paddle ones) stays far below it.
	DefaultMaxBody = 16 << 20
)

// client is the HTTP part every provider shares.
type client struct {
	name    string // for messages
	base    *url.URL
	o       Options
	auth    func(*http.Request)
	secrets []string // the key and what auth sends: never in an error
}

func newClient(name, defaultBase string, history time.Duration, o Options, auth func(*http.Request)) (*client, error) {
	if o.APIBase == "" {
		o.APIBase = defaultBase
	}
	base, err := checkBase(o.APIBase)
	if err != nil {
		return nil, fmt.Errorf("%s api_base: %w", name, err)
	}
	if o.APIKey == "" {
		return nil, fmt.Errorf("%s: no api key", name)
	}
	if o.MaxPages <= 0 {
		o.MaxPages = defaultMaxPages
	}
	if o.MaxTime <= 0 {
		o.MaxTime = defaultMaxTime
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = defaultMaxRetryAfter
	}
	if o.Backoff <= 0 {
		o.Backoff = defaultBackoff
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.History == 0 {
		o.History = history
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	// What auth sends (the header's value, its token, a basic pair's
	// base64) is what a provider echoing the request would quote.
	probe, _ := http.NewRequest(http.MethodGet, base.String(), nil)
	auth(probe)
	secrets := []string{o.APIKey}
	for _, v := range probe.Header.Values("Authorization") {
		secrets = append(secrets, v)
		if _, cred, ok := strings.Cut(v, " "); ok {
			secrets = append(secrets, cred)
		}
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	if o.Client != nil {
		c := *o.Client
		hc = &c
	}
	// A redirect must stay on the api origin: the key travels with it.
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		if !sameOrigin(base, req.URL) {
			return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), ErrInsecureBase)
		}
		return nil
	}
	o.Client = hc
	return &client{name: name, base: base, o: o, auth: auth, secrets: secrets}, nil
}

// CheckAPIBase is what every client checks of api_base: https, or http on
// a loopback host (a local fake); no user, query or fragment.
func CheckAPIBase(s string) error {
	_, err := checkBase(s)
	return err
}

// checkBase accepts https, or http on a loopback host (a local fake).
func checkBase(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", s, err)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: want scheme://host[/path], no user, query or fragment: %w", s, ErrInsecureBase)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("%q: http is allowed only on loopback, use https: %w", s, ErrInsecureBase)
		}
	default:
		return nil, fmt.Errorf("%q: scheme %q, want https: %w", s, u.Scheme, ErrInsecureBase)
	}
	return u, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func sameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && strings.EqualFold(a.Host, b.Host)
}

// link resolves a next-page URL given by the provider and checks it stays on
// the api origin.
func (c *client) link(s string) (*url.URL, error) {
	u, err := c.base.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("next link %q: %w", s, err)
	}
	if !sameOrigin(c.base, u) {
		return nil, fmt.Errorf("next link %s: %w", u.Redacted(), ErrInsecureBase)
	}
	return u, nil
}

// endpoint is base + path (path starts with "/").
func (c *client) endpoint(path string, q url.Values) *url.URL {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = q.Encode()
	return &u
}

// window clips [from, to] to the provider's history and reports the rest.
func (c *client) window(from, to time.Time, rep *Report) (time.Time, bool, error) {
	if from.IsZero() || to.IsZero() || from.After(to) {
		return from, false, fmt.Errorf("%s: from %s, to %s: %w", c.name, from.Format(time.RFC3339), to.Format(time.RFC3339), ErrBadWindow)
	}
	if c.o.History <= 0 {
		return from, true, nil
	}
	oldest := c.o.Now().Add(-c.o.History)
	if !from.Before(oldest) {
		return from, true, nil
	}
	if to.Before(oldest) {
		rep.BeyondHistory = &Window{From: from, To: to}
		return from, false, nil
	}
	rep.BeyondHistory = &Window{From: from, To: oldest}
	return oldest, true, nil
}

// bounded applies MaxTime to ctx.
func (c *client) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.o.MaxTime, fmt.Errorf("%s: ran longer than %s: %w", c.name, c.o.MaxTime, ErrTimeBound))
}

// ctxErr prefers the cause (ErrTimeBound) over a bare deadline error.
func ctxErr(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrTimeBound) {
		return cause
	}
	return err
}

// do is do1 with every known secret taken out of its error: a provider
// may quote the request (Authorization included) in an error body.
func (c *client) do(ctx context.Context, method string, u *url.URL, body []byte) ([]byte, http.Header, error) {
	data, h, err := c.do1(ctx, method, u, body)
	return data, h, Scrub(err, c.secrets...)
}

// do1 sends one request, retrying 429 (after Retry-After) and 5xx/transport
// failures (with backoff), and returns the body of a 2xx answer. A POST
// retried after a 5xx that did take effect asks for a second redelivery at
// worst: its copy meets the claim already taken and is a duplicate.
func (c *client) do1(ctx context.Context, method string, u *url.URL, body []byte) ([]byte, http.Header, error) {
	wait := c.o.Backoff
	var last error
	for attempt := 1; attempt <= c.o.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, wait); err != nil {
				return nil, nil, ctxErr(ctx, err)
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
		if err != nil {
			return nil, nil, fmt.Errorf("build request: %w", err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		c.auth(req)
		resp, err := c.o.Client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctxErr(ctx, err)
			}
			if errors.Is(err, ErrInsecureBase) {
				return nil, nil, err
			}
			last = fmt.Errorf("%s %s: %w", method, u.Path, err)
			wait = nextBackoff(wait, attempt)
			continue
		}
		data, rerr := readCapped(resp.Body, c.o.MaxBody)
		resp.Body.Close()
		st := resp.StatusCode
		switch {
		case st >= 200 && st < 300:
			if rerr != nil {
				if errors.Is(rerr, ErrTooLarge) {
					return nil, nil, rerr
				}
				last = fmt.Errorf("read %s: %w", u.Path, rerr)
				wait = nextBackoff(wait, attempt)
				continue
			}
			return data, resp.Header, nil
		case st == http.StatusTooManyRequests || (st == http.StatusForbidden && rateLimited(resp.Header)):
			d, ok := retryAfter(resp.Header, c.o.Now())
			if !ok {
				d = nextBackoff(wait, attempt)
			}
			if d > c.o.MaxRetryAfter {
				return nil, nil, fmt.Errorf("%s asks to wait %s (Retry-After), more than the %s bound: %w", c.name, d.Round(time.Second), c.o.MaxRetryAfter, ErrRetriesExhausted)
			}
			last = fmt.Errorf("%s %s: rate limited (%d)", method, u.Path, st)
			wait = d
		case st == http.StatusUnauthorized || st == http.StatusForbidden:
			return nil, nil, fmt.Errorf("%s answered %d (%s): %w", c.name, st, message(data), ErrKeyRefused)
		case st >= 500:
			last = fmt.Errorf("%s %s: %s answered %d", method, u.Path, c.name, st)
			wait = nextBackoff(wait, attempt)
		default:
			return nil, nil, &StatusError{Status: st, Message: Redact(message(data), c.secrets...)}
		}
	}
	return nil, nil, fmt.Errorf("%w after %d attempts: %v", ErrRetriesExhausted, c.o.MaxAttempts, last)
}

func nextBackoff(d time.Duration, attempt int) time.Duration {
	if attempt == 1 {
		return d
	}
	d *= 2
	if d > maxBackoff {
		d = maxBackoff
	}
	return d
}

// rateLimited tells GitHub's 403 "rate limit exceeded" from a refused key.
func rateLimited(h http.Header) bool {
	return h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0"
}

// retryAfter reads Retry-After (seconds or an HTTP date), else GitHub's
// X-RateLimit-Reset (unix seconds).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			if n > 1<<20 {
				n = 1 << 20
			}
			return time.Duration(n) * time.Second, true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	if v := h.Get("X-RateLimit-Reset"); v != "" && h.Get("X-RateLimit-Remaining") == "0" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(time.Unix(n, 0).Sub(now), 0), true
		}
	}
	return 0, false
}

func readCapped(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("more than %d bytes: %w", limit, ErrTooLarge)
	}
	return data, nil
}

// message extracts a short human message from an error body, whatever its
// shape (Stripe/Paddle {"error":{...}}, GitHub {"message"}, Svix {"detail"}).
func message(b []byte) string {
	s := strings.TrimSpace(string(b))
	for _, key := range []string{`"message":`, `"detail":`} {
		if i := strings.Index(s, key); i >= 0 {
			rest := strings.TrimSpace(s[i+len(key):])
			if v, err := strconv.QuotedPrefix(rest); err == nil {
				if u, err := strconv.Unquote(v); err == nil {
					s = u
					break
				}
			}
		}
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Redact replaces in s every secret (of 6 characters or more: a shorter
// one is no key) and its base64 forms with [redacted].
func Redact(s string, secrets ...string) string {
	for _, k := range secrets {
		if len(k) < 6 {
			continue
		}
		for _, form := range []string{k, base64.StdEncoding.EncodeToString([]byte(k + ":")),
			base64.StdEncoding.EncodeToString([]byte(k)), url.QueryEscape(k)} {
			s = strings.ReplaceAll(s, form, "[redacted]")
		}
	}
	return s
}

// Scrub is err with Redact applied to its message; errors.Is and As still
// see what it wraps. nil stays nil.
func Scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if r := Redact(msg, secrets...); r != msg {
		return &redactedError{msg: r, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
