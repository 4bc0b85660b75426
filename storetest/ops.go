package storetest

// Operator reads: run windows and gaps, stats, and a backup the --db
// commands can read.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

func (f *fixture) startRun() int64 {
	f.t.Helper()
	id, err := f.s.StartRun(f.ctx, "storetest")
	if err != nil {
		f.t.Fatalf("start run: %v", err)
	}
	return id
}

func (f *fixture) heartbeat(run int64) {
	f.t.Helper()
	if err := f.s.Heartbeat(f.ctx, run); err != nil {
		f.t.Fatalf("heartbeat: %v", err)
	}
}

func (f *fixture) stopRun(run int64) {
	f.t.Helper()
	if err := f.s.StopRun(f.ctx, run); err != nil {
		f.t.Fatalf("stop run: %v", err)
	}
}

func (f *fixture) gaps(opt GapOptions) GapReport {
	f.t.Helper()
	rep, err := f.s.Gaps(f.ctx, opt)
	if err != nil {
		f.t.Fatalf("gaps: %v", err)
	}
	return rep
}

// testGapsCrash: a run that died without a clean stop leaves a crash
// window from its last heartbeat to the next start; a window since a clean
// stop, or since a run whose heartbeat went stale, is open.
func testGapsCrash(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.clock.Now()
	run1 := f.startRun()
	f.clock.Add(5 * time.Second)
	f.heartbeat(run1)
	f.clock.Add(10*time.Minute - 5*time.Second) // run1 died after its heartbeat
	run2 := f.startRun()
	rep := f.gaps(GapOptions{})
	if rep.Runs != 2 || len(rep.Outages) != 1 {
		t.Fatalf("gaps: %+v, want 2 runs and one outage", rep)
	}
	if o := rep.Outages[0]; !o.Crash || o.Open || !o.Start.Equal(t0.Add(5*time.Second)) || !o.End.Equal(t0.Add(10*time.Minute)) ||
		o.Length != 10*time.Minute-5*time.Second || o.RunBefore != run1 || o.RunAfter != run2 {
		t.Fatalf("crash window %+v, want from run1's last heartbeat (+5s) to run2's start (+10m)", o)
	}

	f.clock.Add(time.Minute)
	f.stopRun(run2) // +11m
	f.clock.Add(time.Hour)
	rep = f.gaps(GapOptions{Sources: []SourcePolicy{{Name: "std", RetryHorizon: 30 * time.Minute}, {Name: "patient", RetryHorizon: 72 * time.Hour}}})
	if len(rep.Outages) != 2 {
		t.Fatalf("gaps after a clean stop: %+v, want the crash window and an open one", rep.Outages)
	}
	if o := rep.Outages[1]; !o.Open || o.Crash || !o.Start.Equal(t0.Add(11*time.Minute)) || o.Length != time.Hour ||
		fmt.Sprint(o.BeyondRetryHorizon) != "[std]" {
		t.Fatalf("window since the clean stop %+v, want open, not a crash, 1h, beyond std's horizon", o)
	}
	runs, err := f.s.Runs(f.ctx)
	if err != nil || len(runs) != 2 || runs[0].ID != run1 || !runs[0].StoppedAt.IsZero() || !runs[1].StoppedAt.Equal(t0.Add(11*time.Minute)) {
		t.Fatalf("runs: %+v %v", runs, err)
	}

	// A run whose heartbeat stopped: dead once it is stale.
	run3 := f.startRun()
	f.clock.Add(5 * time.Second)
	f.heartbeat(run3)
	if rep := f.gaps(GapOptions{Stale: 10 * time.Second}); len(rep.Outages) != 2 || rep.Outages[1].Open {
		t.Fatalf("gaps with run3 alive: %+v, want two closed windows", rep.Outages)
	}
	f.clock.Add(time.Minute)
	rep = f.gaps(GapOptions{Stale: 10 * time.Second})
	if len(rep.Outages) != 3 {
		t.Fatalf("gaps after run3 died: %+v, want three windows", rep.Outages)
	}
	if o := rep.Outages[2]; !o.Open || !o.Crash || o.Length != time.Minute || o.RunBefore != run3 {
		t.Fatalf("window since run3 died %+v, want open, a crash, 1m from its last heartbeat", o)
	}
}

