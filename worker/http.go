package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/signature"
)

const (
	// DefaultHTTPTimeout bounds one HTTP attempt: connect, send, wait, read.
	DefaultHTTPTimeout = 10 * time.Second
	// maxHTTPResponse caps the response body kept in the attempt log.
	maxHTTPResponse = 4 << 10
	// maxDrain is how much more of a response is read so the connection can
	// be reused; past that it is closed instead.
	maxDrain = 64 << 10
	// maxRetryAfter bounds a parsed Retry-After (NextDelay caps it again).
	maxRetryAfter = 365 * 24 * time.Hour
	userAgent     = "hookwarden"
)

// HTTPConfig configures an HTTP destination.
type HTTPConfig struct {
	URL string // http or https
	// Timeout bounds one attempt, from dialling to reading the response;
	// default DefaultHTTPTimeout.
	Timeout time.Duration
	// SigningSecret, when set, signs every request per Standard Webhooks
	// (webhook-id, webhook-timestamp, webhook-signature). Use a "whsec_"
	// secret so any Standard Webhooks library verifies it.
	SigningSecret string
	// SignAs, when set, signs every request in that provider's own format
	// instead (a scheme of SignAsSchemes), with SigningSecret as the
	// provider's secret and the attempt's time, and adds the provider's
	// headers from the job's receipt: the app verifies with the provider's
	// SDK, however long the event waited.
	SignAs string
	// Client is used instead of the deliverer's own (for tests or a custom
	// transport). Redirects are never followed, whatever its CheckRedirect.
	Client *http.Client
	// UserAgent of every request; default "hookwarden".
	UserAgent string
	// Concurrency is the destination's number of delivery slots: the client
	// keeps that many connections alive, so no slot opens a new connection
	// per attempt.
	Concurrency int
}

// HTTP delivers a job by POSTing its original body to a URL. It is safe for
// concurrent use.
type HTTP struct {
	cfg     HTTPConfig // defaults applied: what Pool.Apply compares
	url     string
	timeout time.Duration
	secret  string
	signAs  string
	ua      string
	client  *http.Client
}

// NewHTTP validates cfg and returns an HTTP deliverer with its own client
// (keep-alive, and timeouts on every phase: net/http has none by default).
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("http destination: invalid url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http destination: url %q: want http:// or https:// with a host", u.Redacted())
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("http destination: negative timeout %s", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultHTTPTimeout
	}
	if cfg.SignAs != "" {
		if err := CheckSignAs(cfg.SignAs, cfg.SigningSecret); err != nil {
			return nil, fmt.Errorf("http destination: %w", err)
		}
	} else if cfg.SigningSecret != "" {
		if _, err := signature.SignStandard(cfg.SigningSecret, "check", time.Unix(0, 0), nil); err != nil {
			return nil, fmt.Errorf("http destination: signing secret: %w", err)
		}
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = userAgent
	}
	var client http.Client
	if cfg.Client != nil {
		client = *cfg.Client
	} else {
		client = http.Client{Transport: newTransport(cfg.Timeout, cfg.Concurrency), Timeout: cfg.Timeout}
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &HTTP{cfg: cfg, url: cfg.URL, timeout: cfg.Timeout, secret: cfg.SigningSecret, signAs: cfg.SignAs,
		ua: cfg.UserAgent, client: &client}, nil
}

