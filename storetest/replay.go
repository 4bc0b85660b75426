package storetest

// Replay: what it resets, what it leaves, and the 3-strikes rule.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// testReplay: a replay resets dead and delivered jobs to pending with the
// full attempt budget, reports what it left (unknown, no jobs, in flight)
// and records the operator action once, only when it reset something.
func testReplay(t *testing.T, h Harness) {
	f := setup(t, h)
	f.record("std", "e1", `{"e":1}`, "std/app", "std/ops")
	f.record("std", "n", `{}`) // matched no destination
	f.finish("std/app", "e1", hookwarden.Dead)
	f.finish("std/ops", "e1", hookwarden.Delivered)
	dead, _, err := f.s.ListDead(f.ctx, DeadFilter{})
	if err != nil || len(dead) != 1 || dead[0].EventID != "e1" || dead[0].Destination != "std/app" ||
		dead[0].DeadCount != 1 || dead[0].LastError != "unprocessable" {
		t.Fatalf("dead letters: %+v %v", dead, err)
	}
	f.clock.Add(time.Hour)

	res := f.replay(ReplaySelector{Source: "std", EventIDs: []string{"e1", "nope", "n"}}, ReplayOptions{Audit: cliAudit()})
	if res.Selected != 2 || res.Replayed != 2 || skips(res) != "[nope:not_found n:no_jobs]" || res.AuditID == 0 {
		t.Fatalf("replay: %+v (skips %s), want 2 jobs replayed, nope not found, n without jobs, an audit entry", res, skips(res))
	}
	if d := slices.Sorted(slices.Values(res.Destinations)); fmt.Sprint(d) != "[std/app std/ops]" {
		t.Errorf("destinations to wake: %v", d)
	}
	if d := f.show("std", "e1"); d.Pending != 2 || d.Status != StatusPending || len(d.Audit) != 1 {
		t.Fatalf("after replay: %+v, audit %+v; want both jobs pending and the replay in its audit", d.EventSummary, d.Audit)
	}
	audit, err := f.s.EventAudit(f.ctx, "std", "e1")
	if err != nil || len(audit) != 1 || audit[0].Action != "replay" || audit[0].Origin != hookwarden.AuditCLI ||
		audit[0].Actor != "storetest" || audit[0].ID != res.AuditID {
		t.Fatalf("audit: %+v %v", audit, err)
	}
	if dead, _, _ := f.s.ListDead(f.ctx, DeadFilter{}); len(dead) != 0 {
		t.Fatalf("dead letters after replay: %+v", dead)
	}
	jobs := f.lease("std/app", 5, time.Minute)
	if len(jobs) != 1 || jobs[0].Attempt != 1 || jobs[0].DeadCount != 1 || jobs[0].IdempotencyKey() != "std:e1" {
		t.Fatalf("lease after replay: %+v, want attempt 1 (a full budget), dead count kept, same key", jobs)
	}

	// In flight: left to finish; nothing reset, no audit entry.
	res = f.replay(ReplaySelector{Source: "std", EventIDs: []string{"e1"}, Destination: "std/app"}, ReplayOptions{Audit: cliAudit()})
	if res.Replayed != 0 || skips(res) != "[e1:in_flight]" || res.AuditID != 0 {
		t.Fatalf("replay of a job in flight: %+v (skips %s)", res, skips(res))
	}
	if audit, _ := f.s.EventAudit(f.ctx, "std", "e1"); len(audit) != 1 {
		t.Fatalf("a replay that reset nothing wrote an audit entry: %+v", audit)
	}
	// The lease expired (its process died): no longer in flight.
	f.clock.Add(2 * time.Minute)
	if res := f.replay(ReplaySelector{JobIDs: []int64{jobs[0].ID}}, ReplayOptions{}); res.Replayed != 1 {
		t.Fatalf("replay of an expired lease: %+v, want replayed", res)
	}
	if again := f.lease("std/app", 5, time.Minute); len(again) != 1 || again[0].Attempt != 1 {
		t.Fatalf("lease after replaying an expired lease: %+v, want attempt 1", again)
	}
	if res := f.replay(ReplaySelector{JobIDs: []int64{1 << 40}}, ReplayOptions{}); res.Replayed != 0 ||
		skips(res) != fmt.Sprintf("[job%d:not_found]", int64(1<<40)) {
		t.Fatalf("replay of an unknown job: %+v (skips %s)", res, skips(res))
	}
}

// testThreeStrikes: a job dead-lettered ForceAfter times is replayed only
// with Force.
func testThreeStrikes(t *testing.T, h Harness) {
	f := setup(t, h)
	f.record("std", "poison", `{}`, "std/app")
	for strike := 1; strike <= ForceAfter; strike++ {
		f.finish("std/app", "poison", hookwarden.Dead)
		if strike < ForceAfter {
			if res := f.replay(ReplaySelector{Dead: true}, ReplayOptions{}); res.Replayed != 1 {
				t.Fatalf("replay after strike %d: %+v", strike, res)
			}
		}
	}
	dead, _, err := f.s.ListDead(f.ctx, DeadFilter{Source: "std"})
	if err != nil || len(dead) != 1 || dead[0].DeadCount != ForceAfter {
		t.Fatalf("dead letters: %+v %v, want one dead %d times", dead, err, ForceAfter)
	}
	for _, sel := range []ReplaySelector{{Dead: true}, {Source: "std", EventIDs: []string{"poison"}}, {JobIDs: []int64{dead[0].JobID}}} {
		res := f.replay(sel, ReplayOptions{})
		if res.Replayed != 0 || skips(res) != "[poison:needs_force]" || res.Skipped[0].DeadCount != ForceAfter {
			t.Fatalf("replay %+v without force: %+v (skips %s)", sel, res, skips(res))
		}
	}
	res := f.replay(ReplaySelector{Dead: true}, ReplayOptions{Force: true, Audit: cliAudit()})
	if res.Replayed != 1 || fmt.Sprint(res.Destinations) != "[std/app]" || res.AuditID == 0 {
		t.Fatalf("replay with force: %+v", res)
	}
	if jobs := f.lease("std/app", 5, time.Minute); len(jobs) != 1 || jobs[0].Attempt != 1 || jobs[0].DeadCount != ForceAfter {
		t.Fatalf("lease after a forced replay: %+v", jobs)
	}
}
