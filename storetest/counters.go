package storetest

// Counter honesty: the counts a store keeps as it writes (Stats, Hourly)
// equal a full count of its rows after every kind of write.

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// HourCount is the contract's hourly traffic of a source.
type HourCount = hookwarden.HourCount

// checkCounts compares what the store's counters say (Stats, Hourly over
// the suite's whole clock) with the harness's full count of its rows.
func (f *fixture) checkCounts(step string) {
	f.t.Helper()
	now := f.clock.Now()
	full, fullHours := f.h.FullCount(f.t, f.s, now)
	got := f.stats(nil, nil)
	if a, b := statsKey(got), statsKey(full); a != b {
		f.t.Errorf("after %s: Stats from the counters\n%s\nwant the full count\n%s", step, a, b)
	}
	hours := f.hourly(fullHours)
	if a, b := hoursKey(hours), hoursKey(fullHours); a != b {
		f.t.Errorf("after %s: Hourly\n%s\nwant the full count\n%s", step, a, b)
	}
}

// hourly reads Hourly since the suite's epoch for the sources of want and
// those seen so far.
func (f *fixture) hourly(want map[string][]HourCount) map[string][]HourCount {
	f.t.Helper()
	var names []string
	for n := range want {
		names = append(names, n)
	}
	for _, s := range f.stats(nil, nil).Sources {
		if _, ok := want[s.Source]; !ok {
			names = append(names, s.Source)
		}
	}
	got, err := f.s.Hourly(f.ctx, names, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		f.t.Fatalf("hourly: %v", err)
	}
	return got
}

// statsKey renders stats in name order without the time of reading.
func statsKey(st Stats) string {
	var b strings.Builder
	src := append([]hookwarden.SourceStats(nil), st.Sources...)
	sort.Slice(src, func(i, j int) bool { return src[i].Source < src[j].Source })
	for _, s := range src {
		if s == (hookwarden.SourceStats{Source: s.Source}) {
			continue
		}
		fmt.Fprintf(&b, "source %s: accepted %d duplicates %d divergent %d quarantined %d last %s\n",
			s.Source, s.Accepted, s.Duplicates, s.Divergent, s.Quarantined, s.LastReceivedAt.UTC().Format(time.RFC3339Nano))
	}
	dst := append([]hookwarden.OutboxStat(nil), st.Destinations...)
	sort.Slice(dst, func(i, j int) bool { return dst[i].Destination < dst[j].Destination })
	for _, d := range dst {
		if d.Pending == 0 && d.Delivered == 0 && d.Dead == 0 {
			continue
		}
		fmt.Fprintf(&b, "destination %s: pending %d delivered %d dead %d oldest %.0fs\n",
			d.Destination, d.Pending, d.Delivered, d.Dead, d.OldestPendingSeconds)
	}
	return b.String()
}

func hoursKey(h map[string][]HourCount) string {
	var names []string
	for n, hs := range h {
		if len(hs) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		for _, c := range h[n] {
			fmt.Fprintf(&b, "%s %s: accepted %d duplicates %d\n", n, c.Hour.UTC().Format("2006-01-02T15"), c.Accepted, c.Duplicates)
		}
	}
	return b.String()
}

