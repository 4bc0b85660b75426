// Package receiver is the provider-facing HTTP side: POST /hooks/{source}.
//
// Guarantees: the body is read once, capped, and verified as raw bytes before
// anything parses it; a 200 is written only after the Recorder has committed
// the receipt, the claim and the jobs; anything that cannot be recorded is
// answered 503 with Retry-After so the provider tries again; nothing on this
// path touches the network.
package receiver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/batch"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/filter"
	"github.com/hookwarden/hookwarden/internal/signature"
)

// Recorder is what the receiver needs from the store.
type Recorder interface {
	Record(ctx context.Context, r *hookwarden.Receipt) (hookwarden.RecordResult, error)
}

// Source is one configured provider endpoint, ready to serve.
type Source struct {
	Name      string
	Scheme    string
	Verifier  signature.Verifier
	EventID   extract.Extractor
	EventType extract.Extractor
	// Batch: the body is a JSON array, one event per element (SendGrid).
	Batch bool
	// BodyReplayCheck: the signature does not cover the event id, so a
	// signed body already claimed under another id is quarantined.
	BodyReplayCheck bool
	Destinations    []Destination
	// Split cuts the request into its events (internal/batch.For the
	// scheme); nil: one event, the whole body, its id from EventID.
	Split batch.Splitter
	// Secrets are the source's secrets, for the handshakes that answer
	// with a MAC (x's CRC, zoom's url_validation): the first one is used.
	Secrets []string
	// VerifyToken is meta's hub.verify_token ("": every GET refused).
	VerifyToken string
	// DeferredType is the deferred response to a Discord interaction (0: 5).
	DeferredType int
	// Marks: the sequence value and event time read per event (marks.go).
	Marks *Marks

	filtered bool // some destination has a Filter (set by SetSources)
}

// Destination is a delivery target's name and filters: an event gets a job
// only where both pass.
type Destination struct {
	FullName string // "source/name"
	Match    func(eventType string) bool
	// Filter is the destination's content filter (nil: none). An evaluation
	// error creates the job: delivering an event the app did not want is
	// recoverable, dropping one it did is not.
	Filter *filter.Filter
	// OrderBy extracts the event's order_by key (nil: none). An event
	// without the key (or with one that is not usable text) is not
	// ordered.
	OrderBy extract.Extractor
}

// Observer receives what the receiver did, for metrics. All methods must be
// cheap and safe for concurrent use.
type Observer interface {
	// Request is called once per request with its outcome label (docs/reference.md, "Metrics").
	Request(source, outcome string, d time.Duration)
	// Event is called per event recorded, with its outcome and type.
	Event(source, eventType string, outcome hookwarden.Outcome, divergent bool)
	// Unauthorized is called per failed verification with the reason.
	Unauthorized(source, reason string)
	// Quarantined is called per quarantined request with its kind
	// (hookwarden.QuarantineNoEventID or QuarantineBodyReplayed).
	Quarantined(source, kind string)
	// FilterError is called per failed evaluation of a destination's filter
	// (the job was created anyway).
	FilterError(destination string)
}

type nopObserver struct{}

func (nopObserver) Request(string, string, time.Duration)          {}
func (nopObserver) Event(string, string, hookwarden.Outcome, bool) {}
func (nopObserver) Unauthorized(string, string)                    {}
func (nopObserver) Quarantined(string, string)                     {}
func (nopObserver) FilterError(string)                             {}