// testGapsClean: a clean stop followed by a quick start (a deploy), and a
// live run, report no outage.
func testGapsClean(t *testing.T, h Harness) {
	f := setup(t, h)
	run1 := f.startRun()
	f.clock.Add(30 * time.Second)
	f.heartbeat(run1)
	f.clock.Add(30 * time.Second)
	f.stopRun(run1)
	f.clock.Add(2 * time.Second)
	run2 := f.startRun()
	if rep := f.gaps(GapOptions{}); rep.Runs != 2 || len(rep.Outages) != 0 {
		t.Fatalf("gaps after a restart: %+v, want no outage", rep)
	}
	f.clock.Add(5 * time.Second)
	f.heartbeat(run2)
	if rep := f.gaps(GapOptions{}); len(rep.Outages) != 0 {
		t.Fatalf("gaps with a live run: %+v, want no outage", rep)
	}
}

// testGapsLiveRun: a live run (no stop, a fresh heartbeat) is up until
// now, no window after it; but a later run of the store's instance proves
// the one before it died (a kill -9 and a quick restart): the crash window
// from its last heartbeat shows at once, not only once that heartbeat is
// stale.
func testGapsLiveRun(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.clock.Now()
	run1 := f.startRun()
	f.clock.Add(5 * time.Second)
	f.heartbeat(run1)
	f.clock.Add(3 * time.Second) // +8s: run1's heartbeat is fresh
	if rep := f.gaps(GapOptions{Stale: 10 * time.Second}); len(rep.Outages) != 0 {
		t.Fatalf("gaps with run1 alive: %+v, want no window", rep.Outages)
	}
	run2 := f.startRun() // run1 was killed after its heartbeat
	rep := f.gaps(GapOptions{Stale: 10 * time.Second})
	if len(rep.Outages) != 1 {
		t.Fatalf("gaps right after run2 started: %+v, want run1's crash window", rep.Outages)
	}
	if o := rep.Outages[0]; !o.Crash || o.Open || !o.Start.Equal(t0.Add(5*time.Second)) || !o.End.Equal(t0.Add(8*time.Second)) ||
		o.RunBefore != run1 || o.RunAfter != run2 {
		t.Fatalf("window %+v, want run1's crash from its last heartbeat (+5s) to run2's start (+8s)", o)
	}
	f.clock.Add(2 * time.Second)
	f.heartbeat(run2) // +10s
	f.clock.Add(time.Minute)
	rep = f.gaps(GapOptions{Stale: 10 * time.Second})
	if len(rep.Outages) != 2 {
		t.Fatalf("gaps after run2 died: %+v, want the crash window and an open one", rep.Outages)
	}
	if o := rep.Outages[1]; !o.Open || !o.Crash || !o.Start.Equal(t0.Add(10*time.Second)) || o.Length != time.Minute {
		t.Fatalf("window %+v, want open, a crash, from run2's last heartbeat (+10s)", o)
	}
}

// testSilences: a source with expect_within is reported when it went
// silent longer than that, between requests and since its last one.
func testSilences(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.clock.Now()
	run := f.startRun()
	f.record("std", "s0", `{}`)
	f.clock.Add(time.Minute)
	f.record("std", "s1", `{}`)
	f.clock.Add(3*time.Hour + 29*time.Minute)
	f.record("std", "s2", `{}`) // +3h30m
	f.clock.Add(30 * time.Minute)
	f.heartbeat(run) // now +4h
	rep := f.gaps(GapOptions{Sources: []SourcePolicy{
		{Name: "std", RetryHorizon: 2 * time.Hour, ExpectWithin: time.Hour},
		{Name: "quiet", RetryHorizon: 72 * time.Hour, ExpectWithin: time.Hour},
		{Name: "unchecked", RetryHorizon: time.Hour},
	}})
	if len(rep.Outages) != 0 {
		t.Fatalf("outages: %+v, want none", rep.Outages)
	}
	bySource := map[string][]string{}
	for _, s := range rep.Silences {
		end := "open"
		if !s.Open {
			end = fmt.Sprint(s.End.Sub(t0))
		}
		bySource[s.Source] = append(bySource[s.Source], fmt.Sprintf("%v-%s beyond=%v", s.Start.Sub(t0), end, s.BeyondRetryHorizon))
	}
	want := "map[quiet:[0s-open beyond=false] std:[1m0s-3h30m0s beyond=true]]"
	if got := fmt.Sprint(bySource); got != want {
		t.Fatalf("silences %s, want %s", got, want)
	}
}

