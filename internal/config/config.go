// Package config is Hookwarden's typed configuration: the shape of the YAML
// file (docs/reference.md, "Configuration"), its defaults, its validation, and the parsing of
// durations with days and of secret references. Loading the file (viper,
// environment overrides) happens in cmd/hookwarden; nothing else here knows
// about viper.
package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/backfill"
	"github.com/hookwarden/hookwarden/internal/batch"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/internal/filter"
	"github.com/hookwarden/hookwarden/internal/signature"
	"github.com/hookwarden/hookwarden/worker"
	"github.com/jackc/pgx/v5/pgconn"
)

// Config is the whole configuration file.
type Config struct {
	// Listen is the provider-facing receiver address (default 127.0.0.1:8080).
	Listen    string    `mapstructure:"listen"`
	Admin     Admin     `mapstructure:"admin"`
	Database  Database  `mapstructure:"database"`
	Limits    Limits    `mapstructure:"limits"`
	Retention Retention `mapstructure:"retention"`
	Log       Log       `mapstructure:"log"`
	Sources   []Source  `mapstructure:"sources"`
	// TLS serves the receiver over HTTPS itself, for hosts without a reverse
	// proxy in front. Off by default: the receiver listens on loopback behind
	// Caddy or nginx (docs/operations.md).
	TLS TLS `mapstructure:"tls"`
	// TrustedProxies are the addresses (IPs or CIDRs) of reverse proxies whose
	// X-Forwarded-For is believed for the client address that is logged and
	// recorded. Empty (the default): the TCP peer is the client.
	TrustedProxies []string `mapstructure:"trusted_proxies"`
	// RedactHeaders are request headers stored as "[redacted]" (any case),
	// besides Authorization, Proxy-Authorization, Cookie, X-Api-Key and
	// X-Telegram-Bot-Api-Secret-Token, which always are.
	RedactHeaders []string `mapstructure:"redact_headers"`
	// InstanceName names this serve in the run log of a shared PostgreSQL
	// store, stable across its restarts (default: the host's name and the
	// listen port, "web1:8080"), so that two receivers on one host are two
	// instances: one's restart is told from an outage, and neither gives
	// back the other's leases as its own at start.
	InstanceName string `mapstructure:"instance_name"`
}

