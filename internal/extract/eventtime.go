package extract

import (
	"strconv"
	"strings"
	"time"
)

// SnowflakePrefix marks an event_time that reads a Discord snowflake id:
// "snowflake:json:id". The id's high bits are milliseconds since Discord's
// epoch (2015-01-01T00:00:00Z).
const SnowflakePrefix = "snowflake:"

// discordEpoch is Discord's snowflake epoch, in unix milliseconds.
const discordEpoch = 1420070400000

// EventTime reads v, an event_time value as a platform wrote it: unix
// seconds, milliseconds, microseconds or nanoseconds (told apart by
// magnitude; seconds may have a fraction, as Slack's event_ts), or RFC
// 3339. snowflake: v is a Discord snowflake id. ok is false for anything
// else, or a time before 2001 or more than a day after now: a wrong path
// must not make up a lag.
func EventTime(v string, snowflake bool, now time.Time) (t time.Time, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return t, false
	}
	switch {
	case snowflake:
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return t, false
		}
		t = time.UnixMilli(int64(id>>22) + discordEpoch)
	case v[0] >= '0' && v[0] <= '9' && !strings.ContainsAny(v, "-:T"):
		whole, frac, _ := strings.Cut(v, ".")
		n, err := strconv.ParseInt(whole, 10, 64)
		if err != nil {
			return t, false
		}
		switch {
		case n < 1e11: // seconds until the year 5138
			t = time.Unix(n, 0)
			if frac != "" {
				f, err := strconv.ParseFloat("0."+frac, 64)
				if err != nil {
					return time.Time{}, false
				}
				t = t.Add(time.Duration(f * float64(time.Second)))
			}
		case n < 1e14:
			t = time.UnixMilli(n)
		case n < 1e17:
			t = time.UnixMicro(n)
		default:
			t = time.Unix(0, n)
		}
	default:
		var err error
		if t, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return time.Time{}, false
		}
	}
	if t.Year() < 2001 || t.After(now.Add(24*time.Hour)) {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// SequenceValue reads v, a sequence value: a non-negative integer (quoted
// or not), ok false otherwise.
func SequenceValue(v string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n, err == nil && n >= 0
}
