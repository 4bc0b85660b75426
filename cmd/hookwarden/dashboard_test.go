package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer collects a log; Write may race with reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// browserClient talks to the dashboard like a browser on its own origin: a
// cookie jar, and the Origin and Sec-Fetch-Site headers browsers send.
type browserClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowserClient(t *testing.T, a *testApp) *browserClient {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browserClient{t: t, base: "http://" + a.AdminAddr(), c: &http.Client{Jar: jar, Timeout: 10 * time.Second}}
}

func (b *browserClient) do(req *http.Request) (int, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (b *browserClient) get(path string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	return b.do(req)
}

// post submits a form as the page would; headers may override the browser's.
func (b *browserClient) post(path string, form url.Values, headers ...string) (int, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	return b.do(req)
}

var (
	csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	jobRE  = regexp.MustCompile(`name="job" value="(\d+)"`)
)

func find(t *testing.T, re *regexp.Regexp, page string) string {
	t.Helper()
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("%s not found in the page:\n%s", re, page)
	}
	return m[1]
}

// login submits the login form with token and returns the final status.
func (b *browserClient) login(token string) int {
	b.t.Helper()
	code, page := b.get("/login")
	if code != http.StatusOK {
		b.t.Fatalf("GET /login: %d", code)
	}
	code, _ = b.post("/login", url.Values{"csrf": {find(b.t, csrfRE, page)}, "token": {token}})
	return code
}

// replayFirstDead clicks the first Replay button of the dashboard.
func (b *browserClient) replayFirstDead() string {
	b.t.Helper()
	code, page := b.get("/")
	if code != http.StatusOK {
		b.t.Fatalf("GET /: %d\n%s", code, page)
	}
	code, after := b.post("/dashboard/replay", url.Values{"csrf": {find(b.t, csrfRE, page)}, "job": {find(b.t, jobRE, page)}})
	if code != http.StatusOK {
		b.t.Fatalf("replay: %d\n%s", code, after)
	}
	return after
}

