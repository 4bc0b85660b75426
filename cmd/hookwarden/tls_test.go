package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/config"
)

// MustWriteCert writes a self-signed certificate for 127.0.0.1 with the
// given serial number to certPath and keyPath, and returns it.
func MustWriteCert(tb testing.TB, certPath, keyPath string, serial int64) *x509.Certificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "hookwarden test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return cert
}

// TestNativeTLSAndCertificateReload: with tls.cert/tls.key the receiver
// speaks HTTPS; a renewed certificate is served after a reload, with no
// restart; a broken pair on reload keeps the old one.
func TestNativeTLSAndCertificateReload(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := MustWriteCert(t, certPath, keyPath, 1)
	t.Setenv("HW_TEST_TLS_DIR", dir)
	app := newSink(t)
	db := filepath.Join(dir, "hw.db")
	doc := fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
tls:
  cert: "${HW_TEST_TLS_DIR}/cert.pem"
  key: "${HW_TEST_TLS_DIR}/key.pem"
sources:
  - name: std
    scheme: standard
    secrets: [%q]
    destinations:
      - name: app
        url: %q
`, db, testSecret, app.URL)
	a := startAppYAML(t, doc, db)

	post := func(trust *x509.Certificate, id string) (*http.Response, error) {
		pool := x509.NewCertPool()
		pool.AddCert(trust)
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		req := signed(t, "https://"+a.HookAddr()+"/hooks/std", id, []byte(`{"type":"x"}`), time.Now(), testSecret)
		return client.Do(req)
	}
	resp, err := post(first, "msg_tls_1")
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 200 || body.Status != "accepted" || resp.TLS == nil {
		t.Fatalf("HTTPS post: %d %q tls=%v", resp.StatusCode, body.Status, resp.TLS != nil)
	}

	// Renewal: new files at the same paths, then a reload.
	second := MustWriteCert(t, certPath, keyPath, 2)
	if _, err := post(first, "msg_tls_2"); err != nil {
		t.Fatalf("before the reload the old certificate is still served: %v", err)
	}
	if _, err := a.Reload(mustLoad(t, doc)); err != nil {
		t.Fatal(err)
	}
	resp, err = post(second, "msg_tls_3")
	if err != nil {
		t.Fatalf("after the reload: %v", err)
	}
	resp.Body.Close()
	if got := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); got != 2 {
		t.Fatalf("serving certificate serial %d after the reload, want 2", got)
	}

	// A half-written renewal: the reload fails, naming the key, and the
	// served pair stays.
	if err := os.WriteFile(keyPath, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reload(mustLoadIgnoringTLS(t, doc)); err == nil || !strings.Contains(err.Error(), "tls.cert") {
		t.Fatalf("reload with a broken key: %v, want an error naming tls.cert", err)
	}
	resp, err = post(second, "msg_tls_4")
	if err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}
	resp.Body.Close()
}

// mustLoadIgnoringTLS loads a document whose TLS files are broken on
// purpose: validation reports them, everything else must be clean.
func mustLoadIgnoringTLS(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, problems, err := loadConfig([]byte(doc), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range config.Errors(problems) {
		if !strings.HasPrefix(p.Path, "tls.") {
			t.Fatalf("config: %v", p)
		}
	}
	return cfg
}

func TestTLSAndProxyConfigProblemsNameTheirKeys(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	MustWriteCert(t, cert, key, 1)
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	MustWriteCert(t, filepath.Join(other, "c.pem"), filepath.Join(other, "k.pem"), 2)
	for _, tc := range []struct {
		yaml string
		want string // "" = no problem
	}{
		{fmt.Sprintf("tls: { cert: %q, key: %q }", cert, key), ""},
		{fmt.Sprintf("tls: { cert: %q }", cert), "tls.key"},
		{fmt.Sprintf("tls: { key: %q }", key), "tls.cert"},
		{fmt.Sprintf("tls: { cert: %q, key: %q }", filepath.Join(dir, "missing.pem"), key), "tls.cert"},
		{fmt.Sprintf("tls: { cert: %q, key: %q }", cert, filepath.Join(other, "k.pem")), "tls.cert"}, // not a pair
		{`trusted_proxies: ["127.0.0.1", "10.0.0.0/8", "::1"]`, ""},
		{`trusted_proxies: ["127.0.0.1", "proxy.local"]`, "trusted_proxies[1]"},
	} {
		doc := tc.yaml + fmt.Sprintf(`
sources:
  - name: std
    scheme: standard
    secrets: [%q]
`, testSecret)
		_, problems, err := loadConfig([]byte(doc), "test")
		if err != nil {
			t.Fatal(err)
		}
		errs := config.Errors(problems)
		switch {
		case tc.want == "" && len(errs) > 0:
			t.Errorf("%s: unexpected problems %v", tc.yaml, errs)
		case tc.want != "" && (len(errs) == 0 || errs[0].Path != tc.want):
			t.Errorf("%s: problems %v, want one at %s", tc.yaml, errs, tc.want)
		}
	}
}

// TestTrustedProxyClientAddress: the recorded remote address is the TCP
// peer unless the peer is a trusted proxy; then it is the right-most
// X-Forwarded-For entry that is not a trusted proxy, whatever the client
// put to the left of it.
func TestTrustedProxyClientAddress(t *testing.T) {
	for _, tc := range []struct {
		name, proxies, xff, want string
	}{
		{"off by default: the header is ignored", "", "198.51.100.9", "127.0.0.1:"},
		{"trusted peer", `["127.0.0.1"]`, "198.51.100.9", "198.51.100.9"},
		{"spoofed entries left of the proxy's are ignored", `["127.0.0.1"]`, "10.9.9.9, 198.51.100.9", "198.51.100.9"},
		{"chain of trusted proxies", `["127.0.0.0/8", "192.0.2.0/24"]`, "198.51.100.9, 192.0.2.10", "198.51.100.9"},
		{"untrusted peer", `["192.0.2.1"]`, "198.51.100.9", "127.0.0.1:"},
		{"garbage stops at the peer", `["127.0.0.1"]`, "not-an-ip", "127.0.0.1:"},
		{"no header", `["127.0.0.1"]`, "", "127.0.0.1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := ""
			if tc.proxies != "" {
				extra = "trusted_proxies: " + tc.proxies
			}
			db := filepath.Join(t.TempDir(), "hw.db")
			a := startAppYAML(t, fmt.Sprintf(`
listen: "127.0.0.1:0"
admin: { listen: "127.0.0.1:0" }
database: { path: %q }
%s
sources:
  - name: std
    scheme: standard
    secrets: [%q]
`, db, extra, testSecret), db)
			req := signed(t, a.hookURL(), "msg_ip", []byte(`{"type":"x"}`), time.Now(), testSecret)
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			if got := do(t, req); got.Code != 200 {
				t.Fatalf("post: %+v", got)
			}
			var remote string
			if err := dbOf(a.Store).QueryRow(`SELECT remote_addr FROM receipts`).Scan(&remote); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(remote, tc.want) || (!strings.HasSuffix(tc.want, ":") && remote != tc.want) {
				t.Fatalf("remote_addr = %q, want %q", remote, tc.want)
			}
		})
	}
}
