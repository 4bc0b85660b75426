package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Day is 24 hours; config durations accept "d" ("30d", "1d12h").
const Day = 24 * time.Hour

// Duration is a time.Duration that parses Go syntax plus a days unit.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String prints whole days as "30d" and everything else in Go syntax.
func (d Duration) String() string {
	t := time.Duration(d)
	if t != 0 && t%Day == 0 {
		return strconv.FormatInt(int64(t/Day), 10) + "d"
	}
	return t.String()
}

// ParseDuration accepts Go durations plus a leading days term: "7d",
// "1d12h", "90m". Negative values are refused: no setting here means one.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	var days int64
	rest := s
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("invalid duration %q: want e.g. 30d, 1d12h, 90m", s)
		}
		days, rest = n, s[i+1:]
	}
	var t time.Duration
	if rest != "" {
		var err error
		if t, err = time.ParseDuration(rest); err != nil || t < 0 {
			return 0, fmt.Errorf("invalid duration %q: want e.g. 30d, 1d12h, 90m", s)
		}
	}
	total := time.Duration(days)*Day + t
	if total < 0 { // overflow
		return 0, fmt.Errorf("invalid duration %q: too long", s)
	}
	return Duration(total), nil
}

// UnmarshalText lets decoders (mapstructure via viper, YAML) fill a Duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Secret is a reference to a secret value: a literal, "env:NAME", or
// "file:PATH" (PATH may use ${VAR}, e.g. ${CREDENTIALS_DIRECTORY}). The
// reference may be printed; the resolved value never is.
type Secret string

// String hides literal secrets; references are safe to show.
func (s Secret) String() string {
	if strings.HasPrefix(string(s), "env:") || strings.HasPrefix(string(s), "file:") {
		return string(s)
	}
	if s == "" {
		return ""
	}
	return "[literal secret]"
}

// Resolve returns the secret's value. Errors name the reference, never a value.
func (s Secret) Resolve() (string, error) {
	ref := string(s)
	switch {
	case strings.HasPrefix(ref, "env:"):
		name := strings.TrimPrefix(ref, "env:")
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return "", fmt.Errorf("secret %s: environment variable %s is not set", ref, name)
		}
		if strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("secret %s: environment variable %s holds only whitespace", ref, name)
		}
		return v, nil
	case strings.HasPrefix(ref, "file:"):
		path, err := expandPath(strings.TrimPrefix(ref, "file:"))
		if err != nil {
			return "", fmt.Errorf("secret %s: %w", ref, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("secret %s: %w", ref, err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("secret %s: file %s is empty", ref, path)
		}
		// Spaces or blank lines alone are a file written wrong, not a key.
		if strings.TrimSpace(v) == "" {
			return "", fmt.Errorf("secret %s: file %s holds only whitespace", ref, path)
		}
		return v, nil
	case ref == "":
		return "", errors.New("secret is empty")
	default:
		return ref, nil
	}
}
