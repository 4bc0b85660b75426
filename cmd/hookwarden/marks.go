package main

import (
	"fmt"

	"github.com/hookwarden/hookwarden/internal/config"
	"github.com/hookwarden/hookwarden/internal/extract"
	"github.com/hookwarden/hookwarden/receiver"
)

// receiverMarks is what the receiver reads per event of s beside its id:
// its sequence value and event time (SPEC 12); nil when s has neither.
func receiverMarks(s *config.Source, path string) (*receiver.Marks, error) {
	seq := s.SequenceSpec()
	et, snowflake := s.EventTimeSpec()
	if seq == "" && et == "" {
		return nil, nil
	}
	m := &receiver.Marks{Reset: s.SequenceReset, Horizon: s.RetryHorizon.D(), Snowflake: snowflake}
	var err error
	if seq != "" {
		if m.Sequence, err = extract.Parse(seq); err != nil {
			return nil, fmt.Errorf("%s.sequence: %w", path, err)
		}
	}
	if et != "" {
		if m.EventTime, err = extract.Parse(et); err != nil {
			return nil, fmt.Errorf("%s.event_time: %w", path, err)
		}
	}
	return m, nil
}
