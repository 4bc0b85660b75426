package hookwarden

import (
	"testing"
	"time"
)

func TestRecover(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	from, to := now.Add(-5*time.Hour), now.Add(-4*time.Hour)
	stripe := SourcePolicy{Name: "stripe", RetryHorizon: 72 * time.Hour,
		Backfill: BackfillPolicy{Method: "list", History: 30 * 24 * time.Hour}}
	github := SourcePolicy{Name: "gh", Backfill: BackfillPolicy{Method: "redeliver", History: 72 * time.Hour}}
	plain := SourcePolicy{Name: "plain", RetryHorizon: 72 * time.Hour}
	done := func(src, method string, f, t time.Time) BackfillRun {
		return BackfillRun{Source: src, Method: method, From: f, To: t, FinishedAt: now}
	}
	covering := done("stripe", "list", from.Add(-time.Minute), to.Add(time.Minute))
	failed := covering
	failed.Error = "page 2: malformed page"
	partial := done("stripe", "list", from.Add(time.Minute), to)
	dry := covering
	dry.DryRun = true
	for _, c := range []struct {
		name   string
		p      SourcePolicy
		from   time.Time
		beyond bool
		runs   []BackfillRun
		want   string
		last   bool // a run is reported
	}{
		{"a complete run covers it", stripe, from, true, []BackfillRun{covering}, RecoveryRecovered, true},
		{"redeliveries requested", github, from, true, []BackfillRun{done("gh", "redeliver", from, to)}, RecoveryRequested, true},
		{"a failed run leaves it recoverable", stripe, from, true, []BackfillRun{failed}, RecoveryRecoverable, true},
		{"a run over part of it", stripe, from, true, []BackfillRun{partial}, RecoveryRecoverable, true},
		{"a dry run changes nothing", stripe, from, true, []BackfillRun{dry}, RecoveryRecoverable, true},
		{"another source's run", stripe, from, true, []BackfillRun{done("other", "list", from, to)}, RecoveryRecoverable, false},
		{"within the retry horizon, no backfill", plain, from, false, nil, RecoveryRetried, false},
		{"beyond it, no backfill", plain, from, true, nil, RecoveryLost, false},
		{"beyond the provider's history", github, now.Add(-100 * time.Hour), true, nil, RecoveryLost, false},
	} {
		end := to
		if c.from.Before(from) {
			end = c.from.Add(time.Hour)
		}
		r := Recover(c.p, c.from, end, c.beyond, now, c.runs)
		if r.Recovery != c.want || (r.Backfill != nil) != c.last || r.Source != c.p.Name {
			t.Errorf("%s: %+v, want %s (a run reported: %v)", c.name, r, c.want, c.last)
		}
	}
}

func TestAnnotateRecovery(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	rep := GapReport{Now: now, Outages: []Outage{
		{Kind: "outage", Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour), Length: time.Hour, BeyondRetryHorizon: []string{"gh"}},
		{Kind: "restart", Start: now.Add(-30 * time.Minute), End: now.Add(-29 * time.Minute)},
	}, Silences: []Silence{{Source: "plain", Start: now.Add(-10 * time.Hour), Open: true, BeyondRetryHorizon: true}}}
	AnnotateRecovery(&rep, []SourcePolicy{
		{Name: "gh", Backfill: BackfillPolicy{Method: "redeliver", History: 72 * time.Hour}},
		{Name: "plain", RetryHorizon: 72 * time.Hour},
	}, nil)
	o := rep.Outages[0]
	if len(o.Sources) != 2 || o.Sources[0].Recovery != RecoveryRecoverable || o.Sources[1].Recovery != RecoveryRetried {
		t.Errorf("outage sources %+v, want gh recoverable and plain retried by its provider", o.Sources)
	}
	if len(rep.Outages[1].Sources) != 0 {
		t.Errorf("a restart missed nothing, got %+v", rep.Outages[1].Sources)
	}
	if s := rep.Silences[0]; s.Recovery != RecoveryLost || s.Backfill != nil {
		t.Errorf("silence %+v, want lost (beyond its horizon, no backfill)", s)
	}
}
