package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/config"
)

// A filter that does not compile is named by check and refused by serve
// (exit 2), with its key path and the line:column of each problem.
func TestFilterThatDoesNotCompileIsNamed(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: ok
        url: "http://127.0.0.1:3000/"
        filter: 'body.livemode && event.type != "invoice.upcoming"'
      - name: app
        url: "http://127.0.0.1:3000/"
        filter: |
          event.type == "invoice.paid" &&
            bdy.livemode
      - name: typed
        url: "http://127.0.0.1:3000/"
        filter: 'event.type'
`, filepath.Join(dir, "hw.db"), testSecret)), 0o600)
	want := []string{
		`error: sources[0].destinations[1].filter: does not compile: 2:3: undeclared reference to 'bdy'`,
		`error: sources[0].destinations[2].filter: does not compile: 1:1: the expression is of type string; a filter must be a bool`,
	}
	for _, cmd := range []string{"check", "serve"} {
		code, out := runBinIn(t, dir, nil, cmd, "--config", cfg)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s", cmd, code, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s output lacks %q:\n%s", cmd, w, out)
			}
		}
		if strings.Contains(out, "destinations[0].filter") {
			t.Errorf("%s reports the filter that compiles:\n%s", cmd, out)
		}
	}
}

// At receive time, in the running program: a filter that is false creates no
// job, one that is true delivers, and one that fails creates the job, is
// delivered, and is counted in hookwarden_filter_errors_total of its
// destination only.
func TestFilterAtReceiveTimeCountsErrors(t *testing.T) {
	s := newSink(t)
	app := startApp(t, s.URL, `        filter: 'body.data.kind == "wanted"'
      - name: other
        url: `+fmt.Sprintf("%q", s.URL)+`
        filter: 'event.type == "x"'
`)
	for i, body := range []string{
		`{"type":"x","data":{"kind":"wanted"}}`, // app and other
		`{"type":"y","data":{"kind":"unwanted"}}`,
		`{"type":"x","nodata":true}`, // app: an error, delivered anyway
	} {
		if a := app.post(fmt.Sprintf("msg_%d", i), body); a.Status != "accepted" {
			t.Fatalf("post %d: %+v", i, a)
		}
	}
	if n := app.count(`SELECT count(*) FROM jobs WHERE destination = 'std/app'`); n != 2 {
		t.Errorf("jobs at std/app: %d, want 2 (the match and the error)", n)
	}
	if n := app.count(`SELECT count(*) FROM jobs WHERE destination = 'std/other'`); n != 2 {
		t.Errorf("jobs at std/other: %d, want 2", n)
	}
	eventually(t, "4 deliveries", func() bool { return s.count() == 4 })
	m := scrapeAll(t, app.AdminAddr())
	if v := m[`hookwarden_filter_errors_total{destination="std/app"}`]; v != 1 {
		t.Errorf("filter errors at std/app: %v, want 1", v)
	}
	if v, ok := m[`hookwarden_filter_errors_total{destination="std/other"}`]; !ok || v != 0 {
		t.Errorf("filter errors at std/other: %v (present %v), want 0", v, ok)
	}
}

// quarantine release picks destinations as the receiver would: the filter
// decides, and an evaluation error delivers.
func TestQuarantineReleaseAppliesFilters(t *testing.T) {
	s := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	a := startAppYAML(t, fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
sources:
  - name: mail
    scheme: hmac
    secrets: ["s3cret"]
    hmac: { header: X-Sig, algorithm: sha256, encoding: hex }
    event_id: "json:meta.id"
    destinations:
      - { name: yes, url: %q, filter: 'body.kind == "a" && event.id == "m-1"' }
      - { name: no, url: %q, filter: 'body.kind == "b"' }
      - { name: err, url: %q, filter: 'body.missing.x == 1' }
`, db, s.URL, s.URL, s.URL), db)
	body := `{"meta":{},"kind":"a"}`
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(body))
	req, _ := http.NewRequest(http.MethodPost, "http://"+a.HookAddr()+"/hooks/mail", strings.NewReader(body))
	req.Header.Set("X-Sig", fmt.Sprintf("%x", mac.Sum(nil)))
	if got := do(t, req); got.Status != "quarantined" {
		t.Fatalf("got %+v, want quarantined", got)
	}
	id := int64(a.count(`SELECT id FROM receipts WHERE kind = 'quarantined'`))
	if _, err := releaseHeld(context.Background(), a.Store, a.cfg, id, "m-1", cliAudit()); err != nil {
		t.Fatal(err)
	}
	for dest, want := range map[string]int{"mail/yes": 1, "mail/no": 0, "mail/err": 1} {
		if n := a.count(`SELECT count(*) FROM jobs WHERE destination = ?`, dest); n != want {
			t.Errorf("jobs at %s: %d, want %d", dest, n, want)
		}
	}
}

// A reload swaps the filters with the sources: the next request sees the new
// one, and a reload whose filter does not compile changes nothing.
func TestReloadSwapsFilters(t *testing.T) {
	s := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	a := startAppYAML(t, stdConfig(db, "", s.URL, `        filter: 'event.type == "a"'`+"\n"), db)
	if got := a.post("msg_1", `{"type":"b"}`); got.Status != "accepted" {
		t.Fatal(got)
	}
	if _, problems, _ := loadConfig([]byte(stdConfig(db, "", s.URL, `        filter: 'event.typ == "b" &&'`+"\n")), "test"); len(config.Errors(problems)) == 0 {
		t.Fatal("a filter that does not compile passed validation")
	}
	if _, err := a.Reload(mustLoad(t, stdConfig(db, "", s.URL, `        filter: 'event.type == "b"'`+"\n"))); err != nil {
		t.Fatal(err)
	}
	if got := a.post("msg_2", `{"type":"b"}`); got.Status != "accepted" {
		t.Fatal(got)
	}
	if n := a.count(`SELECT count(*) FROM jobs j JOIN events e ON e.id = j.event_ref WHERE e.event_id = 'msg_2'`); n != 1 {
		t.Errorf("after the reload, msg_2 has %d jobs, want 1", n)
	}
	if n := a.count(`SELECT count(*) FROM jobs`); n != 1 {
		t.Errorf("%d jobs, want 1 (msg_1 filtered out before the reload)", n)
	}
}