// Instance is InstanceName, or the host's name and the listen port.
func (c *Config) Instance() string {
	if c.InstanceName != "" {
		return c.InstanceName
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	if _, port, err := net.SplitHostPort(c.Listen); err == nil && port != "" {
		return host + ":" + port
	}
	return host
}

// TLS names a PEM certificate chain and its key. Paths may use ${VAR}, e.g.
// ${CREDENTIALS_DIRECTORY}/tls.key. The files are read again on SIGHUP, so a
// renewed certificate needs no restart.
type TLS struct {
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
}

// Enabled reports whether native TLS is configured.
func (t TLS) Enabled() bool { return t.Cert != "" || t.Key != "" }

// Paths returns the certificate and key paths with ${VAR} expanded.
func (t TLS) Paths() (cert, key string) { return os.ExpandEnv(t.Cert), os.ExpandEnv(t.Key) }

// ParseTrustedProxies parses trusted_proxies; a bare IP is a one-address prefix.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted_proxies[%d]: %q is neither an IP address nor a CIDR prefix", i, s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Admin is the operator-facing listener: health, metrics, API, dashboard.
type Admin struct {
	Listen string `mapstructure:"listen"` // default 127.0.0.1:8081
	// Token guards everything but /healthz and /readyz; required when Listen
	// is not a loopback address.
	Token Secret `mapstructure:"token"`
}

// Database locates the store: an SQLite file (Path) or a PostgreSQL
// database (URL), exactly one of them.
type Database struct {
	Path string `mapstructure:"path"` // default ./data/hookwarden.db, unless URL is set
	// URL is a PostgreSQL 15+ connection URL, literal or a secret reference
	// (env:NAME, file:PATH): it usually holds a password. Any number of
	// serve processes may share it.
	URL Secret `mapstructure:"url"`
}

// Postgres reports whether the store is a PostgreSQL database.
func (d Database) Postgres() bool { return d.URL != "" }

// Limits bound what one request may cost.
type Limits struct {
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"` // default 1 MiB
	// MaxInflightBytes: request bodies held in memory at once, all
	// connections together (default 64 MiB); past it, 503.
	MaxInflightBytes int64 `mapstructure:"max_inflight_bytes"`
	// MaxInflightBytesPerClient: what one client (an address, a /64 for
	// IPv6) may hold of MaxInflightBytes (default a quarter of it, at least
	// twice MaxBodyBytes and 64 KiB); past it, that client gets 503.
	MaxInflightBytesPerClient int64 `mapstructure:"max_inflight_bytes_per_client"`
	// MinBodyBytesPerSecond and SlowBodyGrace: a body that stalls for the
	// grace, or arrives slower than this rate past it, is cut with 408
	// (defaults 16384 and 5s).
	MinBodyBytesPerSecond int64    `mapstructure:"min_body_bytes_per_second"`
	SlowBodyGrace         Duration `mapstructure:"slow_body_grace"`
	// MaxConnections: open receiver connections (default 1024).
	MaxConnections int `mapstructure:"max_connections"`
	// CommitTimeout: the longest a request waits for its commit before 503
	// (default 2s).
	CommitTimeout Duration `mapstructure:"commit_timeout"`
}

// Retention says how long data is kept.
type Retention struct {
	// Payloads: raw requests (bodies, headers) and attempt logs of finished
	// events; the claim stays with a summary (default 30d).
	Payloads Duration `mapstructure:"payloads"`
	// Claims: event ids, the dedup memory (default 90d). Must outlast every
	// source's retry_horizon + redrive_window.
	Claims Duration `mapstructure:"claims"`
	// Quarantine: held requests nobody released (default 30d).
	Quarantine Duration `mapstructure:"quarantine"`
}

// Log configures structured logging.
type Log struct {
	Level  string `mapstructure:"level"`  // debug|info|warn|error (default info)
	Format string `mapstructure:"format"` // text|json (default: json when not a terminal)
}

// Source is one provider endpoint, served at POST /hooks/{name}.
type Source struct {
	Name          string   `mapstructure:"name"`
	Scheme        string   `mapstructure:"scheme"`
	Secrets       []Secret `mapstructure:"secrets"`
	Tolerance     Duration `mapstructure:"tolerance"`
	EventID       string   `mapstructure:"event_id"`
	EventType     string   `mapstructure:"event_type"`
	RetryHorizon  Duration `mapstructure:"retry_horizon"`
	RedriveWindow Duration `mapstructure:"redrive_window"`
	// RetentionClaims is the source's own claims retention, in place of
	// retention.claims for its events (0: retention.claims; telegram's
	// preset: 7d, since update_id is re-randomized after a quiet week).
	RetentionClaims Duration `mapstructure:"retention_claims"`
	// redriveSet: redrive_window was written, 0 included (NoteExplicit).
	redriveSet    bool
	ExpectWithin  Duration      `mapstructure:"expect_within"`
	HMAC          HMAC          `mapstructure:"hmac"`
	PublicURL     string        `mapstructure:"public_url"`     // twilio: the URL the provider calls
	AllowUnsigned bool          `mapstructure:"allow_unsigned"` // required for scheme none
	Destinations  []Destination `mapstructure:"destinations"`
	// VerifyToken is meta's hub.verify_token, a secret: the GET handshake
	// echoes hub.challenge only when it matches.
	VerifyToken Secret `mapstructure:"verify_token"`
	// Discord configures the answer to Discord interactions.
	Discord Discord `mapstructure:"discord"`
	// Backfill recovers outages from the provider's API (docs/backfill.md);
	// nil: not configured.
	Backfill *Backfill `mapstructure:"backfill"`

	// Sequence, SequenceReset and EventTime: what the receipts say about
	// what is missing (receipts.go; SPEC 12).
	Sequence      string `mapstructure:"sequence"`
	SequenceReset int64  `mapstructure:"sequence_reset"`
	EventTime     string `mapstructure:"event_time"`
}

// Backfill configures the recovery of outages from a provider's API, by
// scheme: stripe and paddle list events (types; stripe: api_version),
// github redelivers a hook's deliveries (hook), standard asks Svix to
// recover an endpoint (app, endpoint).
type Backfill struct {
	APIKey Secret `mapstructure:"api_key"`
	// APIBase is the provider's API (default: the provider's own); http only on loopback.
	APIBase    string   `mapstructure:"api_base"`
	Hook       string   `mapstructure:"hook"`        // github: repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID
	App        string   `mapstructure:"app"`         // standard (Svix): the application id or uid
	Endpoint   string   `mapstructure:"endpoint"`    // standard (Svix): the endpoint id or uid
	Types      []string `mapstructure:"types"`       // stripe, paddle: only these event types
	APIVersion string   `mapstructure:"api_version"` // stripe: the endpoint's pinned API version
	// Auto backfills each outage window once, when serve finds it at start.
	Auto bool `mapstructure:"auto"`
}

// BackfillSchemes are the schemes whose providers keep a history to recover from.
var BackfillSchemes = []string{"stripe", "github", "standard", "paddle"}

// BackfillHistory is how far back the scheme's provider keeps events (or
// redelivers them); 0 when it depends on the sender (Svix).
func BackfillHistory(scheme string) time.Duration {
	switch scheme {
	case "stripe":
		return backfill.StripeHistory
	case "paddle":
		return backfill.PaddleHistory
	case "github":
		return backfill.GitHubHistory
	}
	return 0
}

// BackfillMethod is "list" where Hookwarden records the listed events
// (stripe, paddle), "redeliver" where the provider sends them again
// (github, standard).
func BackfillMethod(scheme string) string {
	if scheme == "telegram" {
		return "" // no history: backfill --status only (receipts.go)
	}
	if scheme == "stripe" || scheme == "paddle" {
		return "list"
	}
	return "redeliver"
}

// Discord configures the answer to a Discord interaction.
type Discord struct {
	// DeferredType is the deferred response answered after the commit: 5
	// (default: a message follows) or 6 (component interactions: the
	// message is updated later).
	DeferredType int `mapstructure:"deferred_type"`
}

// HMAC configures the generic hmac scheme.
type HMAC struct {
	Algorithm       string `mapstructure:"algorithm"`
	Header          string `mapstructure:"header"`
	Encoding        string `mapstructure:"encoding"`
	Prefix          string `mapstructure:"prefix"`
	TimestampHeader string `mapstructure:"timestamp_header"`
	IDHeader        string `mapstructure:"id_header"` // needed when signed uses {id}
	Signed          string `mapstructure:"signed"`
}

// Destination is where a source's events are delivered: an HTTP URL or a command.
type Destination struct {
	Name          string            `mapstructure:"name"`
	URL           string            `mapstructure:"url"`
	Command       []string          `mapstructure:"command"`
	Env           map[string]string `mapstructure:"env"`
	Workdir       string            `mapstructure:"workdir"`
	Timeout       Duration          `mapstructure:"timeout"`
	SigningSecret Secret            `mapstructure:"signing_secret"`
	// SignAs signs deliveries in that provider's own format (a preset name,
	// or svix) with SigningSecret as the provider's secret, instead of
	// Standard Webhooks. Empty: Standard Webhooks when SigningSecret is set.
	SignAs      string   `mapstructure:"sign_as"`
	MaxAttempts int      `mapstructure:"max_attempts"`
	Backoff     Backoff  `mapstructure:"backoff"`
	Concurrency int      `mapstructure:"concurrency"`
	Types       []string `mapstructure:"types"`
	// Filter is a CEL expression over event, headers and body; a job is
	// created only where it is true (besides Types). Empty: every event.
	Filter string `mapstructure:"filter"`
	// Rate limits the attempts started: "N/s", "N/m" or "N/h", a bucket
	// of N shared by every serve on the store. Empty: unlimited.
	Rate string `mapstructure:"rate"`
	// OrderBy is an event key (json:PATH or header:NAME): jobs with the
	// same key are attempted one at a time, in commit order. Empty: none.
	OrderBy string `mapstructure:"order_by"`
	// PauseAfter consecutive retryable failures pause the destination
	// (one probe every backoff.max until one succeeds); 0: never.
	PauseAfter int `mapstructure:"pause_after"`
}

// FlowPolicy is the destination's flow control as the store applies it.
// The configuration must have been validated (a bad rate reads as none).
func (d Destination) FlowPolicy(source string) hookwarden.FlowPolicy {
	r, _ := hookwarden.ParseRate(d.Rate)
	if d.Rate == "" {
		r = hookwarden.Rate{}
	}
	return hookwarden.FlowPolicy{Destination: d.FullName(source), Concurrency: d.Concurrency, Rate: r,
		PauseAfter: d.PauseAfter, ProbeEvery: d.Backoff.Max.D(), Ordered: d.OrderBy != ""}
}

// FlowPolicies lists the flow policy of every configured destination.
func (c *Config) FlowPolicies() []hookwarden.FlowPolicy {
	var out []hookwarden.FlowPolicy
	for _, s := range c.Sources {
		for _, d := range s.Destinations {
			out = append(out, d.FlowPolicy(s.Name))
		}
	}
	return out
}

// Backoff bounds the retry delays of a destination.
type Backoff struct {
	Initial Duration `mapstructure:"initial"`
	Max     Duration `mapstructure:"max"`
}

// FullName is "source/name", the destination's label in metrics and the database.
func (d Destination) FullName(source string) string { return source + "/" + d.Name }

// Default values, written once so docs and code agree. The delivery
// defaults (timeouts, attempts, backoff, concurrency) are package worker's:
// ApplyDefaults writes them into the file's destinations, so `check` and the
// dashboard show the values the workers use.
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultAdminListen  = "127.0.0.1:8081"
	DefaultDatabasePath = "./data/hookwarden.db"
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxInflight  = 64 << 20
	DefaultMaxConns     = 1024
	DefaultMinBodyRate  = 16 << 10
	DefaultSlowGrace    = 5 * time.Second
	DefaultCommitWait   = 2 * time.Second
	DefaultPayloads     = 30 * Day
	DefaultClaims       = 90 * Day
	DefaultQuarantine   = 30 * Day
	DefaultTolerance    = 5 * time.Minute
	DefaultRedrive      = 30 * Day
)

