package storetest

// Windows in which a source was answered 503 (gaps' kind "unavailable").

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testGapsUnavailable: minutes in which most of a source's requests were
// answered 503 are outages of kind "unavailable" for that source alone,
// consecutive minutes one window, counts added across calls (several
// instances, several flushes); a minute where 503 were the minority, or a
// source without 503, is no window; Since drops windows that ended before
// it; and recovery is judged for that source only.
func testGapsUnavailable(t *testing.T, h Harness) {
	f := setup(t, h)
	f.startRun() // live: no outage of the run history
	m0 := f.clock.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute)
	at := func(i int) time.Time { return m0.Add(time.Duration(i) * time.Minute) }
	count := func(counts ...hookwarden.AvailabilityCount) {
		t.Helper()
		if err := f.s.CountAvailability(f.ctx, counts); err != nil {
			t.Fatalf("count availability: %v", err)
		}
	}
	count(
		hookwarden.AvailabilityCount{Source: "std", Minute: at(0).Add(17 * time.Second), Requests: 10, Unavailable: 9},
		hookwarden.AvailabilityCount{Source: "std", Minute: at(1), Requests: 3, Unavailable: 1},
		hookwarden.AvailabilityCount{Source: "std", Minute: at(2), Requests: 10, Unavailable: 1},
		hookwarden.AvailabilityCount{Source: "other", Minute: at(0), Requests: 5, Unavailable: 0},
		hookwarden.AvailabilityCount{Source: "other", Minute: at(5), Requests: 4, Unavailable: 2}, // half is not most
	)
	// A second flush (or instance) makes std's minute 1 mostly 503: 4 of 6.
	count(hookwarden.AvailabilityCount{Source: "std", Minute: at(1), Requests: 3, Unavailable: 3},
		hookwarden.AvailabilityCount{Source: "std", Minute: at(4), Requests: 2, Unavailable: 2})

	opt := GapOptions{Sources: []SourcePolicy{{Name: "std", RetryHorizon: 90 * time.Second}, {Name: "other", RetryHorizon: time.Hour}}}
	var got []string
	for _, o := range f.gaps(opt).Outages {
		got = append(got, fmt.Sprintf("%s %s %s+%s %v", o.Kind, o.Source, o.Start.Sub(m0), o.End.Sub(o.Start), o.BeyondRetryHorizon))
	}
	want := "[unavailable std 0s+2m0s [std] unavailable std 4m0s+1m0s []]"
	if fmt.Sprint(got) != want {
		t.Fatalf("outages %v, want %s", got, want)
	}
	since := opt
	since.Since = at(3)
	if rep := f.gaps(since); len(rep.Outages) != 1 || !rep.Outages[0].Start.Equal(at(4)) {
		t.Fatalf("outages since minute 3: %+v, want the second window only", rep.Outages)
	}
	rep, err := hookwarden.GapsWithRecovery(f.ctx, f.s, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rep.Outages {
		if len(o.Sources) != 1 || o.Sources[0].Source != "std" || o.Sources[0].Recovery == "" {
			t.Fatalf("recovery of an unavailable window: %+v, want std's alone", o.Sources)
		}
	}
	if r := rep.Outages[0].Sources[0].Recovery; r != hookwarden.RecoveryLost {
		t.Fatalf("a 2m window beyond std's 90s horizon, without backfill: %q, want %q", r, hookwarden.RecoveryLost)
	}
}
