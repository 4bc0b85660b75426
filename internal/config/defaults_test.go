package config

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// TestDocumentedDeliveryDefaults: the delivery defaults that docs/reference.md
// lists, and that config.example.yaml shows on its first URL and command
// destinations, are the ones ApplyDefaults writes (package worker's).
func TestDocumentedDeliveryDefaults(t *testing.T) {
	c := &Config{Sources: []Source{{Name: "s", Scheme: "standard", Destinations: []Destination{
		{Name: "url", URL: "http://127.0.0.1:3000/"},
		{Name: "cmd", Command: []string{"true"}},
	}}}}
	c.ApplyDefaults()
	url, cmd := c.Sources[0].Destinations[0], c.Sources[0].Destinations[1]

	// The reference's table: | `key` | default | meaning |, with "(URL)" and
	// "(command)" variants.
	ref, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	table := string(ref)
	i := strings.Index(table, "### Destination keys")
	if i < 0 {
		t.Fatal(`docs/reference.md: no "### Destination keys" table`)
	}
	table = table[i:]
	cell := func(key string) string {
		t.Helper()
		m := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(key) + "` \\| ([^|]*) \\|").FindStringSubmatch(table)
		if m == nil {
			t.Fatalf("docs/reference.md: no row for %s", key)
		}
		return m[1]
	}
	// variant picks "`10s` (URL)" out of "`10s` (URL), `60s` (command)".
	variant := func(c, kind string) string {
		t.Helper()
		if kind == "" {
			return strings.Trim(strings.TrimSpace(c), "`")
		}
		m := regexp.MustCompile("`([^`]*)` \\(" + kind + "\\)").FindStringSubmatch(c)
		if m == nil {
			t.Fatalf("docs/reference.md: %q has no %s value", c, kind)
		}
		return m[1]
	}
	dur := func(s string) time.Duration {
		t.Helper()
		d, err := ParseDuration(s)
		if err != nil {
			t.Fatalf("documented default %q: %v", s, err)
		}
		return d.D()
	}
	for _, tc := range []struct {
		key, kind string
		got       any // what ApplyDefaults wrote
	}{
		{"timeout", "URL", url.Timeout.D()},
		{"timeout", "command", cmd.Timeout.D()},
		{"max_attempts", "", url.MaxAttempts},
		{"backoff.initial", "", url.Backoff.Initial.D()},
		{"backoff.max", "", url.Backoff.Max.D()},
		{"concurrency", "URL", url.Concurrency},
		{"concurrency", "command", cmd.Concurrency},
	} {
		doc := variant(cell(tc.key), tc.kind)
		var want any = doc
		switch tc.got.(type) {
		case time.Duration:
			want = dur(doc)
		case int:
			n, err := strconv.Atoi(doc)
			if err != nil {
				t.Fatalf("documented default %q of %s: %v", doc, tc.key, err)
			}
			want = n
		}
		if want != tc.got {
			t.Errorf("%s %s: docs/reference.md says %v, ApplyDefaults gives %v", tc.key, tc.kind, want, tc.got)
		}
	}

	// config.example.yaml shows every key with its default or an example:
	// its first URL destination and first command destination use defaults.
	b, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Sources []struct {
			Destinations []struct {
				URL         string   `yaml:"url"`
				Command     []string `yaml:"command"`
				Timeout     string   `yaml:"timeout"`
				MaxAttempts int      `yaml:"max_attempts"`
				Concurrency int      `yaml:"concurrency"`
				Backoff     struct {
					Initial string `yaml:"initial"`
					Max     string `yaml:"max"`
				} `yaml:"backoff"`
			} `yaml:"destinations"`
		} `yaml:"sources"`
	}
	if err := yaml.Unmarshal(b, &ex); err != nil {
		t.Fatalf("config.example.yaml: %v", err)
	}
	var sawURL, sawCmd bool
	for _, s := range ex.Sources {
		for _, d := range s.Destinations {
			switch {
			case d.URL != "" && !sawURL:
				sawURL = true
				if got := dur(d.Timeout); got != url.Timeout.D() {
					t.Errorf("config.example.yaml: URL timeout %s, default %s", got, url.Timeout.D())
				}
				if d.MaxAttempts != url.MaxAttempts || d.Concurrency != url.Concurrency {
					t.Errorf("config.example.yaml: max_attempts %d, concurrency %d; defaults %d, %d",
						d.MaxAttempts, d.Concurrency, url.MaxAttempts, url.Concurrency)
				}
				if dur(d.Backoff.Initial) != url.Backoff.Initial.D() || dur(d.Backoff.Max) != url.Backoff.Max.D() {
					t.Errorf("config.example.yaml: backoff %s/%s, defaults %s/%s",
						d.Backoff.Initial, d.Backoff.Max, url.Backoff.Initial, url.Backoff.Max)
				}
			case len(d.Command) > 0 && !sawCmd:
				sawCmd = true
				if got := dur(d.Timeout); got != cmd.Timeout.D() {
					t.Errorf("config.example.yaml: command timeout %s, default %s", got, cmd.Timeout.D())
				}
			}
		}
	}
	if !sawURL || !sawCmd {
		t.Fatalf("config.example.yaml: a URL destination %v, a command destination %v; want both", sawURL, sawCmd)
	}
}
