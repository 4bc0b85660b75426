package config

import (
	"strings"

	"github.com/hookwarden/hookwarden/internal/backfill"
	"github.com/hookwarden/hookwarden/internal/extract"
)

// What the receipts say about what is missing (SPEC 12): a source's
// sequence (a value growing by one per event) and event_time (when the
// platform says the event happened). Presets set them; "none" turns a
// preset's off.

// SequenceSpec is the source's sequence spec, "" when it has none.
func (s *Source) SequenceSpec() string {
	if s.Sequence == "none" {
		return ""
	}
	return s.Sequence
}

// EventTimeSpec is the source's event_time spec without its snowflake:
// prefix ("" when none), and whether the value is a Discord snowflake.
func (s *Source) EventTimeSpec() (spec string, snowflake bool) {
	if s.EventTime == "none" {
		return "", false
	}
	if rest, ok := strings.CutPrefix(s.EventTime, extract.SnowflakePrefix); ok {
		return rest, true
	}
	return s.EventTime, false
}

// validateMarks checks sequence, sequence_reset and event_time: json:PATH
// specs (alternatives with |), since both are read from the event's JSON.
func (s *Source) validateMarks(p string, add func(string, string, ...any)) {
	checkJSON := func(key, spec string) {
		if spec == "" {
			return
		}
		if _, err := extract.Parse(spec); err != nil {
			add(p+"."+key, "%v", err)
			return
		}
		for _, alt := range strings.Split(spec, "|") {
			if !strings.HasPrefix(alt, "json:") || strings.Contains(alt, "+") {
				add(p+"."+key, "%q: want json:PATH (alternatives joined with |), or none", s.keyValue(key))
				return
			}
		}
	}
	checkJSON("sequence", s.SequenceSpec())
	et, _ := s.EventTimeSpec()
	checkJSON("event_time", et)
	if s.SequenceReset < 1 {
		add(p+".sequence_reset", "%d: must be at least 1 (default 1000000)", s.SequenceReset)
	}
}

func (s *Source) keyValue(key string) string {
	if key == "sequence" {
		return s.Sequence
	}
	return s.EventTime
}

// validateStatusOnly checks the backfill: of a platform that keeps no
// history but reports its own view (telegram: getWebhookInfo, read by
// `backfill SOURCE --status`): api_key (the bot token) and api_base only.
func validateStatusOnly(s *Source, p string, add func(string, string, ...any)) {
	b := s.Backfill
	if b.APIKey == "" {
		add(p+".api_key", "required: the bot token, which getWebhookInfo needs (a secret reference such as env:NAME)")
	} else if _, err := b.APIKey.Resolve(); err != nil {
		add(p+".api_key", "%v", err)
	}
	if b.APIBase != "" {
		if err := backfill.CheckAPIBase(b.APIBase); err != nil {
			add(p+".api_base", "%v", err)
		}
	}
	if b.Auto || b.Hook != "" || b.App != "" || b.Endpoint != "" || len(b.Types) > 0 || b.APIVersion != "" {
		add(p, "scheme %s keeps no history to recover from: its backfill: takes only api_key and api_base (backfill %s --status)",
			s.Scheme, s.Name)
	}
}
