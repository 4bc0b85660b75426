package config

import (
	"strings"
	"testing"
	"time"
)

// retention_claims per source (SPEC 11): telegram's preset keeps claims 7
// days with no redrive window; any source may set both, redrive_window: 0
// included; check refuses a retention_claims shorter than the source's
// retry_horizon + redrive_window, at the source's key path.
func TestRetentionClaimsPerSource(t *testing.T) {
	tg := Config{Sources: []Source{{Name: "tg", Scheme: "telegram", Secrets: []Secret{"tg_Secret-Token_0123"},
		Destinations: []Destination{{Name: "app", URL: "http://127.0.0.1:3000/"}}}}}
	tg.ApplyDefaults()
	s := &tg.Sources[0]
	if s.RetentionClaims.D() != 7*24*time.Hour || s.RedriveWindow != 0 || tg.ClaimsRetention(s) != 7*24*time.Hour {
		t.Fatalf("telegram: retention_claims %s redrive_window %s, want 7d and 0", s.RetentionClaims, s.RedriveWindow)
	}
	if ps := Errors(tg.Validate()); len(ps) != 0 {
		t.Fatalf("telegram with name, scheme, secrets and a destination: %v", ps)
	}

	std := func(retention, redrive Duration, raw map[string]any) *Config {
		c := &Config{Sources: []Source{{Name: "s", Scheme: "standard", Secrets: []Secret{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
			RetentionClaims: retention, RedriveWindow: redrive, Destinations: []Destination{{Name: "app", URL: "http://127.0.0.1:3000/"}}}}}
		c.NoteExplicit(raw)
		c.ApplyDefaults()
		return c
	}
	zero := map[string]any{"sources": []any{map[string]any{"name": "s", "redrive_window": 0}}}
	c := std(Duration(10*24*time.Hour), 0, zero)
	if c.Sources[0].RedriveWindow != 0 {
		t.Errorf("redrive_window: 0 written: %s, want 0 kept", c.Sources[0].RedriveWindow)
	}
	if c := std(0, 0, nil); c.Sources[0].RedriveWindow.D() != DefaultRedrive {
		t.Errorf("redrive_window not written: %s, want the default", c.Sources[0].RedriveWindow)
	}
	// Standard's horizon is 28 hours: 1 day with no redrive is too short.
	ps := Errors(std(Duration(24*time.Hour), 0, zero).Validate())
	if len(ps) != 1 || ps[0].Path != "sources[0].retention_claims" || !strings.Contains(ps[0].Message, "shorter than the source's retry_horizon + redrive_window") {
		t.Errorf("short retention_claims: %v, want one problem at sources[0].retention_claims", ps)
	}
	// 10 days with the default 30-day redrive window is too short too.
	if ps := Errors(std(Duration(10*24*time.Hour), 0, nil).Validate()); len(ps) != 1 || ps[0].Path != "sources[0].retention_claims" {
		t.Errorf("retention_claims under horizon + default redrive: %v", ps)
	}
	if ps := Errors(std(Duration(10*24*time.Hour), 0, zero).Validate()); len(ps) != 0 {
		t.Errorf("10d with redrive_window 0: %v, want none", ps)
	}
}