// ApplyDefaults fills every unset field: global defaults, then the source's
// provider preset (event id, type, retry horizon, tolerance), then the
// destination defaults.
func (c *Config) ApplyDefaults() {
	setStr(&c.Listen, DefaultListen)
	setStr(&c.Admin.Listen, DefaultAdminListen)
	if c.Database.URL == "" {
		setStr(&c.Database.Path, DefaultDatabasePath)
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Limits.MaxInflightBytes == 0 {
		c.Limits.MaxInflightBytes = DefaultMaxInflight
	}
	if c.Limits.MaxInflightBytesPerClient == 0 && c.Limits.MaxInflightBytes > 0 && c.Limits.MaxBodyBytes > 0 {
		c.Limits.MaxInflightBytesPerClient = min(c.Limits.MaxInflightBytes,
			max(c.Limits.MaxInflightBytes/4, 2*c.Limits.MaxBodyBytes+64<<10))
	}
	if c.Limits.MinBodyBytesPerSecond == 0 {
		c.Limits.MinBodyBytesPerSecond = DefaultMinBodyRate
	}
	setDur(&c.Limits.SlowBodyGrace, DefaultSlowGrace)
	if c.Limits.MaxConnections == 0 {
		c.Limits.MaxConnections = DefaultMaxConns
	}
	setDur(&c.Limits.CommitTimeout, DefaultCommitWait)
	setDur(&c.Retention.Payloads, DefaultPayloads)
	setDur(&c.Retention.Claims, DefaultClaims)
	setDur(&c.Retention.Quarantine, DefaultQuarantine)
	setStr(&c.Log.Level, "info")
	for i := range c.Sources {
		s := &c.Sources[i]
		if p, ok := signature.PresetFor(s.Scheme); ok && s.Scheme != "hmac" && s.Scheme != "none" {
			setStr(&s.EventID, p.EventID)
			setStr(&s.EventType, p.EventType)
			// A preset's zero horizon is meaningful (GitHub never retries):
			// every outage may lose events, and gaps says so.
			setDur(&s.RetryHorizon, p.RetryHorizon)
			setDur(&s.Tolerance, p.Tolerance)
			setStr(&s.Sequence, p.Sequence)
			setStr(&s.EventTime, p.EventTime)
		} else if ok {
			// Generic senders: their own id/type conventions, and a retry
			// horizon we cannot know; 3 days is the common promise.
			setStr(&s.EventID, p.EventID)
			setStr(&s.EventType, p.EventType)
			setDur(&s.RetryHorizon, 3*Day)
		}
		setStr(&s.EventID, "json:id")
		setStr(&s.EventType, "json:type")
		setDur(&s.Tolerance, DefaultTolerance)
		s.messagingDefaults()
		if !s.redriveSet {
			setDur(&s.RedriveWindow, DefaultRedrive)
		}
		if s.SequenceReset == 0 {
			s.SequenceReset = hookwarden.DefaultSequenceReset
		}
		for j := range s.Destinations {
			d := &s.Destinations[j]
			if d.MaxAttempts == 0 {
				d.MaxAttempts = worker.DefaultMaxAttempts
			}
			setDur(&d.Backoff.Initial, worker.DefaultBackoff.Initial)
			setDur(&d.Backoff.Max, worker.DefaultBackoff.Max)
			if len(d.Command) > 0 {
				setDur(&d.Timeout, worker.DefaultCommandTimeout)
				if d.Concurrency == 0 {
					d.Concurrency = worker.DefaultCommandConcurrency
				}
			} else {
				setDur(&d.Timeout, worker.DefaultHTTPTimeout)
				if d.Concurrency == 0 {
					d.Concurrency = worker.DefaultHTTPConcurrency
				}
			}
		}
	}
}

func setStr(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func setDur(p *Duration, v time.Duration) {
	if *p == 0 {
		*p = Duration(v)
	}
}

// Problem is one thing wrong with a configuration, at a key path such as
// "sources[0].destinations[1].url".
type Problem struct {
	Path    string
	Message string
	Warning bool // reported by check, but does not stop serve
}

func (p Problem) String() string {
	kind := "error"
	if p.Warning {
		kind = "warning"
	}
	return fmt.Sprintf("%s: %s: %s", kind, p.Path, p.Message)
}

// ValidationError carries every problem found, not just the first.
type ValidationError struct{ Problems []Problem }

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration:")
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// validName reports whether s is a source's or a destination's name: 1-63
// lower-case letters, digits, - and _, not starting with - or _. A loop, not
// the regular expression ^[a-z0-9][a-z0-9_-]{0,62}$: compiling that (its
// {0,62} is 62 copies) cost every command's start half a millisecond.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[0] == '_' {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Validate checks a configuration after ApplyDefaults. It returns every
// problem, warnings included; serve refuses to start on any non-warning.
// Secrets are resolved to check that they exist, and their values never
// appear in a problem.
func (c *Config) Validate() []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	warn := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...), Warning: true})
	}
	checkAddr := func(path, addr string) {
		if err := checkListen(addr); err != nil {
			add(path, "%v", err)
		}
	}
	checkAddr("listen", c.Listen)
	checkAddr("admin.listen", c.Admin.Listen)
	if c.Admin.Token == "" && !isLoopback(c.Admin.Listen) && checkListen(c.Admin.Listen) == nil {
		add("admin.token", "required when admin.listen (%s) is not a loopback address", c.Admin.Listen)
	}
	if c.Admin.Token != "" {
		if tok, err := c.Admin.Token.Resolve(); err != nil {
			add("admin.token", "%v", err)
		} else if len(tok) < MinRemoteTokenLen && !isLoopback(c.Admin.Listen) {
			add("admin.token", "too short (%d characters): at least %d are needed when admin.listen (%s) is not a loopback address "+
				"(e.g. openssl rand -hex 32)", len(tok), MinRemoteTokenLen, c.Admin.Listen)
		}
	}
	c.validateDatabase(add)
	if c.Limits.MaxBodyBytes < 0 {
		add("limits.max_body_bytes", "must be positive")
	}
	if c.Limits.MaxInflightBytes < 0 {
		add("limits.max_inflight_bytes", "must be positive")
	} else if c.Limits.MaxInflightBytes < 2*c.Limits.MaxBodyBytes {
		// A buffer grows beside the one it replaces: a body of the limit
		// needs one and a half times its size, and its headers.
		add("limits.max_inflight_bytes", "%d is less than twice limits.max_body_bytes (%d): the largest body allowed could never be read",
			c.Limits.MaxInflightBytes, c.Limits.MaxBodyBytes)
	}
	switch pc := c.Limits.MaxInflightBytesPerClient; {
	case pc < 0:
		add("limits.max_inflight_bytes_per_client", "must be positive")
	case pc > c.Limits.MaxInflightBytes && c.Limits.MaxInflightBytes > 0:
		add("limits.max_inflight_bytes_per_client", "%d is more than limits.max_inflight_bytes (%d)", pc, c.Limits.MaxInflightBytes)
	case pc > 0 && pc < 2*c.Limits.MaxBodyBytes:
		add("limits.max_inflight_bytes_per_client", "%d is less than twice limits.max_body_bytes (%d): the largest body allowed could never be read",
			pc, c.Limits.MaxBodyBytes)
	}
	if c.Limits.MinBodyBytesPerSecond < 0 {
		add("limits.min_body_bytes_per_second", "must be positive")
	}
	if c.Limits.SlowBodyGrace < 0 {
		add("limits.slow_body_grace", "must be positive")
	}
	if c.Limits.MaxConnections < 0 {
		add("limits.max_connections", "must be positive")
	}
	if c.Limits.CommitTimeout < 0 {
		add("limits.commit_timeout", "must be positive")
	}
	for i, h := range c.RedactHeaders {
		if !validHeaderName(h) {
			add(fmt.Sprintf("redact_headers[%d]", i), "%q is not a header name", h)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		add("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "", "text", "json":
	default:
		add("log.format", "%q: want text or json", c.Log.Format)
	}
	c.validateTLS(add)
	for i, s := range c.TrustedProxies {
		if _, err := ParseTrustedProxies([]string{s}); err != nil {
			add(fmt.Sprintf("trusted_proxies[%d]", i), "%q is neither an IP address nor a CIDR prefix", s)
		}
	}
	if n := c.InstanceName; n != "" && (len(n) > 128 || strings.IndexFunc(n, func(r rune) bool { return r < 0x21 || r == 0x7f }) >= 0) {
		add("instance_name", "%q: want up to 128 printable characters, no spaces", n)
	}
	if len(c.Sources) == 0 {
		add("sources", "at least one source is needed")
	}
	seen := map[string]bool{}
	for i := range c.Sources {
		c.validateSource(i, seen, add, warn)
	}
	return dedupeSecrets(ps)
}

// validateDatabase checks that exactly one store is named, and that it can
// be used: a writable place for the SQLite file, or a URL that resolves and
// parses (check connects to it; see cmd/hookwarden).
func (c *Config) validateDatabase(add func(string, string, ...any)) {
	d := c.Database
	switch {
	case d.Path != "" && d.URL != "":
		hint := ""
		if os.Getenv("HOOKWARDEN_DATABASE_PATH") != "" {
			hint = "; database.path comes from HOOKWARDEN_DATABASE_PATH (the packaged systemd unit sets it: " +
				"clear it with a drop-in, Environment=HOOKWARDEN_DATABASE_PATH=)"
		}
		add("database.url", "database.path and database.url are both set: set exactly one "+
			"(database.path: an SQLite file on this machine; database.url: a PostgreSQL database shared by every serve)%s", hint)
	case d.URL != "":
		u, err := d.URL.Resolve()
		if err != nil {
			add("database.url", "%v", err)
			return
		}
		if err := CheckPostgresURL(u); err != nil {
			add("database.url", "%v", err)
		}
	case d.Path == "":
		add("database.path", "empty")
	default:
		if err := checkDatabase(d.Path); err != nil {
			add("database.path", "%s: %v", d.Path, err)
		}
	}
}

// CheckPostgresURL checks that u is a PostgreSQL connection URL. The
// message never quotes u: it may hold a password.
func CheckPostgresURL(u string) error {
	if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
		return errors.New("not a PostgreSQL URL: want postgres://USER@HOST:5432/DATABASE?sslmode=verify-full")
	}
	cfg, err := pgconn.ParseConfig(u)
	if err != nil {
		return errors.New("not a valid PostgreSQL URL: want postgres://USER@HOST:5432/DATABASE?sslmode=verify-full " +
			"(percent-encode @ / ? # : and spaces in the user and password: %40 %2F %3F %23 %3A %20)")
	}
	// pgx ends the password at the first @ and takes the rest for the host:
	// that host would then be printed in every connection error.
	hosts := []string{cfg.Host}
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.Contains(h, "@") {
			return errors.New("the user or password of the URL holds an unescaped @: percent-encode it as %40")
		}
	}
	return nil
}