// testCountersHonest: after each kind of write (record, duplicate, batch,
// quarantine, deliver, retry, dead-letter, replay, release, drop, and both
// retention tiers) Stats and Hourly equal a full count of the rows. Across
// a prune the hourly counts do not move (they count what was recorded);
// the claims tier drops only hours older than its cutoff.
func testCountersHonest(t *testing.T, h Harness) {
	if h.FullCount == nil {
		t.Skip("the harness has no FullCount")
	}
	f := setup(t, h)
	f.checkCounts("nothing")

	f.record("std", "A", `{"a":1}`, "std/a", "std/b")
	f.checkCounts("record")
	f.record("std", "A", `{"a":1}`, "std/a", "std/b")
	f.record("std", "A", `{"a":2}`, "std/a", "std/b")
	f.checkCounts("duplicates")
	f.clock.Add(time.Hour)
	f.mustRecord(f.batch("sg", "sg/app", element("s1"), element("s2"), element("s1")))
	f.mustRecord(f.batch("sg", "sg/app", element("s2"), element("s3")))
	f.checkCounts("batches")
	f.record("std", "", `{"no":"id"}`)
	f.record("std", "", `{"no":"id"}`)
	noID := f.record("std", "", `{"other":true}`)
	f.mustRecord(f.keyed("d-1", `{"ping":1}`, "gh/app"))
	replayed := f.mustRecord(f.keyed("d-2", `{"ping":1}`, "gh/app"))
	f.checkCounts("quarantine")

	f.clock.Add(90 * time.Minute)
	f.record("std", "B", `{"b":1}`, "std/a")
	f.record("std", "C", `{"c":1}`, "std/a")
	f.finish("std/a", "A", hookwarden.Delivered) // B and C retried
	f.checkCounts("deliver and retry")
	f.finish("std/a", "B", hookwarden.Dead)
	f.finish("std/b", "A", hookwarden.Dead)
	f.checkCounts("dead-letter")
	f.replay(ReplaySelector{Source: "std", EventIDs: []string{"A"}}, ReplayOptions{})
	f.checkCounts("replay")

	if _, err := f.s.ReleaseQuarantined(f.ctx, Release{ReceiptID: replayed.ReceiptID, Destinations: []string{"gh/app"}}); err != nil {
		t.Fatalf("release: %v", err)
	}
	f.checkCounts("release")
	if err := f.s.DropQuarantined(f.ctx, noID.ReceiptID, nil); err != nil {
		t.Fatalf("drop: %v", err)
	}
	f.checkCounts("drop")

	// Finish everything but B (dead), then the payload tier.
	for _, j := range f.lease("std/a", 100, time.Minute) {
		f.finishJob(f.attempt(j, hookwarden.Delivered))
	}
	for _, d := range []string{"std/b", "sg/app", "gh/app"} {
		for _, j := range f.lease(d, 100, time.Minute) {
			f.finishJob(f.attempt(j, hookwarden.Delivered))
		}
	}
	f.checkCounts("deliveries")
	before := f.hourly(nil)
	f.clock.Add(40 * day)
	f.record("std", "A", `{"a":1}`, "std/a") // a late copy of a folded event
	f.record("std", "D", `{"d":1}`, "std/a")
	f.checkCounts("records 40 days on")
	want := f.hourly(nil)
	res := f.prune(PruneOptions{Retention: Retention{Payloads: 30 * day}, BatchSize: 2})
	if res.PayloadsPruned == 0 {
		t.Fatalf("payload tier pruned nothing: %+v", res)
	}
	full, _ := h.FullCount(t, f.s, f.clock.Now())
	if a, b := statsKey(f.stats(nil, nil)), statsKey(full); a != b {
		t.Errorf("after the payload tier: Stats\n%s\nwant the full count\n%s", a, b)
	}
	if a, b := hoursKey(f.hourly(nil)), hoursKey(want); a != b {
		t.Errorf("hourly moved across the payload tier:\n%s\nwant\n%s", a, b)
	}
	// A late duplicate of a folded event, folded in its turn.
	f.clock.Add(35 * day)
	f.record("std", "A", `{"a":1}`, "std/a")
	f.prune(PruneOptions{Retention: Retention{Payloads: 30 * day}})
	full, _ = h.FullCount(t, f.s, f.clock.Now())
	if a, b := statsKey(f.stats(nil, nil)), statsKey(full); a != b {
		t.Errorf("after folding a late duplicate: Stats\n%s\nwant the full count\n%s", a, b)
	}

	res = f.prune(PruneOptions{Retention: Retention{Payloads: 30 * day, Claims: 60 * day}})
	if res.EventsDeleted == 0 {
		t.Fatalf("claims tier deleted nothing: %+v", res)
	}
	full, _ = h.FullCount(t, f.s, f.clock.Now())
	if a, b := statsKey(f.stats(nil, nil)), statsKey(full); a != b {
		t.Errorf("after the claims tier: Stats\n%s\nwant the full count\n%s", a, b)
	}
	// The hours of the first day are older than the claims cutoff: gone;
	// the later ones are as they were.
	got := f.hourly(nil)
	for src, hs := range got {
		for _, c := range hs {
			if c.Hour.Before(res.ClaimCutoff.Truncate(time.Hour)) {
				t.Errorf("hour %s of %s kept past the claims cutoff %s", c.Hour, src, res.ClaimCutoff)
			}
		}
	}
	if len(before["std"]) == 0 || len(got["std"]) == 0 {
		t.Fatalf("hourly of std: before %v, after %v", before["std"], got["std"])
	}
	last := got["std"][len(got["std"])-1]
	if last.Accepted != 0 || last.Duplicates != 1 {
		t.Errorf("the last hour of std after the claims tier: %+v, want the late duplicate", last)
	}
	f.checkStatsRead()
}

// checkStatsRead: Stats lists the names given first, with zeros, then the
// others in name order.
func (f *fixture) checkStatsRead() {
	f.t.Helper()
	st := f.stats([]string{"zzz", "std"}, []string{"zzz/x"})
	if len(st.Sources) < 2 || st.Sources[0].Source != "zzz" || st.Sources[1].Source != "std" ||
		st.Sources[0] != (hookwarden.SourceStats{Source: "zzz"}) {
		f.t.Errorf("stats with names given: %+v, want zzz (zeros), std, then the others", st.Sources)
	}
	for i := 3; i < len(st.Sources); i++ {
		if st.Sources[i-1].Source > st.Sources[i].Source {
			f.t.Errorf("stats: other sources out of name order: %+v", st.Sources[2:])
		}
	}
	if len(st.Destinations) == 0 || st.Destinations[0].Destination != "zzz/x" {
		f.t.Errorf("stats destinations: %+v, want zzz/x first", st.Destinations)
	}
}
