package admin

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/sqlitestore"
)

const longToken = "0123456789abcdef0123456789abcdef-admin"

// fakeClock is the injected clock of sessions and failure delays.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// authServer is the admin handler with the dashboard, as serve mounts it,
// on a real loopback listener.
func authServer(t *testing.T, clock *fakeClock, proxies ...string) (*httptest.Server, *Admin) {
	t.Helper()
	var ps []netip.Prefix
	for _, p := range proxies {
		ps = append(ps, netip.MustParsePrefix(p))
	}
	log := slog.New(slog.DiscardHandler)
	adm := New(Options{Token: longToken, Logger: log, Now: clock.Now, TrustedProxies: ps,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics\n") })})
	store, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "hw.db"), sqlitestore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	d, err := NewDashboard(DashboardOptions{Store: store, Authorized: adm.Authorized, TokenSet: true,
		Sessions: adm, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	d.Register(adm.Router())
	srv := httptest.NewServer(d.Front(adm))
	t.Cleanup(srv.Close)
	return srv, adm
}

// bearer GETs /metrics with a token, from the client forwarded as xff
// (empty: no header), and returns the status and Retry-After.
func bearer(t *testing.T, c *http.Client, base, token, xff string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestWrongTokensAreSlowedPerClient: behind a trusted proxy, one client
// guessing is held back with 429 and a doubling Retry-After, even for the
// right token, while another client's right token goes through.
func TestWrongTokensAreSlowedPerClient(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	srv, _ := authServer(t, clock, "127.0.0.1/32")
	c := srv.Client()
	const guesser, other = "192.0.2.1", "198.51.100.7"
	for i := 1; i <= failFree; i++ {
		if code, _ := bearer(t, c, srv.URL, "guess", guesser); code != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d: %d, want 401", i, code)
		}
	}
	code, retry := bearer(t, c, srv.URL, "guess", guesser)
	if code != http.StatusTooManyRequests || retry != "1" {
		t.Fatalf("guess after %d failures: %d Retry-After %q, want 429 and 1", failFree, code, retry)
	}
	if code, _ := bearer(t, c, srv.URL, longToken, guesser); code != http.StatusTooManyRequests {
		t.Fatalf("the right token from the held-back client: %d, want 429 (not compared)", code)
	}
	if code, _ := bearer(t, c, srv.URL, longToken, other); code != http.StatusOK {
		t.Fatalf("the right token from another client: %d, want 200", code)
	}
	// Each further failure doubles the wait.
	for _, want := range []string{"2", "4", "8"} {
		clock.Add(failBase << 8) // past any wait so far, within failForget
		if code, _ := bearer(t, c, srv.URL, "guess", guesser); code != http.StatusUnauthorized {
			t.Fatalf("guess after the wait: %d, want 401", code)
		}
		if code, retry := bearer(t, c, srv.URL, "guess", guesser); code != http.StatusTooManyRequests || retry != want {
			t.Fatalf("then: %d Retry-After %q, want 429 and %s", code, retry, want)
		}
	}
	// The login form is held back the same way.
	if code := formLogin(t, c, srv.URL, longToken, guesser); code != http.StatusTooManyRequests {
		t.Fatalf("login form from the held-back client: %d, want 429", code)
	}
	// Once the wait is over the right token works and clears the count.
	clock.Add(failBase << 8)
	if code, _ := bearer(t, c, srv.URL, longToken, guesser); code != http.StatusOK {
		t.Fatalf("the right token after the wait: %d, want 200", code)
	}
	for i := 1; i < failFree; i++ {
		if code, _ := bearer(t, c, srv.URL, "guess", guesser); code != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d after a success: %d, want 401 (count cleared)", i, code)
		}
	}
	// An hour without failures forgets the count too.
	clock.Add(failForget + time.Second)
	for i := 1; i < failFree; i++ {
		if code, _ := bearer(t, c, srv.URL, "guess", guesser); code != http.StatusUnauthorized {
			t.Fatalf("wrong guess %d an hour later: %d, want 401 (count forgotten)", i, code)
		}
	}
	if code, _ := bearer(t, c, srv.URL, "guess", guesser); code != http.StatusUnauthorized {
		t.Fatalf("the 5th wrong guess: %d, want 401 (the next one waits)", code)
	}
	if code, _ := bearer(t, c, srv.URL, "guess", guesser); code != http.StatusTooManyRequests {
		t.Fatalf("the 6th wrong guess: %d, want 429", code)
	}
}

// Without a proxy the TCP peer is the client: 127.0.0.2 (any 127/8 address
// is loopback on Linux) is held back while 127.0.0.1 is not.
func TestWrongTokensCountPerPeerAddress(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	srv, _ := authServer(t, clock)
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	guesser := from("127.0.0.2")
	if code, _ := bearer(t, guesser, srv.URL, "guess", ""); code != http.StatusUnauthorized {
		t.Skipf("cannot dial from 127.0.0.2 here (%d)", code)
	}
	for i := 2; i <= failFree; i++ {
		bearer(t, guesser, srv.URL, "guess", "")
	}
	if code, _ := bearer(t, guesser, srv.URL, longToken, ""); code != http.StatusTooManyRequests {
		t.Fatalf("held-back peer: %d, want 429", code)
	}
	if code, _ := bearer(t, from("127.0.0.1"), srv.URL, longToken, ""); code != http.StatusOK {
		t.Fatalf("another peer: %d, want 200", code)
	}
	// A forged X-Forwarded-For from an untrusted peer changes nothing.
	if code, _ := bearer(t, guesser, srv.URL, longToken, "203.0.113.9"); code != http.StatusTooManyRequests {
		t.Fatalf("held-back peer with a forged X-Forwarded-For: %d, want 429", code)
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func noRedirect(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

// formLogin posts the login form and returns the status (303 on success).
func formLogin(t *testing.T, c *http.Client, base, token, xff string) int {
	t.Helper()
	code, _ := loginCookie(t, c, base, token, xff)
	return code
}

func loginCookie(t *testing.T, c *http.Client, base, token, xff string) (int, *http.Cookie) {
	t.Helper()
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfRE.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no form token on the login page:\n%s", page)
	}
	form := url.Values{"csrf": {string(m[1])}, "token": {token}}
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	if resp, err = noRedirect(c).Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == CookieName {
			return resp.StatusCode, ck
		}
	}
	return resp.StatusCode, nil
}

func withCookie(t *testing.T, c *http.Client, method, u string, ck *http.Cookie, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	req.AddCookie(ck)
	resp, err := noRedirect(c).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestSessionExpiresAndLogoutRevokes: the login cookie is a signed session,
// not the token; it stops working 12 h later, and after "log out" a copy of
// it is refused although its expiry has not come.
func TestSessionExpiresAndLogoutRevokes(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	srv, _ := authServer(t, clock)
	c := srv.Client()

	code, ck := loginCookie(t, c, srv.URL, longToken, "")
	if code != http.StatusSeeOther || ck == nil {
		t.Fatalf("login: %d %v", code, ck)
	}
	if strings.Contains(ck.Value, longToken) || ck.MaxAge != int(SessionTTL/time.Second) || !ck.HttpOnly {
		t.Fatalf("cookie %+v: want a session, not the token, HttpOnly, Max-Age 12 h", ck)
	}
	if code, _ := withCookie(t, c, http.MethodGet, srv.URL+"/metrics", ck, nil); code != http.StatusOK {
		t.Fatalf("/metrics with the session: %d", code)
	}
	// One whole character of the MAC changed. ("AA" over the last two was
	// the same MAC whenever their 10 significant bits were zero: about one
	// session in a thousand, and CI met it.)
	forged := []byte(ck.Value)
	if i := len(forged) - 5; forged[i] == 'A' {
		forged[i] = 'B'
	} else {
		forged[i] = 'A'
	}
	if code, _ := withCookie(t, c, http.MethodGet, srv.URL+"/metrics",
		&http.Cookie{Name: CookieName, Value: string(forged)}, nil); code != http.StatusUnauthorized {
		t.Fatalf("a forged signature: %d, want 401", code)
	}
	clock.Add(SessionTTL - time.Minute)
	if code, _ := withCookie(t, c, http.MethodGet, srv.URL+"/metrics", ck, nil); code != http.StatusOK {
		t.Fatalf("/metrics a minute before expiry: %d", code)
	}
	clock.Add(2 * time.Minute)
	if code, _ := withCookie(t, c, http.MethodGet, srv.URL+"/metrics", ck, nil); code != http.StatusUnauthorized {
		t.Fatalf("/metrics with an expired session: %d, want 401", code)
	}
	if code, _ := withCookie(t, c, http.MethodGet, srv.URL+"/", ck, nil); code != http.StatusSeeOther {
		t.Fatalf("dashboard with an expired session: %d, want 303 to /login", code)
	}

	_, ck = loginCookie(t, c, srv.URL, longToken, "")
	code, page := withCookie(t, c, http.MethodGet, srv.URL+"/", ck, nil)
	m := csrfRE.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil || !strings.Contains(page, "log out") {
		t.Fatalf("dashboard after a new login: %d\n%s", code, page)
	}
	if code, _ := withCookie(t, c, http.MethodPost, srv.URL+"/logout", ck, url.Values{"csrf": {m[1]}}); code != http.StatusSeeOther {
		t.Fatalf("log out: %d", code)
	}
	if code, _ := withCookie(t, c, http.MethodGet, srv.URL+"/metrics", ck, nil); code != http.StatusUnauthorized {
		t.Fatalf("the old cookie after log out: %d, want 401", code)
	}
	// Stale cookies are not guesses: they never hold the browser back.
	for i := 0; i < 2*failFree; i++ {
		withCookie(t, c, http.MethodGet, srv.URL+"/metrics", ck, nil)
	}
	if code := formLogin(t, c, srv.URL, longToken, ""); code != http.StatusSeeOther {
		t.Fatalf("login after stale cookies: %d, want 303", code)
	}
}

// The token is kept and compared only as a SHA-256 digest, so the compare
// takes the same time whatever the length of the guess.
func TestTokenComparedAsDigest(t *testing.T) {
	a := New(Options{Token: longToken})
	if a.auth.digest != sha256.Sum256([]byte(longToken)) {
		t.Fatal("the token's digest is not what is compared")
	}
	for _, guess := range []string{"", "0", longToken[:len(longToken)-1], longToken + "x", strings.ToUpper(longToken)} {
		if a.auth.tokenOK(guess) {
			t.Errorf("%q accepted", guess)
		}
	}
	if !a.auth.tokenOK(longToken) {
		t.Error("the token itself refused")
	}
}

// The failure table stays bounded under guesses from many addresses.
func TestFailureTableIsBounded(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	a := New(Options{Token: longToken, Now: clock.Now})
	for i := 0; i < maxTracked+500; i++ {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.RemoteAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 1234).String()
		a.auth.checkToken(r, "guess")
	}
	if n := len(a.auth.clients); n > maxTracked {
		t.Fatalf("%d clients tracked, want at most %d", n, maxTracked)
	}
}

// A held-back client stays held back whatever other addresses do: 4,100
// failures from other addresses (the table holds 4,096) used to evict it
// and give it five fresh guesses. When the whole table is held back, new
// addresses share one entry, held back in turn.
func TestFailuresElsewhereDoNotFreeAHeldBackClient(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	a := New(Options{Token: longToken, Now: clock.Now})
	req := func(ip netip.Addr) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.RemoteAddr = netip.AddrPortFrom(ip, 1234).String()
		return r
	}
	victim := netip.MustParseAddr("127.0.0.1")
	for i := 0; i < failFree; i++ {
		a.auth.checkToken(req(victim), "guess")
	}
	if _, retry := a.auth.checkToken(req(victim), "guess"); retry <= 0 {
		t.Fatal("not held back after failFree failures")
	}
	other := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, byte(i >> 16), byte(i >> 8), byte(i + 2)}) }
	for i := 0; i < maxTracked+4; i++ {
		a.auth.checkToken(req(other(i)), "guess")
	}
	if _, retry := a.auth.checkToken(req(victim), longToken); retry <= 0 {
		t.Fatal("4,100 failures from other addresses gave the held-back client fresh guesses")
	}

	// Every tracked address held back: a new one is counted in the shared
	// overflow entry, and after failFree failures there every new address
	// is held back.
	for i := 0; i < maxTracked; i++ {
		for j := 0; j < failFree; j++ {
			a.auth.checkToken(req(other(i)), "guess")
		}
	}
	if n := len(a.auth.clients); n > maxTracked {
		t.Fatalf("%d clients tracked, want at most %d", n, maxTracked)
	}
	if _, retry := a.auth.checkToken(req(victim), longToken); retry <= 0 {
		t.Fatal("the held-back client was freed")
	}
	fresh := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}) }
	for i := 0; i < failFree; i++ {
		if ok, retry := a.auth.checkToken(req(fresh(i)), "guess"); ok || retry > 0 {
			t.Fatalf("overflow guess %d: ok %v retry %v, want a plain failure", i, ok, retry)
		}
	}
	if _, retry := a.auth.checkToken(req(fresh(100)), longToken); retry <= 0 {
		t.Fatal("a new address after failFree overflow failures is not held back")
	}
}
