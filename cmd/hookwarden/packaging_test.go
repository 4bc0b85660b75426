package main

import (
	"os"
	"path/filepath"
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