// Options configure a Receiver.
type Options struct {
	Recorder     Recorder
	MaxBodyBytes int64
	// Notify is called after a commit with the destinations that got new
	// jobs, so their workers start at once instead of at their next poll.
	Notify   func(destinations []string)
	Observer Observer
	Logger   *slog.Logger
	Now      func() time.Time
	// RetryAfter is the Retry-After sent with 503 answers (default 5s).
	RetryAfter time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the
	// client in logs and receipts. Empty (default): the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// MaxInflightBytes bounds the request body bytes held in memory, all
	// requests together (default 64 MiB); past it, 503.
	MaxInflightBytes int64
	// MaxInflightPerClient bounds what one client (an address, a /64 for
	// IPv6) may hold of MaxInflightBytes (default a quarter of it, but room
	// for a body of MaxBodyBytes: twice that and 64 KiB of headers).
	MaxInflightPerClient int64
	// MinBodyRate (bytes a second, default 16 KiB/s; < 0: off) and
	// SlowBodyGrace (default 5s): a body is cut (408) when it stalls for the
	// grace, or when past the grace less than MinBodyRate a second has
	// arrived.
	MinBodyRate   int64
	SlowBodyGrace time.Duration
	// CommitTimeout bounds how long a request waits for its commit (default
	// 2s); past it, 503. The commit may still land: the provider's retry is
	// then a duplicate.
	CommitTimeout time.Duration
	// Tokens reads the one-time tokens already recorded, to refuse a known
	// replay before extraction and filters (default: the Recorder, if it
	// is a TokenReader).
	Tokens TokenReader
	// RedactHeaders are stored as "[redacted]", besides the credentials
	// always redacted (Authorization, Proxy-Authorization, Cookie,
	// X-Api-Key, X-Telegram-Bot-Api-Secret-Token). Any case; verification
	// still sees the real values.
	RedactHeaders []string
}

// DefaultMaxInflightBytes and DefaultCommitTimeout are the defaults of the
// limits of the same names.
const (
	DefaultMaxInflightBytes = 64 << 20
	DefaultCommitTimeout    = 2 * time.Second
	DefaultMinBodyRate      = 16 << 10
	DefaultSlowBodyGrace    = 5 * time.Second
)

// alwaysRedacted are credentials that never rest in the database (Telegram's
// secret token is the whole of its scheme's check).
var alwaysRedacted = []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "X-Telegram-Bot-Api-Secret-Token"}

// Receiver serves POST /hooks/{source}. Sources can be swapped at run time
// (config reload) without disturbing requests in flight.
type Receiver struct {
	opts      Options
	budget    budget
	deadlines *commitDeadlines
	redacted  []string // canonical header names
	sources   atomic.Pointer[map[string]*Source]
	draining  atomic.Bool
	router    *mux.Router
	filterLog filterLog
}

// New returns a Receiver serving the given sources.
func New(sources []Source, opts Options) *Receiver {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 5 * time.Second
	}
	if opts.Notify == nil {
		opts.Notify = func([]string) {}
	}
	if opts.MaxInflightBytes <= 0 {
		opts.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if t, ok := opts.Recorder.(TokenReader); ok && opts.Tokens == nil {
		opts.Tokens = t
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = DefaultCommitTimeout
	}
	if opts.MaxInflightPerClient <= 0 {
		opts.MaxInflightPerClient = max(opts.MaxInflightBytes/4, 2*opts.MaxBodyBytes+64<<10)
	}
	opts.MaxInflightPerClient = min(opts.MaxInflightPerClient, opts.MaxInflightBytes)
	if opts.MinBodyRate == 0 {
		opts.MinBodyRate = DefaultMinBodyRate
	}
	if opts.SlowBodyGrace <= 0 {
		opts.SlowBodyGrace = DefaultSlowBodyGrace
	}
	rc := &Receiver{opts: opts}
	rc.budget.max, rc.budget.perClient = opts.MaxInflightBytes, opts.MaxInflightPerClient
	rc.budget.clients = map[netip.Prefix]int64{}
	rc.deadlines = newCommitDeadlines(opts.CommitTimeout)
	rc.redacted = append(rc.redacted, alwaysRedacted...)
	for _, h := range opts.RedactHeaders {
		if c := http.CanonicalHeaderKey(strings.TrimSpace(h)); c != "" && !slices.Contains(rc.redacted, c) {
			rc.redacted = append(rc.redacted, c)
		}
	}
	rc.SetSources(sources)
	r := mux.NewRouter()
	r.HandleFunc("/hooks/{source}", rc.serveHook)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		answer(w, http.StatusNotFound, "not_found")
	})
	rc.router = r
	return rc
}

// SetSources replaces the served sources atomically.
func (rc *Receiver) SetSources(sources []Source) {
	m := make(map[string]*Source, len(sources))
	for i := range sources {
		s := sources[i]
		s.filtered = slices.ContainsFunc(s.Destinations, func(d Destination) bool { return d.Filter != nil })
		m[s.Name] = &s
	}
	rc.sources.Store(&m)
}