// testStats: counts per source and per destination, the names asked for
// first (zeros included), the oldest pending job's age on the store's clock.
func testStats(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.clock.Now()
	f.record("std", "e1", `{"n":1}`, "std/app", "std/ops")
	f.record("std", "e1", `{"n":1}`, "std/app", "std/ops")
	f.record("std", "e1", `{"n":1,"x":1}`, "std/app", "std/ops")
	f.record("std", "e2", `{"n":2}`, "std/app")
	f.record("std", "", `{"no":"id"}`)
	f.record("gh", "g1", `{}`, "gh/app")
	f.finish("std/app", "e1", hookwarden.Delivered) // e2 is retried, still pending
	f.finish("std/ops", "e1", hookwarden.Dead)
	f.clock.Add(90 * time.Second)

	st := f.stats([]string{"std", "quiet"}, []string{"std/app", "idle/app"})
	if !st.At.Equal(f.clock.Now()) {
		t.Errorf("stats at %v, want the store's clock %v", st.At, f.clock.Now())
	}
	if len(st.Sources) != 3 || st.Sources[0].Source != "std" || st.Sources[1].Source != "quiet" || st.Sources[2].Source != "gh" {
		t.Fatalf("sources %+v, want std, quiet, then gh", st.Sources)
	}
	if s := st.Sources[0]; s.Accepted != 2 || s.Duplicates != 2 || s.Divergent != 1 || s.Quarantined != 1 || !s.LastReceivedAt.Equal(t0) {
		t.Errorf("std: %+v, want 2 accepted, 2 duplicates (1 divergent), 1 quarantined, last at %v", s, t0)
	}
	if s := st.Sources[1]; s.Accepted != 0 || s.Duplicates != 0 || s.Quarantined != 0 || !s.LastReceivedAt.IsZero() {
		t.Errorf("quiet: %+v, want zeros", s)
	}
	if s := st.Sources[2]; s.Accepted != 1 {
		t.Errorf("gh: %+v, want 1 accepted", s)
	}
	dests := map[string]string{}
	for i, d := range st.Destinations {
		if i < 2 && d.Destination != []string{"std/app", "idle/app"}[i] {
			t.Errorf("destination %d is %s, want the names asked for first", i, d.Destination)
		}
		dests[d.Destination] = fmt.Sprintf("p%d d%d x%d age %v", d.Pending, d.Delivered, d.Dead, d.OldestPendingAge)
	}
	want := "map[gh/app:p1 d0 x0 age 1m30s idle/app:p0 d0 x0 age 0s std/app:p1 d1 x0 age 1m30s std/ops:p0 d0 x1 age 0s]"
	if got := fmt.Sprint(dests); got != want {
		t.Errorf("destinations %s, want %s", got, want)
	}

	out, err := f.s.OutboxStats(f.ctx, []string{"std/app", "idle/app"})
	if err != nil {
		t.Fatal(err)
	}
	outbox := map[string]string{}
	for _, o := range out {
		outbox[o.Destination] = fmt.Sprintf("p%d x%d age %v", o.Pending, o.Dead, o.OldestPendingAge)
	}
	if want := "map[gh/app:p1 x0 age 1m30s idle/app:p0 x0 age 0s std/app:p1 x0 age 1m30s std/ops:p0 x1 age 0s]"; fmt.Sprint(outbox) != want {
		t.Errorf("outbox %v, want %s", outbox, want)
	}
}

