package hookwarden

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestPrunePass: the pass both stores run: the cutoffs from the store's
// clock, the audit entry before the first tier (not in a dry run), only
// the tiers retention enables, in order (claims before payloads), with
// the defaults filled in, and the entry's result after the last.
func TestPrunePass(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	var log []string
	tier := func(name string) PruneTier {
		return func(ctx context.Context, opt PruneOptions, res *PruneResult) error {
			log = append(log, fmt.Sprintf("%s batch=%d pause=%v", name, opt.BatchSize, opt.Pause))
			res.EventsDeleted++
			return nil
		}
	}
	steps := PruneSteps{
		Audit: func(ctx context.Context, e AuditEntry) (int64, error) {
			log = append(log, "audit "+e.Action+" "+string(e.Args))
			return 7, nil
		},
		Claims: tier("claims"), BodyKeys: tier("bodykeys"), Hourly: tier("hourly"), Quarantine: tier("quarantine"),
		Payloads: tier("payloads"),
		Tokens: func(ctx context.Context, opt PruneOptions, at time.Time, res *PruneResult) error {
			log = append(log, "tokens at "+at.Format(time.RFC3339))
			return nil
		},
		CountHeld: func(ctx context.Context, res *PruneResult) error { log = append(log, "held"); return nil },
		AuditResult: func(ctx context.Context, id int64, res PruneResult) error {
			log = append(log, fmt.Sprintf("result %d deleted=%d", id, res.EventsDeleted))
			return nil
		},
	}
	opt := PruneOptions{Retention: Retention{Payloads: time.Hour, Claims: 24 * time.Hour, Quarantine: time.Minute},
		Audit: &AuditEntry{Origin: AuditCLI}}
	res, err := PrunePass(context.Background(), opt, now, steps)
	if err != nil {
		t.Fatal(err)
	}
	want := `[audit prune {"claims":"24h0m0s","payloads":"1h0m0s"} claims batch=200 pause=5ms bodykeys batch=200 pause=5ms ` +
		`hourly batch=200 pause=5ms quarantine batch=200 pause=5ms tokens at 2025-03-01T12:00:00+01:00 payloads batch=200 pause=5ms held result 7 deleted=5]`
	if fmt.Sprint(log) != want {
		t.Errorf("pass:\n got %v\nwant %s", log, want)
	}
	if res.AuditID != 7 || !res.ClaimCutoff.Equal(now.Add(-24*time.Hour)) || res.ClaimCutoff.Location() != time.UTC ||
		!res.PayloadCutoff.Equal(now.Add(-time.Hour)) || !res.QuarantineCutoff.Equal(now.Add(-time.Minute)) {
		t.Errorf("result %+v, want audit 7 and the cutoffs in UTC", res)
	}

	// A dry run with only payloads: no audit entry, no claims or quarantine tier.
	log = nil
	opt = PruneOptions{Retention: Retention{Payloads: time.Hour}, DryRun: true, BatchSize: 3, Pause: time.Second,
		Audit: &AuditEntry{Origin: AuditCLI}}
	if res, err = PrunePass(context.Background(), opt, now, steps); err != nil || !res.DryRun || !res.ClaimCutoff.IsZero() {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if want := "[tokens at 2025-03-01T12:00:00+01:00 payloads batch=3 pause=1s held]"; fmt.Sprint(log) != want {
		t.Errorf("dry run:\n got %v\nwant %s", log, want)
	}

	// A tier's error stops the pass: the entry keeps no result (interrupted).
	log = nil
	boom := errors.New("boom")
	steps.Claims = func(ctx context.Context, opt PruneOptions, res *PruneResult) error { return boom }
	opt = PruneOptions{Retention: Retention{Claims: time.Hour, Payloads: time.Hour}, Audit: &AuditEntry{Origin: AuditCLI}}
	if _, err := PrunePass(context.Background(), opt, now, steps); !errors.Is(err, boom) || len(log) != 1 {
		t.Errorf("failing claims tier: %v, log %v, want boom after the audit entry only", err, log)
	}
}
