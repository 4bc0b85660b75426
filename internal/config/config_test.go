package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * Day, true},
		{"1d12h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"1.5h", 90 * time.Minute, true},
		{" 5m ", 5 * time.Minute, true},
		{"0d", 0, true},
		{"", 0, false},
		{"d", 0, false},
		{"-1d", 0, false},
		{"-5m", 0, false},
		{"5", 0, false},
		{"1d-5m", 0, false},
		{"3x", 0, false},
		{"999999999d", 0, false},
	} {
		got, err := ParseDuration(c.in)
		if (err == nil) != c.ok || (c.ok && got.D() != c.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", c.in, got.D(), err, c.want, c.ok)
		}
	}
	if s := Duration(30 * Day).String(); s != "30d" {
		t.Errorf("String() = %q, want 30d", s)
	}
	if s := Duration(90 * time.Minute).String(); s != "1h30m0s" {
		t.Errorf("String() = %q", s)
	}
}

func TestSecretResolve(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "s"), []byte("value\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600)
	t.Setenv("HW_DIR", dir)
	t.Setenv("HW_SECRET", "from-env")
	for _, c := range []struct {
		ref, want, errHas string
	}{
		{"literal", "literal", ""},
		{"env:HW_SECRET", "from-env", ""},
		{"env:HW_NOT_SET", "", "HW_NOT_SET is not set"},
		{"file:${HW_DIR}/s", "value", ""},
		{"file:${HW_DIR}/empty", "", "is empty"},
		{"file:/no/such/file", "", "no such file"},
		{"", "", "empty"},
	} {
		got, err := Secret(c.ref).Resolve()
		if got != c.want || (c.errHas == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.errHas)) {
			t.Errorf("Resolve(%q) = %q, %v; want %q, error containing %q", c.ref, got, err, c.want, c.errHas)
		}
	}
	if s := Secret("hunter2").String(); strings.Contains(s, "hunter2") {
		t.Errorf("a literal secret printed as %q", s)
	}
}

func TestMatchType(t *testing.T) {
	d := Destination{Types: []string{"invoice.*", "checkout.session.completed"}}
	for typ, want := range map[string]bool{
		"invoice.paid": true, "invoice.": true, "checkout.session.completed": true,
		"checkout.session.expired": false, "invoices": false, "": false,
	} {
		if got := d.MatchType(typ); got != want {
			t.Errorf("MatchType(%q) = %v, want %v", typ, got, want)
		}
	}
	if !(Destination{}).MatchType("anything") {
		t.Error("no filter must match everything")
	}
}

func TestUnknownKeysNamesPaths(t *testing.T) {
	doc := map[string]any{
		"listen": "x",
		"sources": []any{map[string]any{
			"name": "s", "secrect": []any{"x"},
			"destinations": []any{map[string]any{"name": "a", "env": map[string]any{"ANY_NAME": "ok"}, "bakoff": map[string]any{}}},
		}},
	}
	var got []string
	for _, p := range UnknownKeys(doc) {
		got = append(got, p.Path)
	}
	want := "sources[0].destinations[0].bakoff sources[0].secrect"
	if strings.Join(got, " ") != want {
		t.Fatalf("unknown keys %v, want %s", got, want)
	}
}

func TestAdminTokenRequiredOffLoopback(t *testing.T) {
	c := Config{Admin: Admin{Listen: "0.0.0.0:8081"}, Sources: []Source{{Name: "s", Scheme: "none", AllowUnsigned: true}}}
	c.ApplyDefaults()
	found := false
	for _, p := range Errors(c.Validate()) {
		found = found || p.Path == "admin.token"
	}
	if !found {
		t.Fatal("a non-loopback admin listener without a token must be refused")
	}
}