// validateTLS checks that tls.cert and tls.key come together and load as a
// pair, so a typo fails `check` rather than the first handshake.
func (c *Config) validateTLS(add func(string, string, ...any)) {
	if !c.TLS.Enabled() {
		return
	}
	cert, key := c.TLS.Paths()
	if _, err := expandPath(c.TLS.Cert); err != nil {
		add("tls.cert", "%s: %v", c.TLS.Cert, err)
		return
	}
	if _, err := expandPath(c.TLS.Key); err != nil {
		add("tls.key", "%s: %v", c.TLS.Key, err)
		return
	}
	switch {
	case cert == "":
		add("tls.cert", "required when tls.key is set")
	case key == "":
		add("tls.key", "required when tls.cert is set")
	default:
		if _, err := os.Stat(cert); err != nil {
			add("tls.cert", "%v", err)
		} else if _, err := os.Stat(key); err != nil {
			add("tls.key", "%v", err)
		} else if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
			// The error names files, never key material.
			add("tls.cert", "certificate and key do not load as a pair: %v", err)
		}
	}
}

// Errors filters out warnings.
func Errors(ps []Problem) []Problem {
	var out []Problem
	for _, p := range ps {
		if !p.Warning {
			out = append(out, p)
		}
	}
	return out
}

func (c *Config) validateSource(i int, seen map[string]bool, add, warn func(string, string, ...any)) {
	s := &c.Sources[i]
	p := fmt.Sprintf("sources[%d]", i)
	if !validName(s.Name) {
		add(p+".name", "%q: want lower-case letters, digits, - and _ (it is the URL path /hooks/NAME)", s.Name)
	} else if seen[s.Name] {
		add(p+".name", "%q is used by another source", s.Name)
	}
	seen[s.Name] = true

	known := false
	for _, k := range signature.Schemes() {
		known = known || k == s.Scheme
	}
	switch {
	case s.Scheme == "":
		add(p+".scheme", "required: one of %s", strings.Join(signature.Schemes(), ", "))
	case !known:
		add(p+".scheme", "unknown scheme %q: want one of %s", s.Scheme, strings.Join(signature.Schemes(), ", "))
	case s.Scheme == "none":
		if !s.AllowUnsigned {
			add(p+".scheme", "scheme none accepts unsigned requests from anyone; set allow_unsigned: true to mean it")
		} else {
			warn(p+".scheme", "scheme none: requests are not authenticated")
		}
	default:
		if len(s.Secrets) == 0 {
			add(p+".secrets", "at least one secret is needed for scheme %s", s.Scheme)
		}
		// Unresolvable secrets are reported below, one per key path.
		if params, err := s.SignatureParams(); err == nil {
			if _, err := signature.New(params); err != nil {
				// A secret of the wrong format (an Ed25519 public key that is
				// not 32 bytes, a Telegram token with other characters) is
				// reported under its own key path.
				var se *signature.SecretError
				if errors.As(err, &se) {
					add(fmt.Sprintf("%s.secrets[%d]", p, se.Index), "scheme %s: %v", s.Scheme, se.Err)
				} else {
					add(p, "%v", err)
				}
			}
		}
	}
	for j, sec := range s.Secrets {
		if _, err := sec.Resolve(); err != nil {
			add(fmt.Sprintf("%s.secrets[%d]", p, j), "%v", err)
		}
	}
	s.validateMessaging(p, add)
	if s.Scheme == "twilio" && s.PublicURL == "" {
		add(p+".public_url", "required for scheme twilio: the exact URL Twilio calls, which it signs")
	}
	if margin := c.RetentionMargin(s); margin < 0 && s.RetentionClaims > 0 {
		add(p+".retention_claims", "%s is shorter than the source's retry_horizon + redrive_window (%s): "+
			"a late retry or redrive would be taken for a new event and delivered twice",
			s.RetentionClaims, Duration(s.RetentionClaims.D()-margin))
	} else if margin < 0 {
		add("retention.claims", "%s is shorter than source %q's retry_horizon + redrive_window (%s): "+
			"a late retry or redrive would be taken for a new event and delivered twice",
			c.Retention.Claims, s.Name, Duration(c.Retention.Claims.D()-margin))
	}
	if s.RetentionClaims < 0 {
		add(p+".retention_claims", "%s: a claims retention cannot be negative", s.RetentionClaims)
	}
	if s.Backfill != nil {
		c.validateBackfill(s, p+".backfill", add)
	}
	s.validateMarks(p, add)
	if len(s.Destinations) == 0 {
		warn(p+".destinations", "no destinations: events are recorded but delivered nowhere")
	}
	s.warnUnsignedType(p, warn)
	dseen := map[string]bool{}
	for j, d := range s.Destinations {
		dp := fmt.Sprintf("%s.destinations[%d]", p, j)
		if !validName(d.Name) {
			add(dp+".name", "%q: want lower-case letters, digits, - and _", d.Name)
		} else if dseen[d.Name] {
			add(dp+".name", "%q is used by another destination of this source", d.Name)
		}
		dseen[d.Name] = true
		switch {
		case d.URL == "" && len(d.Command) == 0:
			add(dp, "needs url or command")
		case d.URL != "" && len(d.Command) > 0:
			add(dp, "has both url and command; choose one")
		case d.URL != "":
			if u, err := url.Parse(d.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add(dp+".url", "%q is not an http(s) URL", d.URL)
			}
		case d.Command[0] == "":
			add(dp+".command", "the program (first element) is empty")
		}
		standard := d.SignAs == "" || d.SignAs == "standard" || d.SignAs == "svix"
		if d.SignAs != "" {
			checkSignAs(s, d, dp, add, warn)
		}
		if d.SigningSecret != "" {
			if v, err := d.SigningSecret.Resolve(); err != nil {
				add(dp+".signing_secret", "%v", err)
			} else if standard && !strings.HasPrefix(v, "whsec_") {
				warn(dp+".signing_secret", "not a whsec_<base64> secret: it is used as raw bytes, which Standard Webhooks "+
					"libraries only accept through their raw-key constructors")
			}
		}
		if d.MaxAttempts < 1 {
			add(dp+".max_attempts", "must be at least 1")
		}
		if d.Concurrency < 1 {
			add(dp+".concurrency", "must be at least 1")
		}
		if d.Timeout.D() <= 0 {
			add(dp+".timeout", "must be positive")
		}
		if d.Backoff.Initial.D() <= 0 || d.Backoff.Max.D() < d.Backoff.Initial.D() {
			add(dp+".backoff", "want 0 < initial <= max")
		}
		for k, t := range d.Types {
			if strings.TrimSpace(t) == "" {
				add(fmt.Sprintf("%s.types[%d]", dp, k), "empty type pattern")
			}
		}
		if d.Filter != "" {
			checkFilter(dp+".filter", d.Filter, add)
		}
		if d.Rate != "" {
			if _, err := hookwarden.ParseRate(d.Rate); err != nil {
				add(dp+".rate", "%v", err)
			}
		}
		if d.OrderBy != "" {
			if _, err := extract.Parse(d.OrderBy); err != nil {
				add(dp+".order_by", "%v", err)
			}
		}
		if d.PauseAfter < 0 {
			add(dp+".pause_after", "must be 0 (never) or more")
		}
	}
}

