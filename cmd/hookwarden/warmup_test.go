package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClaimIndexWarmUpOnlyWithoutAKeptFilter: serve reads the claim index
// at start unless it read a claims filter the file kept, which answers for
// new ids. The first start reads it, builds the filter and, once idle,
// keeps it in the file; the start after SIGKILL reads that filter, and
// neither builds one nor reads the index; so does the start after SIGTERM.
func TestClaimIndexWarmUpOnlyWithoutAKeptFilter(t *testing.T) {
	_, cfg, _, hook, adm := serveFiles(t, "")
	p := startServe(t, cfg, hook, adm)
	p.waitLog("the warm-up at the first start", "claim index read into the page cache")
	p.waitLog("the claims filter", "claims filter built")
	p.waitLog("the filter kept while idle", "claims filter kept in the file")
	p.signal(syscall.SIGKILL)
	p.waitExit(30 * time.Second) //nolint:errcheck // killed

	for _, stop := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		p = startServe(t, cfg, hook, adm)
		p.waitLog("the kept filter", "claims filter loaded")
		p.waitLog("no warm-up with the kept filter", "claim index not read at start", "claims filter kept")
		for _, not := range []string{"claim index read into the page cache", "claims filter built"} {
			if strings.Contains(p.log.String(), not) {
				t.Errorf("serve logged %q beside the kept filter:\n%s", not, p.log)
			}
		}
		p.signal(stop)
		if err := p.waitExit(30 * time.Second); err != nil && stop == syscall.SIGTERM {
			t.Fatalf("serve exit after SIGTERM: %v\n%s", err, p.log)
		}
	}
}