// Drain makes every new request answer 503: the provider retries later,
// against the next process. Requests already past this check finish normally.
func (rc *Receiver) Drain() { rc.draining.Store(true) }

// Draining reports whether Drain was called: /readyz then fails, so that a
// load balancer sends webhooks to the other receivers.
func (rc *Receiver) Draining() bool { return rc.draining.Load() }

// ServeHTTP implements http.Handler.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) { rc.router.ServeHTTP(w, r) }

func (rc *Receiver) serveHook(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name := mux.Vars(r)["source"]
	src := (*rc.sources.Load())[name]
	outcome := rc.handle(w, r, src)
	if src != nil {
		rc.opts.Observer.Request(name, outcome, time.Since(start))
	} else {
		// Unknown names are attacker-chosen: never a label value.
		rc.opts.Observer.Request("", outcome, time.Since(start))
	}
}

// handle answers the request and returns its outcome label.
func (rc *Receiver) handle(w http.ResponseWriter, r *http.Request, src *Source) string {
	if src == nil {
		answer(w, http.StatusNotFound, "not_found")
		return "not_found"
	}
	if out, ok := rc.handshakeBefore(w, r, src); ok {
		return out
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, "method_not_allowed")
		return "method_not_allowed"
	}
	if rc.draining.Load() {
		rc.unavailable(w)
		return "unavailable"
	}
	remote := rc.remoteAddr(r)
	held := &hold{b: &rc.budget, client: clientKey(remote)}
	defer held.release()
	body, err := rc.readBody(w, r, held)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			answer(w, http.StatusRequestEntityTooLarge, "too_large")
			return "too_large"
		}
		if errors.Is(err, errBudget) || errors.Is(err, errClientShare) || errors.Is(err, errTooSlow) {
			// The rest of the body stays unread: over HTTP/1 the connection
			// must close, or net/http would wait to drain it.
			if r.ProtoMajor == 1 {
				w.Header().Set("Connection", "close")
			}
			if errors.Is(err, errTooSlow) {
				rc.opts.Logger.Info("request cut: body too slow", "source", src.Name,
					"min_body_bytes_per_second", rc.opts.MinBodyRate, "grace", rc.opts.SlowBodyGrace, "remote", remote)
				answer(w, http.StatusRequestTimeout, "too_slow")
				return "too_slow"
			}
			rc.opts.Logger.Debug("request refused: in-flight body budget full", "source", src.Name, "reason", err.Error(),
				"max_inflight_bytes", rc.opts.MaxInflightBytes, "remote", remote)
			rc.unavailable(w)
			return "unavailable"
		}
		// The client went away or stalled past the read timeout.
		answer(w, http.StatusBadRequest, "bad_request")
		return "bad_request"
	}
	now := rc.opts.Now()
	vreq := &signature.Request{Header: r.Header, Body: body, URL: r.URL.RequestURI(), Now: now}
	if err := src.Verifier.Verify(vreq); err != nil {
		reason := signature.Reason(err)
		rc.opts.Observer.Unauthorized(src.Name, reason)
		// The error never holds a secret; the signature header is not logged.
		rc.opts.Logger.Warn("request refused", "source", src.Name, "reason", reason, "remote", rc.remoteAddr(r))
		answer(w, http.StatusUnauthorized, "unauthorized")
		return "unauthorized"
	}
	if src.Scheme == "slack" {
		if challenge, ok := slackChallenge(body); ok {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"challenge": challenge})
			return "challenge"
		}
	}
	if out, ok := rc.handshakeAfter(w, r, src, body); ok {
		return out
	}

	rec := &hookwarden.Receipt{
		Source:     src.Name,
		Header:     rc.redact(r.Header),
		Body:       body,
		BodySHA256: sha256.Sum256(body),
		RemoteAddr: remote,
		ReceivedAt: now,
	}
	rc.guard(src, vreq, rec)
	if rc.knownReplay(r.Context(), src, rec) {
		return rc.replayed(w, r, src) // before any extraction or filter
	}
	rc.events(src, rec)
	res, err := rc.opts.Recorder.Record(rc.deadlines.get(), rec)
	if err != nil {
		switch {
		case r.Context().Err() != nil: // the client left
		case errors.Is(err, context.DeadlineExceeded):
			// The commit may still land; the retry then finds the claim.
			rc.opts.Logger.Warn("commit timed out", "source", src.Name, "commit_timeout", rc.opts.CommitTimeout)
		case !errors.Is(err, hookwarden.ErrUnavailable):
			rc.opts.Logger.Error("record receipt", "source", src.Name, "err", err)
		}
		rc.unavailable(w)
		return "unavailable"
	}
	if res.Outcome == hookwarden.Replayed {
		return rc.replayed(w, r, src)
	}
	// Committed: from here on the answer is a success.
	var notify []string
	for i, er := range res.Events {
		ev := &rec.Events[i]
		rc.opts.Observer.Event(src.Name, ev.Type, er.Outcome, er.Divergent)
		rc.observeLag(src, rec, ev, er)
		if er.Jobs > 0 {
			notify = append(notify, ev.Destinations...)
		}
		if er.Divergent {
			rc.opts.Logger.Warn("duplicate with different body", "source", src.Name, "event_id", ev.ID, "receipt", res.ReceiptID)
		}
	}
	if len(notify) > 0 {
		rc.opts.Notify(notify)
	}
	if res.Outcome == hookwarden.Quarantined {
		rc.opts.Observer.Quarantined(src.Name, res.QuarantineKind)
		detail := []any{"detail", rec.QuarantineReason}
		if rec.QuarantineReason == "" && len(rec.Events) == 1 {
			detail = []any{"event_id", rec.Events[0].ID} // a body replayed under this id
		}
		rc.opts.Logger.Warn("quarantined", append([]any{"source", src.Name, "reason", res.QuarantineKind, "receipt", res.ReceiptID},
			detail...)...)
	} else {
		rc.opts.Logger.Debug("recorded", "source", src.Name, "outcome", res.Outcome, "receipt", res.ReceiptID)
	}
	rc.answerRecorded(w, r, src, rec, res)
	return string(res.Outcome)
}

