package hookwarden

import (
	"testing"
	"time"
)

// TestWindowStart: a window starts at its bound's minute and counts whole
// hours from the first one after it; a bound on the hour is all hours; a
// bound older than the minutes kept starts at its hour.
func TestWindowStart(t *testing.T) {
	now := time.Date(2026, 12, 4, 22, 37, 15, 0, time.UTC)
	at := func(h, m, s int) time.Time { return time.Date(2026, 12, 4, h, m, s, 0, time.UTC) }
	for _, c := range []struct {
		name                string
		since, start, whole time.Time
	}{
		{"an hour", now.Add(-time.Hour), at(21, 37, 0), at(22, 0, 0)},
		{"a day", now.Add(-24 * time.Hour), at(22, 37, 0).AddDate(0, 0, -1), at(23, 0, 0).AddDate(0, 0, -1)},
		{"on the hour", at(21, 0, 0), at(21, 0, 0), at(21, 0, 0)},
		{"inside the first minute of an hour", at(21, 0, 40), at(21, 0, 0), at(21, 0, 0)},
		{"25 h old: still minutes", now.Add(-25*time.Hour + time.Minute), at(21, 38, 0).AddDate(0, 0, -1), at(22, 0, 0).AddDate(0, 0, -1)},
		{"older than the minutes kept: its hour", now.Add(-30 * time.Hour), at(16, 0, 0).AddDate(0, 0, -1), at(16, 0, 0).AddDate(0, 0, -1)},
		{"another zone", now.Add(-time.Hour).In(time.FixedZone("x", 5*3600+1800)), at(21, 37, 0), at(22, 0, 0)},
	} {
		start, whole := WindowStart(now, c.since)
		if !start.Equal(c.start) || !whole.Equal(c.whole) {
			t.Errorf("%s: WindowStart(%s) = %s, %s; want %s, %s", c.name, c.since, start, whole, c.start, c.whole)
		}
	}
}