// checkSignAs refuses a sign_as that cannot work: a command destination, a
// scheme whose signature a shared secret cannot make (or that signs
// nothing), no signing_secret, or a secret the scheme cannot use.
func checkSignAs(s *Source, d Destination, dp string, add, warn func(string, string, ...any)) {
	if d.URL == "" {
		add(dp+".sign_as", "only for url destinations: a command gets no signature")
		return
	}
	if err := worker.SignAsRefusal(d.SignAs); err != nil {
		add(dp+".sign_as", "%v", err)
		return
	}
	if d.SigningSecret == "" {
		add(dp+".sign_as", "needs signing_secret: the %s secret the app verifies with", d.SignAs)
		return
	}
	if v, err := d.SigningSecret.Resolve(); err == nil { // else reported under signing_secret
		if err := worker.CheckSignAs(d.SignAs, v); err != nil {
			add(dp+".signing_secret", "%v", err)
		}
	}
	if batch.Several(s.Scheme) {
		warn(dp+".sign_as", "scheme %s splits a request into its events: each delivery is one event's bytes, "+
			"signed as %s, not the provider's whole request", s.Scheme, d.SignAs)
	}
}

// validateBackfill checks a source's backfill: keys against its scheme, and
// that the dedup memory outlasts the provider's history: an event listed
// again after its claim was pruned would be delivered twice.
func (c *Config) validateBackfill(s *Source, p string, add func(string, string, ...any)) {
	b := s.Backfill
	if s.Scheme == "telegram" {
		validateStatusOnly(s, p, add)
		return
	}
	if !slices.Contains(BackfillSchemes, s.Scheme) {
		add(p, "scheme %s has no history to backfill from: backfill is for %s", s.Scheme, strings.Join(BackfillSchemes, ", "))
		return
	}
	if b.APIKey == "" {
		add(p+".api_key", "required: the provider's API key (a secret reference such as env:NAME)")
	} else if _, err := b.APIKey.Resolve(); err != nil {
		add(p+".api_key", "%v", err)
	}
	if b.APIBase != "" {
		if err := backfill.CheckAPIBase(b.APIBase); err != nil {
			add(p+".api_base", "%v", err)
		}
	}
	unused := func(key string, set bool, schemes string) {
		if set {
			add(p+"."+key, "not used by scheme %s (only %s)", s.Scheme, schemes)
		}
	}
	switch s.Scheme {
	case "github":
		if b.Hook == "" {
			add(p+".hook", "required for github: repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID")
		} else if err := backfill.CheckHook(b.Hook); err != nil {
			add(p+".hook", "%v", err)
		}
	case "standard":
		if b.App == "" {
			add(p+".app", "required for standard (Svix): the sender's application id or uid")
		}
		if b.Endpoint == "" {
			add(p+".endpoint", "required for standard (Svix): the endpoint id or uid")
		}
	}
	unused("hook", b.Hook != "" && s.Scheme != "github", "github")
	unused("app", b.App != "" && s.Scheme != "standard", "standard")
	unused("endpoint", b.Endpoint != "" && s.Scheme != "standard", "standard")
	unused("types", len(b.Types) > 0 && BackfillMethod(s.Scheme) != "list", "stripe, paddle")
	unused("api_version", b.APIVersion != "" && s.Scheme != "stripe", "stripe")
	for k, t := range b.Types {
		if strings.TrimSpace(t) == "" {
			add(fmt.Sprintf("%s.types[%d]", p, k), "empty event type")
		}
	}
	if h := BackfillHistory(s.Scheme); BackfillMethod(s.Scheme) == "list" && c.Retention.Claims.D() < h {
		add("retention.claims", "%s is shorter than the %s history source %q backfills from (%s): "+
			"an event listed again after its claim was pruned would be delivered twice",
			c.Retention.Claims, s.Scheme, s.Name, Duration(h))
	}
}