func TestDashboardShowsAndReplaysDeadLetter(t *testing.T) {
	app := newSink(t, 422) // poison once, then 204
	a := startApp(t, app.URL, "")
	a.post("msg_dash", `{"type":"invoice.paid"}`)
	a.post("msg_dash", `{"type":"invoice.paid"}`) // a duplicate
	do(t, signed(t, a.hookURL(), "msg_forged", []byte(`{}`), time.Now(), "whsec_d3JvbmctY29tcGxldGVseS13cm9uZw=="))
	eventually(t, "dead letter", func() bool { return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`) == 1 })

	c := newBrowserClient(t, a)
	code, page := c.get("/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", code, page)
	}
	for _, want := range []string{
		"<code>msg_dash</code>", "HTTP 422", ">Replay</button>", "std/app", // the dead letter and its button
		`<td class="n">1</td><td class="n">1</td><td class="n">1</td>`, // last hour: 1 accepted, 1 duplicate, 1 rejected
		"claims retention margin", "No outage.", "Nothing quarantined.",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if strings.Contains(page, `id="no-dead"`) {
		t.Error("dashboard says no dead letters while there is one")
	}
	after := c.replayFirstDead()
	if !strings.Contains(after, "Replayed 1 job(s)") {
		t.Errorf("no confirmation after replay:\n%s", after)
	}
	eventually(t, "delivered after replay", func() bool {
		return a.count(`SELECT count(*) FROM jobs WHERE state = 'delivered'`) == 1
	})
	if _, page = c.get("/"); !strings.Contains(page, `id="no-dead"`) {
		t.Errorf("dead letter still listed after delivery:\n%s", page)
	}
	if n := app.count(); n != 2 {
		t.Errorf("requests at the app: %d, want 2 (poison, then the replay)", n)
	}
}

func TestDashboardRefusesCrossSiteAndForeignHosts(t *testing.T) {
	app := newSink(t, 422)
	a := startApp(t, app.URL, "")
	a.post("msg_x", `{"type":"x"}`)
	eventually(t, "dead letter", func() bool { return a.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`) == 1 })
	c := newBrowserClient(t, a)
	resp, err := http.Get(c.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k, want := range map[string]string{
		"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Content-Type": "text/html; charset=utf-8",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "script") {
		t.Errorf("Content-Security-Policy = %q: want no framing and no script", csp)
	}
	_, page := c.get("/")
	form := url.Values{"csrf": {find(t, csrfRE, page)}, "job": {find(t, jobRE, page)}}
	for _, tc := range []struct {
		name    string
		form    url.Values
		headers []string
	}{
		{"no form token", url.Values{"job": form["job"]}, nil},
		{"forged form token", url.Values{"job": form["job"], "csrf": {"AAAA"}}, nil},
		{"cross-site fetch", form, []string{"Sec-Fetch-Site", "cross-site"}},
		{"foreign origin", form, []string{"Sec-Fetch-Site", "", "Origin", "http://evil.example"}},
		{"rebound host name", form, []string{"Host", "evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, c.base+"/dashboard/replay", strings.NewReader(tc.form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", c.base)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			for i := 0; i+1 < len(tc.headers); i += 2 {
				switch {
				case tc.headers[i] == "Host":
					req.Host = tc.headers[i+1]
				case tc.headers[i+1] == "":
					req.Header.Del(tc.headers[i])
				default:
					req.Header.Set(tc.headers[i], tc.headers[i+1])
				}
			}
			if code, body := c.do(req); code != http.StatusForbidden {
				t.Errorf("got %d, want 403\n%s", code, body)
			}
		})
	}
	if n := a.count(`SELECT count(*) FROM jobs WHERE state = 'dead'`); n != 1 {
		t.Fatalf("a refused request replayed the job (dead letters: %d)", n)
	}
	req, _ := http.NewRequest(http.MethodGet, c.base+"/", nil)
	req.Host = "evil.example:80"
	if code, _ := c.do(req); code != http.StatusForbidden {
		t.Errorf("GET / with a DNS name and no token: %d, want 403", code)
	}
	// The same-origin form still works.
	if code, _ := c.post("/dashboard/replay", form); code != http.StatusOK {
		t.Errorf("same-origin replay: %d", code)
	}
}