func TestDoorLimitsDefaultsAndProblems(t *testing.T) {
	c := Config{Sources: []Source{{Name: "s", Scheme: "none", AllowUnsigned: true}}}
	c.ApplyDefaults()
	if c.Limits.MaxInflightBytes != 64<<20 || c.Limits.MaxConnections != 1024 || c.Limits.CommitTimeout.D() != 2*time.Second ||
		c.Limits.MaxInflightBytesPerClient != 16<<20 || c.Limits.MinBodyBytesPerSecond != 16<<10 || c.Limits.SlowBodyGrace.D() != 5*time.Second {
		t.Fatalf("defaults: %+v", c.Limits)
	}
	if ps := Errors(c.Validate()); len(ps) != 0 {
		t.Fatalf("defaults have problems: %v", ps)
	}
	c.Limits.MaxInflightBytes = 2*c.Limits.MaxBodyBytes - 1 // a growing buffer beside the old one
	c.Limits.MaxInflightBytesPerClient = c.Limits.MaxBodyBytes
	c.Limits.MinBodyBytesPerSecond = -1
	c.Limits.SlowBodyGrace = -1
	c.Limits.MaxConnections = -1
	c.RedactHeaders = []string{"X-Ok", "bad header", ""}
	var got []string
	for _, p := range Errors(c.Validate()) {
		got = append(got, p.Path)
	}
	want := "limits.max_inflight_bytes limits.max_inflight_bytes_per_client limits.min_body_bytes_per_second limits.slow_body_grace limits.max_connections redact_headers[1] redact_headers[2]"
	if strings.Join(got, " ") != want {
		t.Fatalf("problems at %v, want %s", got, want)
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30d", "1d12h", "90m", "-1d", "d", "1.5h", "9999999999999d", "1d1d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v: negative", s, d.D())
		}
		if err == nil {
			// What String prints parses back to the same value.
			back, err := ParseDuration(d.String())
			if err != nil || back != d {
				t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, d.D(), d.String(), back.D(), err)
			}
		}
	})
}

func FuzzSecretRef(f *testing.F) {
	for _, s := range []string{"env:X", "file:/nonexistent", "literal", "", "file:${X}/y", "env:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Secret(s).Resolve()
		if err != nil && !strings.HasPrefix(s, "env:") && !strings.HasPrefix(s, "file:") && s != "" {
			t.Fatalf("a literal failed to resolve: %v", err)
		}
		if err != nil && v != "" {
			t.Fatal("a value came back with an error")
		}
	})
}