// testBackup: a backup is a file the --db commands open read-only and
// read the same events, dead letters, held requests and counts from; it
// never overwrites a file.
func testBackup(t *testing.T, h Harness) {
	if h.OpenCopy == nil {
		t.Skip("Harness.OpenCopy not set")
	}
	f := setup(t, h)
	body := "{\"exact\":\"bytes \u00e9\\n\"}\n"
	f.record("std", "keep", body, "std/app")
	f.record("std", "keep", body, "std/app")
	f.record("std", "gone", `{}`, "std/app", "std/ops")
	f.finish("std/ops", "gone", hookwarden.Dead)
	f.record("std", "", `{"no":"id"}`)
	f.mustRecord(f.batch("sg", "sg/app", element("a"), element("b")))

	dest := filepath.Join(t.TempDir(), "copy.db")
	if err := f.s.Backup(f.ctx, dest, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Backup(f.ctx, dest, nil); !errors.Is(err, ErrExists) {
		t.Fatalf("a second backup to the same file: %v, want ErrExists", err)
	}
	f.record("std", "after", `{}`, "std/app") // not in the copy

	c := &fixture{t: t, h: h, s: h.OpenCopy(t, dest, f.clock.Now), clock: f.clock, ctx: f.ctx}
	if got := string(c.show("std", "keep").Body); got != body {
		t.Fatalf("body in the copy %q, want %q", got, body)
	}
	if _, err := c.s.ShowEvent(c.ctx, "std", "after"); err == nil {
		t.Fatal("the copy has an event recorded after the backup")
	}
	list := func(x *fixture) string {
		t.Helper()
		events, _, err := x.s.ListEvents(x.ctx, EventFilter{})
		if err != nil {
			t.Fatalf("list events: %v", err)
		}
		dead, _, err := x.s.ListDead(x.ctx, DeadFilter{})
		if err != nil {
			t.Fatalf("list dead: %v", err)
		}
		var ev []EventSummary
		for _, e := range events {
			if e.EventID != "after" {
				ev = append(ev, e)
			}
		}
		return fmt.Sprintf("%+v\n%+v\n%+v\n%+v", ev, dead, x.held(""), x.show("sg", "b").ReceiptLog)
	}
	if orig, cp := list(f), list(c); orig != cp {
		t.Errorf("the copy reads differently:\noriginal %s\n    copy %s", orig, cp)
	}
	if s := c.stats([]string{"std", "sg"}, nil); s.Sources[0].Accepted != 2 || s.Sources[0].Duplicates != 1 ||
		s.Sources[0].Quarantined != 1 || s.Sources[1].Accepted != 2 {
		t.Errorf("stats of the copy: %+v", s.Sources)
	}
	if _, err := c.s.Record(c.ctx, c.receipt("std", "write", `{}`, "std/app")); err == nil {
		t.Error("the read-only copy accepted a write")
	}
}

// testListEvents: the events listing filters by source, type (exact or a
// prefix), status and time, newest first, in pages that neither overlap
// nor skip.
func testListEvents(t *testing.T, h Harness) {
	f := setup(t, h)
	f.record("std", "e1", `{"n":1}`, "std/app")
	f.clock.Add(time.Minute)
	f.record("std", "e2", `{"n":2}`, "std/app")
	f.clock.Add(time.Minute)
	f.record("std", "e3", `{"n":3}`, "std/app")
	f.record("gh", "g1", `{}`, "gh/app")
	f.record("std", "", `{"no":"id"}`)
	f.finish("std/app", "e1", hookwarden.Delivered)
	f.finish("std/app", "e2", hookwarden.Dead)
	ids := func(fl EventFilter) string {
		t.Helper()
		items, _, err := f.s.ListEvents(f.ctx, fl)
		if err != nil {
			t.Fatalf("list events %+v: %v", fl, err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Source+"/"+it.EventID+"="+string(it.Status))
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		name string
		f    EventFilter
		want string
	}{
		{"all", EventFilter{}, "[gh/g1=pending std/e3=pending std/e2=dead std/e1=delivered]"},
		{"source", EventFilter{Source: "std"}, "[std/e3=pending std/e2=dead std/e1=delivered]"},
		{"dead", EventFilter{Status: StatusDead}, "[std/e2=dead]"},
		{"pending", EventFilter{Status: StatusPending}, "[gh/g1=pending std/e3=pending]"},
		{"delivered", EventFilter{Status: StatusDelivered}, "[std/e1=delivered]"},
		{"quarantined", EventFilter{Status: StatusQuarantined}, "[std/=quarantined]"},
		{"since", EventFilter{Since: f.clock.Now().Add(-30 * time.Second)}, "[gh/g1=pending std/e3=pending]"},
		{"type prefix", EventFilter{Type: "t.*"}, "[gh/g1=pending std/e3=pending std/e2=dead std/e1=delivered]"},
		{"type exact", EventFilter{Type: "x.created"}, "[]"},
	} {
		if got := ids(c.f); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	var pages []string
	cursor := int64(0)
	for range 3 {
		items, next, err := f.s.ListEvents(f.ctx, EventFilter{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			pages = append(pages, it.EventID)
		}
		pages = append(pages, "|")
		if cursor = next; next == 0 {
			break
		}
	}
	if got := fmt.Sprint(pages); got != "[g1 e3 e2 | e1 |]" {
		t.Errorf("pages of 3: %s, want [g1 e3 e2 | e1 |]", got)
	}
}

// testListFilters: each filter of the events listing, and their
// combinations, over several sources and types, page by page: every event
// that matches, newest first, none twice.
func testListFilters(t *testing.T, h Harness) {
	f := setup(t, h)
	type ev struct{ source, id, typ string }
	var all []ev
	for i := range 30 {
		e := ev{[]string{"std", "gh", "sg"}[i%3], fmt.Sprint("e", i), []string{"invoice.paid", "invoice.failed", "ping", "charge.x"}[i%4]}
		r := f.receipt(e.source, e.id, fmt.Sprintf(`{"i":%d}`, i), e.source+"/app")
		r.Events[0].Type = e.typ
		f.mustRecord(r)
		all = append(all, e)
		f.clock.Add(time.Minute)
	}
	// e4 (gh) dead, e5 (sg) delivered, the rest pending.
	f.finish("gh/app", "e4", hookwarden.Dead)
	f.finish("sg/app", "e5", hookwarden.Delivered)
	status := func(e ev) EventStatus {
		switch e.id {
		case "e4":
			return StatusDead
		case "e5":
			return StatusDelivered
		}
		return StatusPending
	}
	since := f.clock.Now().Add(-12*time.Minute - 30*time.Second) // e18 on
	for _, fl := range []EventFilter{
		{Source: "std"}, {Type: "invoice.paid"}, {Type: "invoice.*"}, {Source: "gh", Type: "invoice.*"},
		{Source: "sg", Type: "ping"}, {Status: StatusDead}, {Status: StatusPending, Source: "gh"},
		{Status: StatusDelivered, Type: "invoice.*"}, {Since: since}, {Since: since, Source: "std", Type: "invoice.*"},
		{Status: StatusPending, Since: since, Type: "ping"}, {Type: "nothing.*"}, {Source: "nobody"},
	} {
		var want []string
		for i := len(all) - 1; i >= 0; i-- {
			e := all[i]
			p, isPrefix := strings.CutSuffix(fl.Type, "*")
			switch {
			case fl.Source != "" && e.source != fl.Source,
				fl.Type != "" && !isPrefix && e.typ != fl.Type,
				isPrefix && !strings.HasPrefix(e.typ, p),
				fl.Status != "" && status(e) != fl.Status,
				!fl.Since.IsZero() && i < 18:
				continue
			}
			want = append(want, e.id)
		}
		for _, limit := range []int{2, 50} {
			fl.Limit, fl.Cursor = limit, 0
			var got []string
			for pages := 0; ; pages++ {
				items, next, err := f.s.ListEvents(f.ctx, fl)
				if err != nil {
					t.Fatalf("list %+v: %v", fl, err)
				}
				for _, it := range items {
					got = append(got, it.EventID)
				}
				if next == 0 || pages > 40 {
					break
				}
				fl.Cursor = next
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("list %+v by pages of %d: %v, want %v", EventFilter{Source: fl.Source, Type: fl.Type, Status: fl.Status,
					Since: fl.Since}, limit, got, want)
			}
		}
	}
}