// events extracts the request's events, or its quarantine reason.
func (rc *Receiver) events(src *Source, rec *hookwarden.Receipt) {
	// What the filters of every event share; nil (no cost) without filters.
	var freq *filter.Request
	if src.filtered {
		freq = &filter.Request{Source: src.Name, Header: rec.Header}
	}
	if rc.split(src, rec, freq) {
		return
	}
	// Checked as JSON once, for the extractors and the filters.
	ev, err := rc.event(src, rec.Header, &extract.Body{Bytes: rec.Body}, freq, "")
	if err != nil {
		// Why, for the human who looks: absent, or found but not usable as
		// an id (not UTF-8, control characters, too long).
		rec.QuarantineReason = "no event id found (" + err.Error() + ")"
		return
	}
	ev.BodySHA256 = rec.BodySHA256
	rec.Events = []hookwarden.Event{ev}
}

// event extracts one event from doc (the request's body, or a batch element)
// and picks its destinations; id, when set, is the event's id (a splitter
// found it), else the source's EventID reads it. freq is non-nil when some
// destination has a filter.
func (rc *Receiver) event(src *Source, h http.Header, doc *extract.Body, freq *filter.Request, id string) (hookwarden.Event, error) {
	var err error
	if id == "" {
		id, err = src.EventID.ExtractBody(h, doc)
		if err == nil && id == "" {
			err = errors.New("empty")
		}
	}
	if err != nil {
		return hookwarden.Event{}, err
	}
	typ, _ := src.EventType.ExtractBody(h, doc) // a missing type is allowed
	ev := hookwarden.Event{ID: id, Type: typ}
	src.Marks.stamp(h, doc, &ev, rc.opts.Now())
	var fev *filter.Event // built at the first filter, parsed body kept for the next
	for _, d := range src.Destinations {
		if d.Match != nil && !d.Match(typ) {
			continue
		}
		if d.Filter != nil {
			if fev == nil {
				fev = &filter.Event{Request: freq, ID: id, Type: typ, Doc: doc}
			}
			if !rc.filter(d, fev) {
				continue
			}
		}
		if d.OrderBy != nil {
			if key, err := d.OrderBy.ExtractBody(h, doc); err == nil && key != "" {
				if ev.OrderKeys == nil {
					ev.OrderKeys = make([]string, len(ev.Destinations), len(src.Destinations))
				}
				ev.OrderKeys = append(ev.OrderKeys, key)
			} else if ev.OrderKeys != nil {
				ev.OrderKeys = append(ev.OrderKeys, "")
			}
		} else if ev.OrderKeys != nil {
			ev.OrderKeys = append(ev.OrderKeys, "")
		}
		ev.Destinations = append(ev.Destinations, d.FullName)
	}
	return ev, nil
}