func TestDashboardLoginSetsStrictHttpOnlyCookie(t *testing.T) {
	const token = "adm-4nV8sQ1xRk2Lm6Pw9Tz3Yc7B"
	app := newSink(t)
	db := filepath.Join(t.TempDir(), "hw.db")
	a := startAppYAML(t, fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0", token: %q }
database: { path: %q }
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations: [{ name: app, url: %q }]
`, token, db, testSecret, app.URL), db)
	base := "http://" + a.AdminAddr()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := noFollow.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("GET / without token: %d %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/metrics", "/api/stats"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without token: %d, want 401", p, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET / with the bearer header: %d, want 200", resp.StatusCode)
	}

	c := newBrowserClient(t, a)
	if code := c.login("wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	// The login answer's cookie, read before the jar hides its attributes.
	_, page := c.get("/login")
	form := url.Values{"csrf": {find(t, csrfRE, page)}, "token": {token}}
	req, _ = http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err = noFollow.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "hookwarden_token" {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" {
		t.Fatalf("login cookie %+v: want HttpOnly, SameSite=Strict, Path=/", cookie)
	}
	if strings.Contains(cookie.Value, token) {
		t.Fatal("the login cookie carries the admin token itself")
	}
	if code := c.login(token); code != http.StatusOK {
		t.Fatalf("login: %d", code)
	}
	code, page := c.get("/")
	if code != http.StatusOK || !strings.Contains(page, "log out") {
		t.Fatalf("dashboard after login: %d", code)
	}
	if code, _ := c.get("/metrics"); code != http.StatusOK {
		t.Errorf("/metrics with the cookie: %d, want 200", code)
	}
	if code, _ := c.post("/logout", url.Values{"csrf": {find(t, csrfRE, page)}}); code != http.StatusOK {
		t.Errorf("logout: %d", code)
	}
	if code, page := c.get("/"); code != http.StatusOK || !strings.Contains(page, `name="token"`) {
		t.Errorf("after logout GET / shows %d, want the login form", code)
	}
}

// The dashboard's Pause and Resume buttons: the page shows the state, a
// form without the anti-forgery token is refused, a pause holds the
// deliveries, and both are in the audit log with origin dashboard.
func TestDashboardPausesAndResumes(t *testing.T) {
	app := newSink(t)
	a := startApp(t, app.URL, "        order_by: json:data.customer\n")
	b := newBrowserClient(t, a)
	code, page := b.get("/")
	if code != http.StatusOK || !strings.Contains(page, `action="/dashboard/pause"`) {
		t.Fatalf("GET /: %d, no Pause button:\n%s", code, page)
	}
	tok := find(t, csrfRE, page)
	if code, _ := b.post("/dashboard/pause", url.Values{"destination": {"std/app"}}); code != http.StatusForbidden {
		t.Fatalf("pause without the form token: %d, want 403", code)
	}
	if code, _ := b.post("/dashboard/pause", url.Values{"csrf": {tok}, "destination": {"std/nope"}}); code != http.StatusNotFound {
		t.Fatalf("pause of an unknown destination: %d, want 404", code)
	}
	code, page = b.post("/dashboard/pause", url.Values{"csrf": {tok}, "destination": {"std/app"}})
	if code != http.StatusOK || !strings.Contains(page, "Paused std/app") || !strings.Contains(page, "paused (manual)") ||
		!strings.Contains(page, `action="/dashboard/resume"`) {
		t.Fatalf("after pause: %d\n%s", code, page)
	}
	a.post("msg_held", `{"type":"t","data":{"customer":"c1"}}`)
	if n := a.count(`SELECT count(*) FROM jobs WHERE state = 'pending' AND leased_until IS NULL`); n != 1 {
		t.Fatalf("while paused: %d jobs waiting, want 1 (not handed to a slot)", n)
	}
	code, page = b.post("/dashboard/resume", url.Values{"csrf": {tok}, "destination": {"std/app"}})
	if code != http.StatusOK || !strings.Contains(page, "Resumed std/app") {
		t.Fatalf("after resume: %d\n%s", code, page)
	}
	app.wait(t)
	if n := a.count(`SELECT count(*) FROM audit WHERE origin = 'dashboard' AND action IN ('pause', 'resume')`); n != 2 {
		t.Fatalf("%d dashboard audit entries, want 2", n)
	}
}

// The outbox table lists an order_by key whose head keeps failing, with
// its head event and last error.
func TestDashboardShowsBlockedKeys(t *testing.T) {
	fail := make([]int, 1000)
	for i := range fail {
		fail[i] = http.StatusServiceUnavailable
	}
	app := newSink(t, fail...)
	a := startApp(t, app.URL, "        order_by: json:data.customer\n        max_attempts: 100000\n")
	a.post("msg_head", `{"type":"t","data":{"customer":"cus_9"}}`)
	a.post("msg_next", `{"type":"t","data":{"customer":"cus_9"}}`)
	b := newBrowserClient(t, a)
	var page string
	eventually(t, "the blocked key on the dashboard", func() bool {
		_, page = b.get("/")
		return strings.Contains(page, "blocked key <code>cus_9</code>: head <code>msg_head</code>")
	})
	if !strings.Contains(page, "HTTP 503") {
		t.Errorf("the blocked key's last error is not shown:\n%s", page)
	}
	if n := a.count(`SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id JOIN events e ON e.id = j.event_ref
		WHERE e.event_id = 'msg_next'`); n != 0 {
		t.Errorf("msg_next was attempted %d times behind its failing head", n)
	}
}
