package metrics

import (
	"testing"
	"time"
)

func TestRecentCountsWindowsAndForgets(t *testing.T) {
	var r recent
	t0 := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
	r.add("stripe", "unauthorized", t0.Add(-25*time.Hour)) // older than a day: its slot is reused
	r.add("stripe", "unauthorized", t0.Add(-23*time.Hour))
	r.add("stripe", "unauthorized", t0.Add(-50*time.Minute))
	r.add("stripe", "unauthorized", t0)
	r.add("stripe", "unauthorized", t0)
	r.add("stripe", "too_large", t0)
	r.add("github", "unauthorized", t0)
	for _, c := range []struct {
		source, outcome string
		d               time.Duration
		want            int
	}{
		{"stripe", "unauthorized", time.Minute, 2},
		{"stripe", "unauthorized", time.Hour, 3},
		{"stripe", "unauthorized", 24 * time.Hour, 4},
		{"stripe", "unauthorized", 48 * time.Hour, 4}, // at most a day
		{"stripe", "too_large", time.Hour, 1},
		{"github", "unauthorized", time.Hour, 1},
		{"shopify", "unauthorized", time.Hour, 0},
	} {
		if got := r.sum(c.source, c.outcome, t0, c.d); got != c.want {
			t.Errorf("sum(%s, %s, %s) = %d, want %d", c.source, c.outcome, c.d, got, c.want)
		}
	}
	// A day later every slot is stale and reads as zero.
	if got := r.sum("stripe", "unauthorized", t0.Add(24*time.Hour+time.Minute), 24*time.Hour); got != 0 {
		t.Errorf("a day later: %d, want 0", got)
	}
}
