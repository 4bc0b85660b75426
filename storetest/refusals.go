package storetest

// Refusals at the door per source, reason and hour (stats' refused_24h).

import (
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testStatsRefusals: counts added across calls (several flushes, several
// instances) sum per source and reason; Stats shows the current hour and
// the 23 before it, not the hour before those; a source with refusals only
// is listed after the names given, in name order; a count of 0 is no row;
// and retention.claims prunes the hours before its cutoff.
func testStatsRefusals(t *testing.T, h Harness) {
	f := setup(t, h)
	f.clock.Add(25 * time.Minute) // mid-hour: the hour's start is not now
	hour := f.clock.Now().UTC().Truncate(time.Hour)
	count := func(counts ...hookwarden.RefusalCount) {
		t.Helper()
		if err := f.s.CountRefusals(f.ctx, counts); err != nil {
			t.Fatalf("count refusals: %v", err)
		}
	}
	count() // nothing: no write, no error
	count(
		hookwarden.RefusalCount{Source: "std", Hour: hour.Add(7 * time.Minute), Reason: hookwarden.RefusedMismatch, N: 3},
		hookwarden.RefusalCount{Source: "std", Hour: hour.Add(-23 * time.Hour), Reason: hookwarden.RefusedStale, N: 1},
		hookwarden.RefusalCount{Source: "std", Hour: hour.Add(-24 * time.Hour), Reason: hookwarden.RefusedMissing, N: 5}, // a day ago: out
		hookwarden.RefusalCount{Source: "zeta", Hour: hour, Reason: hookwarden.RefusedForbidden, N: 1},
		hookwarden.RefusalCount{Source: "alpha", Hour: hour, Reason: hookwarden.RefusedTooLarge, N: 0}, // no row
	)
	// A second flush (or instance): the same row adds up; two reasons.
	count(hookwarden.RefusalCount{Source: "std", Hour: hour, Reason: hookwarden.RefusedMismatch, N: 2},
		hookwarden.RefusalCount{Source: "std", Hour: hour, Reason: hookwarden.RefusedMismatch, N: 1},
		hookwarden.RefusalCount{Source: "beta", Hour: hour.Add(-time.Hour), Reason: hookwarden.RefusedUnavailable, N: 4},
		hookwarden.RefusalCount{Source: "beta", Hour: hour, Reason: hookwarden.RefusedTooSlow, N: 2},
		hookwarden.RefusalCount{Source: "beta", Hour: hour, Reason: hookwarden.RefusedReplayed, N: 1},
		hookwarden.RefusalCount{Source: "beta", Hour: hour, Reason: hookwarden.RefusedMalformed, N: 6},
	)
	st := f.stats([]string{"std", "gamma"}, nil)
	var names []string
	got := map[string]hookwarden.Refusals{}
	for _, s := range st.Sources {
		names = append(names, s.Source)
		got[s.Source] = s.Refused
	}
	if want := []string{"std", "gamma", "beta", "zeta"}; !equalStrings(names, want) {
		t.Fatalf("sources %v, want %v (the names given, then the refused ones in name order; alpha's 0 is no row)", names, want)
	}
	want := map[string]hookwarden.Refusals{
		"std":   {Mismatch: 6, Stale: 1},
		"gamma": {},
		"beta":  {Unavailable: 4, TooSlow: 2, Replayed: 1, Malformed: 6},
		"zeta":  {Forbidden: 1},
	}
	for src, w := range want {
		if got[src] != w {
			t.Errorf("refused of %s: %+v, want %+v", src, got[src], w)
		}
	}

	// An hour later std's stale hour is out of the window.
	f.clock.Add(time.Hour)
	if r := f.refused("std"); r != (hookwarden.Refusals{Mismatch: 6}) {
		t.Errorf("refused of std an hour later: %+v, want the mismatches alone", r)
	}
	// retention.claims: the hours before the cutoff's go; back on the
	// clock, the day-old stale count does not come back.
	f.clock.Add(-time.Hour)
	f.prune(PruneOptions{Retention: Retention{Payloads: 2 * time.Hour, Claims: 2 * time.Hour}})
	if r := f.refused("std"); r != (hookwarden.Refusals{Mismatch: 6}) {
		t.Errorf("refused of std after a prune at 2h: %+v, want the mismatches alone", r)
	}
	if r := f.refused("beta"); r != (hookwarden.Refusals{Unavailable: 4, TooSlow: 2, Replayed: 1, Malformed: 6}) {
		t.Errorf("refused of beta after a prune at 2h: %+v, want all (within the cutoff)", r)
	}
}

// refused is source's Refused in Stats.
func (f *fixture) refused(source string) hookwarden.Refusals {
	f.t.Helper()
	for _, s := range f.stats(nil, nil).Sources {
		if s.Source == source {
			return s.Refused
		}
	}
	return hookwarden.Refusals{}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