// checkFilter compiles a destination's filter as serve will, reporting
// every problem with its line:column in the expression.
func checkFilter(path, expr string, add func(string, string, ...any)) {
	_, err := filter.Compile(expr)
	var ce *filter.CompileError
	switch {
	case errors.As(err, &ce):
		for _, is := range ce.Issues {
			add(path, "does not compile: %s", is)
		}
	case err != nil:
		add(path, "%v", err)
	}
}

// SignatureParams resolves the source's secrets into verifier parameters.
func (s *Source) SignatureParams() (signature.Params, error) {
	secrets := make([]string, 0, len(s.Secrets))
	for _, sec := range s.Secrets {
		v, err := sec.Resolve()
		if err != nil {
			return signature.Params{}, err
		}
		secrets = append(secrets, v)
	}
	return signature.Params{
		Scheme:    s.Scheme,
		Secrets:   secrets,
		Tolerance: s.Tolerance.D(),
		PublicURL: s.PublicURL,
		HMAC: signature.HMACParams{
			Algorithm:       s.HMAC.Algorithm,
			Header:          s.HMAC.Header,
			Encoding:        s.HMAC.Encoding,
			Prefix:          s.HMAC.Prefix,
			TimestampHeader: s.HMAC.TimestampHeader,
			IDHeader:        s.HMAC.IDHeader,
			Signed:          s.HMAC.Signed,
		},
	}, nil
}

