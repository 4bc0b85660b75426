package hookwarden

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rate
		ok   bool
	}{
		{"20/s", Rate{20, time.Second}, true},
		{"1/m", Rate{1, time.Minute}, true},
		{" 300/h ", Rate{300, time.Hour}, true},
		{"0/s", Rate{}, false},
		{"-1/s", Rate{}, false},
		{"20/d", Rate{}, false},
		{"20", Rate{}, false},
		{"1.5/s", Rate{}, false},
		{"/s", Rate{}, false},
		{"2000000/s", Rate{}, false},
	} {
		got, err := ParseRate(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v ok=%v", c.in, got, err, c.want, c.ok)
		}
		if c.ok && got.String() != strings.TrimSpace(c.in) {
			t.Errorf("%+v.String() = %q", got, got.String())
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"20/s", "1/m", "5/h", "0/s", "x/s", "1/", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if r.IsZero() || r.N < 1 {
			t.Fatalf("ParseRate(%q) = %+v: accepted an empty rate", s, r)
		}
		back, err := ParseRate(r.String())
		if err != nil || back != r {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v, %v", s, r, r.String(), back, err)
		}
	})
}