// remoteAddr is the client's address: the TCP peer, or, when the peer is a
// trusted proxy, the right-most X-Forwarded-For entry that is not a trusted
// proxy itself. Entries left of that one are whatever the client claimed, so
// they are never believed; an unparsable entry stops the walk at the peer.
func (rc *Receiver) remoteAddr(r *http.Request) string {
	if len(rc.opts.TrustedProxies) == 0 {
		return r.RemoteAddr
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !rc.trusted(peer.Addr()) {
		return r.RemoteAddr
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		a, err := netip.ParseAddr(h)
		if err != nil {
			ap, perr := netip.ParseAddrPort(h) // some proxies append the port
			if perr != nil {
				return r.RemoteAddr
			}
			a = ap.Addr()
		}
		if !rc.trusted(a) {
			return a.Unmap().String()
		}
	}
	return r.RemoteAddr
}

func (rc *Receiver) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range rc.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (rc *Receiver) unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(int((rc.opts.RetryAfter+time.Second-1)/time.Second)))
	answer(w, http.StatusServiceUnavailable, "unavailable")
}

// answer writes the small JSON body of docs/reference.md, "Answers".
func answer(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, `{"status":"`+status+`"}`+"\n")
}

// redact returns the headers to store: a copy with credentials (Postmark's
// basic auth, cookies, API keys, the configured redact_headers) replaced by
// "[redacted]", or h itself when it carries none. Signatures are kept for
// forensics. The request's own headers are untouched: verification has
// already seen them.
func (rc *Receiver) redact(h http.Header) http.Header {
	var c http.Header
	// net/http canonicalises the names it parses (HTTP/1 and HTTP/2), and
	// so were the configured ones: a map lookup ignores case.
	for _, name := range rc.redacted {
		if _, ok := h[name]; !ok {
			continue
		}
		if c == nil {
			c = h.Clone()
		}
		c[name] = []string{"[redacted]"}
	}
	if c == nil {
		return h
	}
	return c
}

// slackChallenge recognises Slack's url_verification request.
func slackChallenge(body []byte) (string, bool) {
	if !bytes.Contains(body, []byte("url_verification")) {
		return "", false // the common case: no JSON parse
	}
	var v struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if json.Unmarshal(body, &v) != nil || v.Type != "url_verification" {
		return "", false
	}
	return v.Challenge, true
}

// MaxHeaderBytes bounds a request's header list. Webhook headers are a few
// KiB (nginx's and Apache's defaults refuse a line over 8 KiB); over HTTP/2
// a connection's 16 streams each hold one before any handler runs, so this
// times 16 is what a connection may cost beyond the budget.
const MaxHeaderBytes = 16 << 10

// NewServer returns an http.Server with every timeout set: net/http has none
// by default, and a receiver without them is one slowloris away from down.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    MaxHeaderBytes,
		// With native TLS one HTTP/2 connection could otherwise open 250
		// streams, each a request body in memory, and buffer 1 MiB of
		// DATA per stream and connection that no handler has read: the
		// window is 64 KiB for the connection and its streams together
		// (HTTP/2's smallest), so what a connection buffers unread stays
		// what an HTTP/1.1 connection's headers may cost. Header lists
		// (MaxHeaderBytes each) are charged to the in-flight budget.
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          16,
			MaxReceiveBufferPerConnection: 64 << 10,
			MaxReceiveBufferPerStream:     64 << 10,
			MaxDecoderHeaderTableSize:     4 << 10,
		},
	}
}
