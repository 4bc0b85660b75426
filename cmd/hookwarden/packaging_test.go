package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/config"
)

// TestPackagedConfigIsValid: the config.yaml that `make install` and the
// .deb put in /etc/hookwarden is complete once its credentials exist, as
// systemd provides them.
func TestPackagedConfigIsValid(t *testing.T) {
	creds := t.TempDir()
	for name, v := range map[string]string{"stripe": "whsec_test_stripe_secret", "app-signing": testAppSecret} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CREDENTIALS_DIRECTORY", creds)
	// The file names the installed database, so that the CLI run with it
	// reads what serve writes; here the unit's override puts it elsewhere.
	raw, err := os.ReadFile("../../packaging/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "\n  path: /var/lib/hookwarden/hookwarden.db\n") {
		t.Error("packaging/config.yaml does not name database.path /var/lib/hookwarden/hookwarden.db")
	}
	t.Setenv("HOOKWARDEN_DATABASE_PATH", filepath.Join(t.TempDir(), "hookwarden.db"))
	cfg, problems, err := loadConfigFile("../../packaging/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("packaging/config.yaml: %v", p)
	}
	if cfg.Listen != config.DefaultListen || !strings.HasPrefix(cfg.Admin.Listen, "127.0.0.1:") {
		t.Errorf("listeners %s, %s: want loopback by default", cfg.Listen, cfg.Admin.Listen)
	}
	if len(cfg.TrustedProxies) != 0 || cfg.TLS.Enabled() {
		t.Error("trusted_proxies and tls must be off by default")
	}
}

// TestUnitFileContract pins what the code relies on in the unit: notify
// type, a watchdog, SIGHUP as reload, the path the Makefile rewrites, and
// the state directory the database lives in.
func TestUnitFileContract(t *testing.T) {
	b, err := os.ReadFile("../../systemd/hookwarden.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"\nType=notify\n",
		"\nWatchdogSec=",
		"\nExecReload=/bin/kill -HUP $MAINPID\n",
		"\nExecStart=/usr/local/bin/hookwarden serve --config /etc/hookwarden/config.yaml\n",
		"\nStateDirectory=hookwarden\n",
		"\nEnvironment=HOOKWARDEN_DATABASE_PATH=/var/lib/hookwarden/hookwarden.db\n",
		"\nRestart=always\n",
		"\nRestartPreventExitStatus=2\n", // exit 2 = configuration error (main.go)
		"\nRestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("systemd/hookwarden.service lacks %q", strings.TrimSpace(want))
		}
	}
}

// TestInstallPointsAtItsDocs: what `make install` writes names the doc
// paths where it put the docs (PREFIX/share/doc/hookwarden), not the .deb's
// /usr/share/doc, and every such path exists in the staged tree.
func TestInstallPointsAtItsDocs(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dest := t.TempDir()
	cmd := exec.Command("make", "-s", "install", "DESTDIR="+dest, "BIN="+binPath, "UNITDIR=/etc/systemd/system")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	docRE := regexp.MustCompile(`/[a-z/]*share/doc/hookwarden[A-Za-z0-9_./-]*`)
	for _, f := range []string{"/etc/hookwarden/config.yaml", "/etc/systemd/system/hookwarden.service",
		"/usr/local/share/doc/hookwarden/examples/config.systemd.yaml"} {
		b, err := os.ReadFile(filepath.Join(dest, f))
		if err != nil {
			t.Fatal(err)
		}
		refs := docRE.FindAllString(string(b), -1)
		if len(refs) == 0 && !strings.HasSuffix(f, ".service") {
			t.Errorf("%s names no doc path", f)
		}
		for _, ref := range refs {
			if !strings.HasPrefix(ref, "/usr/local/share/doc/hookwarden") {
				t.Errorf("%s points at %s, not where make install put the docs", f, ref)
			} else if _, err := os.Stat(filepath.Join(dest, strings.TrimSuffix(ref, "."))); err != nil {
				t.Errorf("%s points at %s, which make install did not write", f, ref)
			}
		}
	}
	// Every link between the installed docs leads to an installed doc.
	docs := filepath.Join(dest, "/usr/local/share/doc/hookwarden")
	linkRE := regexp.MustCompile(`\]\(([A-Za-z0-9_.-]+\.md)[#)]`)
	mds, _ := filepath.Glob(filepath.Join(docs, "*.md"))
	if len(mds) == 0 {
		t.Fatal("no docs installed")
	}
	for _, md := range mds {
		b, _ := os.ReadFile(md)
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(docs, m[1])); err != nil {
				t.Errorf("installed %s links to %s, which is not installed", filepath.Base(md), m[1])
			}
		}
	}
	// The Debian package installs the same docs.
	nfpm, err := os.ReadFile("../../packaging/nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range mds {
		if !strings.Contains(string(nfpm), "dst: /usr/share/doc/hookwarden/"+filepath.Base(md)+"\n") {
			t.Errorf("packaging/nfpm.yaml does not install %s", filepath.Base(md))
		}
	}
}
