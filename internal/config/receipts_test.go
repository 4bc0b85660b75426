package config

import (
	"strings"
	"testing"
)

// The telegram preset names update_id as its sequence; presets set
// event_time; none turns them off; a spec that is not json:PATH, or a
// sequence_reset below 1, is refused under its key path.
func TestSequenceAndEventTime(t *testing.T) {
	src := func(scheme string, f func(*Source)) Config {
		c := Config{Sources: []Source{{Name: "s", Scheme: scheme, Secrets: []Secret{"tg_token"},
			Destinations: []Destination{{Name: "app", URL: "http://127.0.0.1:3000/"}}}}}
		if f != nil {
			f(&c.Sources[0])
		}
		c.ApplyDefaults()
		return c
	}
	c := src("telegram", nil)
	if s := c.Sources[0]; s.SequenceSpec() != "json:update_id" || s.SequenceReset != 1_000_000 || !strings.HasPrefix(s.EventTime, "json:message.date") {
		t.Fatalf("telegram defaults: sequence %q reset %d event_time %q", s.Sequence, s.SequenceReset, s.EventTime)
	}
	if ps := Errors(c.Validate()); len(ps) != 0 {
		t.Fatal(ps)
	}
	for scheme, want := range map[string]string{"stripe": "json:created", "line": "json:timestamp", "slack": "json:event_time",
		"zoom": "json:event_ts", "meta": "json:timestamp"} {
		if c := src(scheme, nil); c.Sources[0].EventTime != want || c.Sources[0].SequenceSpec() != "" {
			t.Errorf("%s: event_time %q sequence %q, want %q and none", scheme, c.Sources[0].EventTime, c.Sources[0].Sequence, want)
		}
	}
	if spec, snow := src("discord", nil).Sources[0].EventTimeSpec(); spec != "json:id" || !snow {
		t.Errorf("discord event_time: %q snowflake %v, want json:id from the snowflake", spec, snow)
	}
	if c := src("telegram", func(s *Source) { s.Sequence, s.EventTime = "none", "none" }); c.Sources[0].SequenceSpec() != "" {
		t.Errorf("sequence: none still %q", c.Sources[0].SequenceSpec())
	} else if spec, _ := c.Sources[0].EventTimeSpec(); spec != "" {
		t.Errorf("event_time: none still %q", spec)
	}
	for _, tc := range []struct {
		f    func(*Source)
		path string
	}{
		{func(s *Source) { s.Sequence = "header:X-Seq" }, "sources[0].sequence"},
		{func(s *Source) { s.Sequence = "json:" }, "sources[0].sequence"},
		{func(s *Source) { s.EventTime = "json:a+json:b" }, "sources[0].event_time"},
		{func(s *Source) { s.EventTime = "snowflake:form:x" }, "sources[0].event_time"},
		{func(s *Source) { s.SequenceReset = -1 }, "sources[0].sequence_reset"},
	} {
		c := src("telegram", tc.f)
		ps := Errors(c.Validate())
		if len(ps) != 1 || ps[0].Path != tc.path {
			t.Errorf("got %v, want one problem at %s", ps, tc.path)
		}
	}
}
