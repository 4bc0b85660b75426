package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClaimIndexWarmUpOnlyWithoutAKeptFilter: serve reads the claim index
// at start unless it took the claims filter a clean stop kept, which
// answers for new ids: the first start reads it, the start after SIGTERM
// does not and says why, the start after SIGKILL (no filter kept) reads it.
func TestClaimIndexWarmUpOnlyWithoutAKeptFilter(t *testing.T) {
	_, cfg, _, hook, adm := serveFiles(t, "")
	p := startServe(t, cfg, hook, adm)
	p.waitLog("the warm-up at the first start", "claim index read into the page cache")
	p.waitLog("the claims filter", "claims filter built")
	p.signal(syscall.SIGTERM)
	if err := p.waitExit(30 * time.Second); err != nil {
		t.Fatalf("serve exit after SIGTERM: %v\n%s", err, p.log)
	}

	p = startServe(t, cfg, hook, adm)
	p.waitLog("the filter kept by the clean stop", "claims filter loaded")
	p.waitLog("no warm-up after a clean stop", "claim index not read at start", "claims filter kept")
	if strings.Contains(p.log.String(), "claim index read into the page cache") {
		t.Errorf("serve read the claim index beside the kept filter:\n%s", p.log)
	}
	p.signal(syscall.SIGKILL)
	p.waitExit(30 * time.Second) //nolint:errcheck // killed

	p = startServe(t, cfg, hook, adm)
	p.waitLog("the warm-up after a crash", "claim index read into the page cache")
}