func newTransport(timeout time.Duration, slots int) *http.Transport {
	dialer := &net.Dialer{Timeout: min(timeout, 10*time.Second), KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:             http.ProxyFromEnvironment, // never used for loopback
		DialContext:       dialer.DialContext,
		ForceAttemptHTTP2: true,
		// One idle connection per slot: fewer and every attempt beyond them
		// opens (and closes) a connection, which cost more CPU than the
		// request itself on loopback.
		MaxIdleConns:           max(64, slots),
		MaxIdleConnsPerHost:    max(16, slots),
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    min(timeout, 10*time.Second),
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// MaxDuration is the longest one attempt can take; the pool's lease covers it.
func (h *HTTP) MaxDuration() time.Duration { return h.timeout }

// settings is what makes two HTTP deliverers the same (Pool.Apply): the
// configuration, a Client given by the caller compared by identity.
func (h *HTTP) settings() any { return h.cfg }

// Close closes idle keep-alive connections.
func (h *HTTP) Close() error {
	h.client.CloseIdleConnections()
	return nil
}

// Deliver POSTs the job's body. 2xx is Success; 408, 425, 429, 5xx, 3xx (not
// followed), connection errors and timeouts are Transient; any other 4xx is
// Permanent.
func (h *HTTP) Deliver(ctx context.Context, job *hookwarden.Job) Result {
	res := Result{ExitCode: -1, Class: Transient}
	key := job.IdempotencyKey()
	hdr := http.Header{}
	if job.ContentType != "" {
		hdr.Set("Content-Type", job.ContentType)
	}
	hdr.Set("User-Agent", h.ua)
	hdr.Set("Idempotency-Key", key)
	hdr.Set("Hookwarden-Source", job.Source)
	hdr.Set("Hookwarden-Event-Id", job.EventID)
	hdr.Set("Hookwarden-Event-Type", job.EventType)
	hdr.Set("Hookwarden-Attempt", strconv.Itoa(job.Attempt))
	target := h.url
	if h.signAs != "" {
		// The attempt's time: a tolerance check passes however long the
		// event waited.
		sh, u, err := signAs(h.signAs, h.secret, h.url, job, time.Now())
		if err != nil {
			// The same body fails the same way on every attempt.
			res.Class = Permanent
			res.Err = fmt.Errorf("sign request as %s: %w", h.signAs, err)
			return res
		}
		for name, vs := range sh {
			hdr[name] = vs
		}
		target = u
	}
	for name, vs := range hdr {
		if !validHeaderValue(vs[0]) {
			// It would fail the same way on every attempt.
			res.Class = Permanent
			res.Err = fmt.Errorf("%s %q cannot be sent in an HTTP header", name, vs[0])
			return res
		}
	}
	if h.secret != "" && h.signAs == "" {
		ts := time.Now()
		sig, err := signature.SignStandard(h.secret, key, ts, job.Body)
		if err != nil {
			res.Err = fmt.Errorf("sign request: %w", err)
			return res
		}
		hdr.Set("webhook-id", key)
		hdr.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		hdr.Set("webhook-signature", sig)
	}

	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(job.Body))
	if err != nil {
		res.Err = fmt.Errorf("build request: %w", err)
		return res
	}
	req.Header = hdr
	resp, err := h.client.Do(req)
	if err != nil {
		res.TimedOut = isTimeout(err)
		res.Err = h.requestError(err, res.TimedOut)
		return res
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain) // reuse the connection
		_ = resp.Body.Close()
	}()
	res.StatusCode = resp.StatusCode
	res.Response, _ = io.ReadAll(io.LimitReader(resp.Body, maxHTTPResponse))

	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		res.Class = Success
	case code >= 300 && code < 400:
		res.Err = fmt.Errorf("redirect not followed: %s to %q; configure the final URL",
			resp.Status, resp.Header.Get("Location"))
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly,
		code == http.StatusTooManyRequests, code >= 500:
		res.Err = fmt.Errorf("HTTP %s", resp.Status)
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	case code >= 400 && code < 500:
		res.Class = Permanent
		res.Err = fmt.Errorf("HTTP %s: the app refused the event", resp.Status)
	default:
		res.Err = fmt.Errorf("unexpected HTTP status %s", resp.Status)
	}
	return res
}

// requestError describes a failed request without the URL, which may carry
// a token in its query.
func (h *HTTP) requestError(err error, timedOut bool) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if timedOut {
		return fmt.Errorf("request timed out (timeout %s): %w", h.timeout, err)
	}
	return fmt.Errorf("request failed: %w", err)
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// parseRetryAfter reads delay-seconds or an HTTP-date; 0 if absent or invalid.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return min(time.Duration(min(n, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}

// validHeaderValue refuses control characters (CR, LF, NUL...) that net/http
// would reject, tab excepted.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
