package extract

import (
	"testing"
	"time"
)

func TestEventTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	want := time.Date(2026, 3, 1, 11, 59, 0, 0, time.UTC)
	for _, c := range []struct {
		in        string
		snowflake bool
		want      time.Time
	}{
		{"1772366340", false, want},                                    // seconds (WhatsApp, Stripe, Slack event_time)
		{"1772366340000", false, want},                                 // milliseconds (LINE, Zoom, Messenger)
		{"1772366340000000", false, want},                              // microseconds
		{"1772366340000000000", false, want},                           // nanoseconds
		{"1772366340.500000", false, want.Add(500 * time.Millisecond)}, // Slack event_ts
		{"2026-03-01T11:59:00Z", false, want},
		{"2026-03-01T12:59:00+01:00", false, want},
		// Discord's documented example snowflake: 2016-04-30 11:18:25.796 UTC.
		{"175928847299117063", true, time.Date(2016, 4, 30, 11, 18, 25, 796e6, time.UTC)},
	} {
		got, ok := EventTime(c.in, c.snowflake, now)
		if !ok || !got.Equal(c.want) {
			t.Errorf("EventTime(%q, %v) = %v %v, want %v", c.in, c.snowflake, got, ok, c.want)
		}
	}
	for _, bad := range []string{"", "abc", "12", "-5", "2026-13-01", "99999999999999999999", "1872366340"} {
		if got, ok := EventTime(bad, false, now); ok {
			t.Errorf("EventTime(%q) = %v, want not ok (not a time, before 2001 or in the future)", bad, got)
		}
	}
}

func FuzzEventTime(f *testing.F) {
	for _, s := range []string{"1772366340", "1772366340000", "1772366340.5", "2026-03-01T11:59:00Z", "175928847299117063", "1e9"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string, snowflake bool) {
		got, ok := EventTime(s, snowflake, now)
		if ok && (got.Year() < 2001 || got.After(now.Add(24*time.Hour)) || got.Location() != time.UTC) {
			t.Fatalf("EventTime(%q) = %v: outside the accepted range", s, got)
		}
		if !ok && !got.IsZero() {
			t.Fatalf("EventTime(%q) not ok but %v", s, got)
		}
	})
}