// MatchType reports whether an event type passes a destination's filter.
// Patterns are exact, or end in "*" to match a prefix ("invoice.*").
func (d Destination) MatchType(eventType string) bool {
	if len(d.Types) == 0 {
		return true
	}
	for _, t := range d.Types {
		if p, ok := strings.CutSuffix(t, "*"); ok {
			if strings.HasPrefix(eventType, p) {
				return true
			}
		} else if t == eventType {
			return true
		}
	}
	return false
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validHeaderName reports whether s is an HTTP field name (an RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// coverage is the source's signature parameters without secrets: enough to
// say what its signature covers.
func (s *Source) coverage() signature.Params {
	p, _ := (&Source{Scheme: s.Scheme, HMAC: s.HMAC}).SignatureParams()
	return p
}

// unsignedHeaders lists the headers spec reads that the source's signature
// does not cover.
func (s *Source) unsignedHeaders(spec string) []string {
	var out []string
	p := s.coverage()
	for _, h := range extract.Headers(spec) {
		if !signature.HeaderCovered(p, h) {
			out = append(out, h)
		}
	}
	return out
}

// RetentionMargin is how long a claim of source s outlives the last retry
// its provider may send and the last redrive an operator may ask for:
// retention.claims minus (retry_horizon + redrive_window). Negative, a late
// double would find no claim and be delivered again.
func (c *Config) RetentionMargin(s *Source) time.Duration {
	return c.ClaimsRetention(s) - (s.RetryHorizon.D() + s.RedriveWindow.D())
}

// ClaimsRetention is how long source s's claims are kept: its
// retention_claims, else retention.claims.
func (c *Config) ClaimsRetention(s *Source) time.Duration {
	if s.RetentionClaims > 0 {
		return s.RetentionClaims.D()
	}
	return c.Retention.Claims.D()
}

// BodyReplayCheck reports whether the source's signature covers its body but
// not its event id (github, shopify, twilio, hmac with a header id): a
// captured request could be sent again under a fresh id, so a signed body
// already claimed under another id is quarantined (docs/security.md). Batch
// sources carry their ids inside the signed body.
func (s *Source) BodyReplayCheck() bool {
	if _, body := signature.Covered(s.coverage()); !body {
		return false
	}
	if p, ok := signature.PresetFor(s.Scheme); ok && p.Batch {
		return false
	}
	return len(s.unsignedHeaders(s.EventID)) > 0
}

// warnUnsignedType warns when a destination's types filter depends on an
// event type read from a header the signature does not cover: whoever holds
// one captured request can send it with another type.
func (s *Source) warnUnsignedType(p string, warn func(string, string, ...any)) {
	hs := s.unsignedHeaders(s.EventType)
	if len(hs) == 0 {
		return
	}
	for j, d := range s.Destinations {
		if len(d.Types) > 0 {
			warn(fmt.Sprintf("%s.destinations[%d].types", p, j), "filters on the event type from header %s, which the %s signature "+
				"does not cover: a captured request can be sent with another type (replays of its body are quarantined)",
				strings.Join(hs, ", "), s.Scheme)
		}
	}
}