func TestResolvePathsAgainstTheConfigDirectory(t *testing.T) {
	c := Config{Database: Database{Path: "./data/hw.db"}, TLS: TLS{Cert: "tls/c.pem", Key: "/abs/k.pem"},
		Admin:   Admin{Token: "file:tok"},
		Sources: []Source{{Secrets: []Secret{"file:s.secret", "file:${CREDENTIALS_DIRECTORY}/x", "env:X", "literal"}}}}
	c.ResolvePaths("/etc/hw")
	for got, want := range map[string]string{
		c.Database.Path:                 "/etc/hw/data/hw.db",
		c.TLS.Cert:                      "/etc/hw/tls/c.pem",
		c.TLS.Key:                       "/abs/k.pem",
		string(c.Admin.Token):           "file:/etc/hw/tok",
		string(c.Sources[0].Secrets[0]): "file:/etc/hw/s.secret",
		string(c.Sources[0].Secrets[1]): "file:${CREDENTIALS_DIRECTORY}/x",
		string(c.Sources[0].Secrets[2]): "env:X",
		string(c.Sources[0].Secrets[3]): "literal",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestCheckListen(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, ":8080": true, "[::1]:0": true, "localhost:65535": true, "0.0.0.0:0": true,
		"127.0.0.1:90900": false, "127.0.0.1:-1": false, "127.0.0.1:http": false, "127.0.0.1": false,
		"bad host!:80": false, "127.0.0.1:8081:1": false,
	} {
		if err := checkListen(addr); (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", addr, err, ok)
		}
	}
}

// TestFlowKeys: rate, order_by and pause_after are checked with their key
// paths, and become the store's flow policy.
func TestFlowKeys(t *testing.T) {
	c := Config{Sources: []Source{{Name: "s", Scheme: "none", AllowUnsigned: true, Destinations: []Destination{
		{Name: "a", URL: "http://127.0.0.1:1/", Rate: "20/s", OrderBy: "json:data.customer", PauseAfter: 5},
		{Name: "b", URL: "http://127.0.0.1:1/", Rate: "20/d", OrderBy: "body:x", PauseAfter: -1},
		{Name: "c", URL: "http://127.0.0.1:1/", Rate: "0/m"},
	}}}}
	c.ApplyDefaults()
	var got []string
	for _, p := range Errors(c.Validate()) {
		got = append(got, p.Path)
	}
	want := "sources[0].destinations[1].rate sources[0].destinations[1].order_by sources[0].destinations[1].pause_after " +
		"sources[0].destinations[2].rate"
	if strings.Join(got, " ") != want {
		t.Fatalf("problems at %v, want %s", got, want)
	}
	p := c.Sources[0].Destinations[0].FlowPolicy("s")
	if p.Destination != "s/a" || p.Rate.N != 20 || p.Rate.Per != time.Second || !p.Ordered || p.PauseAfter != 5 ||
		p.ProbeEvery != time.Hour || p.Concurrency != 4 {
		t.Fatalf("flow policy %+v", p)
	}
	if p := c.Sources[0].Destinations[2].FlowPolicy("s"); !p.Rate.IsZero() || p.Ordered || p.PauseAfter != 0 {
		t.Fatalf("flow policy without flow keys: %+v", p)
	}
}

// TestValidNameAsThePattern checks the hand-written name check against the
// pattern it replaced, ^[a-z0-9][a-z0-9_-]{0,62}$ (reference.md's Names):
// every string of up to three bytes from an alphabet with each class's
// edges and neighbours, and lengths around the limit.
func TestValidNameAsThePattern(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	alphabet := []string{"a", "z", "0", "9", "-", "_", "A", "`", "{", "/", ":", ".", " ", "é"}
	var names []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		names = append(names, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+c, n-1)
		}
	}
	grow("", 3)
	for _, n := range []int{62, 63, 64} {
		names = append(names, strings.Repeat("a", n), "a"+strings.Repeat("-", n-1), strings.Repeat("a", n-1)+"A")
	}
	for _, s := range names {
		if got, want := validName(s), re.MatchString(s); got != want {
			t.Errorf("validName(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}

// TestSignAsKey: sign_as is refused, under its key path and with the
// reason, for a scheme whose signature a shared secret cannot make or that
// signs nothing, without signing_secret, on a command destination, and with
// a secret the scheme cannot use; a good one passes, without the whsec_
// warning that is only for Standard Webhooks.
func TestSignAsKey(t *testing.T) {
	dest := func(name, signAs, secret string) Destination {
		return Destination{Name: name, URL: "http://127.0.0.1:1/", SignAs: signAs, SigningSecret: Secret(secret)}
	}
	c := Config{Sources: []Source{{Name: "s", Scheme: "none", AllowUnsigned: true, Destinations: []Destination{
		dest("ok", "stripe", "whsec_plain_stripe_secret"),
		dest("asym", "sendgrid", "x"),
		dest("body", "mailgun", "x"),
		dest("nothing", "postmark", "x"),
		dest("nosecret", "github", ""),
		dest("badsecret", "telegram", "not a token"),
		{Name: "cmd", Command: []string{"/bin/true"}, SignAs: "stripe", SigningSecret: "x"},
		dest("unknown", "stripee", "x"),
	}}}}
	c.ApplyDefaults()
	got := map[string]string{}
	for _, p := range c.Validate() {
		got[p.Path] += p.Message
	}
	want := map[string]string{
		"sources[0].destinations[1].sign_as":        "only SendGrid holds the private key",
		"sources[0].destinations[2].sign_as":        "inside the body",
		"sources[0].destinations[3].sign_as":        "signs nothing",
		"sources[0].destinations[4].sign_as":        "needs signing_secret",
		"sources[0].destinations[5].signing_secret": "Telegram",
		"sources[0].destinations[6].sign_as":        "only for url destinations",
		"sources[0].destinations[7].sign_as":        "want one of",
	}
	for path, msg := range want {
		if !strings.Contains(got[path], msg) {
			t.Errorf("%s: %q, want it to say %q", path, got[path], msg)
		}
	}
	for path, msg := range got {
		if strings.HasPrefix(path, "sources[0].destinations[0]") {
			t.Errorf("a good sign_as: %s: %s", path, msg)
		}
		if strings.Contains(msg, "not a token") {
			t.Errorf("%s echoes the secret: %s", path, msg)
		}
	}

	// A platform that puts several events in one request delivers each as
	// its own envelope: the signature is over that, and check says so.
	m := Config{Sources: []Source{{Name: "wa", Scheme: "meta", Secrets: []Secret{"app-secret"},
		Destinations: []Destination{dest("app", "meta", "app-secret")}}}}
	m.ApplyDefaults()
	var warned bool
	for _, p := range m.Validate() {
		if p.Path == "sources[0].destinations[0].sign_as" {
			warned = p.Warning && strings.Contains(p.Message, "each delivery is one event's bytes")
			if !p.Warning {
				t.Errorf("sign_as on a batch platform: %s (an error, want a warning)", p.Message)
			}
		}
	}
	if !warned {
		t.Error("sign_as: meta on a meta source: no warning that each delivery is one event's envelope")
	}
}
