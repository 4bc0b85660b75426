package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// A window whose events this source recovered (or the provider's retries
// cover) is drawn as settled, not red; one still missing stays red.
func TestChartRecoveredOutageIsNotRed(t *testing.T) {
	now := time.Now().UTC()
	win := func(h int, state string) hookwarden.Outage {
		return hookwarden.Outage{Kind: "outage", Start: now.Add(-time.Duration(h) * time.Hour), End: now.Add(-time.Duration(h-1) * time.Hour),
			Length: time.Hour, Sources: []hookwarden.SourceRecovery{{Source: "stripe", Recovery: state}, {Source: "gh", Recovery: hookwarden.RecoveryLost}}}
	}
	c := buildChart("stripe", nil, hookwarden.GapReport{Outages: []hookwarden.Outage{
		win(50, hookwarden.RecoveryRecovered), win(40, hookwarden.RecoveryRetried), win(30, hookwarden.RecoveryRecoverable), win(20, hookwarden.RecoveryLost)}}, now)
	var got []string
	for _, s := range c.Shades {
		got = append(got, s.Class)
	}
	want := []string{"outage recovered", "outage recovered", "outage", "outage"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("classes %q, want %q", got, want)
	}
	if !strings.HasSuffix(c.Shades[0].Title, "— recovered") || !strings.HasSuffix(c.Shades[3].Title, "— lost") {
		t.Errorf("titles %q, %q", c.Shades[0].Title, c.Shades[3].Title)
	}
}
