package sqlitestore

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// A replay's audit entry commits with the jobs it reset: written by the
// first batch that resets one, linked to every event replayed, its counts
// kept current by each later batch; a replay that resets nothing writes none.
func TestReplayAuditEntry(t *testing.T) {
	o := setupOps(t)
	for i := range 5 {
		id := fmt.Sprintf("e%d", i)
		o.record("std", id, `{}`, "std/app")
		o.finish("std/app", id, hookwarden.Dead)
	}
	cli := &hookwarden.AuditEntry{Origin: hookwarden.AuditCLI, Actor: "alice"}

	// Nothing resettable: no entry.
	res, err := o.s.Replay(o.ctx, hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"nope"}}, hookwarden.ReplayOptions{Audit: cli})
	if err != nil || res.Replayed != 0 || res.AuditID != 0 {
		t.Fatalf("replay of an unknown id: %+v %v", res, err)
	}
	if n := o.count(`SELECT count(*) FROM audit`); n != 0 {
		t.Fatalf("%d audit entries for a replay that changed nothing", n)
	}

	res, err = o.s.Replay(o.ctx, hookwarden.ReplaySelector{Dead: true}, hookwarden.ReplayOptions{Audit: cli, BatchSize: 2})
	if err != nil || res.Replayed != 5 || res.AuditID == 0 {
		t.Fatalf("replay --dead: %+v %v", res, err)
	}
	var action, origin, actor, args, result string
	if err := o.s.DB().QueryRow(`SELECT action, origin, actor, args, result FROM audit WHERE id = ?`, res.AuditID).
		Scan(&action, &origin, &actor, &args, &result); err != nil {
		t.Fatal(err)
	}
	if action != "replay" || origin != "cli" || actor != "alice" || args != `{"dead":true}` {
		t.Errorf("entry = %s %s %s %s", action, origin, actor, args)
	}
	var r replayAudit
	if err := json.Unmarshal([]byte(result), &r); err != nil || r.Replayed != 5 || r.Selected != 5 {
		t.Errorf("result = %s (%v), want 5 of 5 replayed after three batches", result, err)
	}
	if n := o.count(`SELECT count(*) FROM audit`); n != 1 {
		t.Errorf("%d entries, want one per replay", n)
	}
	if n := o.count(`SELECT count(*) FROM audit_events WHERE audit_id = ?`, res.AuditID); n != 5 {
		t.Errorf("%d events linked, want 5", n)
	}

	// events show lists it under the event; an entry of the API too.
	o.finish("std/app", "e3", hookwarden.Delivered)
	api := &hookwarden.AuditEntry{Origin: hookwarden.AuditAPI, Actor: "192.0.2.7:5000"}
	if res, err := o.s.Replay(o.ctx, hookwarden.ReplaySelector{Source: "std", EventIDs: []string{"e3"}}, hookwarden.ReplayOptions{Audit: api}); err != nil || res.Replayed != 1 {
		t.Fatalf("replay e3: %+v %v", res, err)
	}
	d, err := o.s.ShowEvent(o.ctx, "std", "e3")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Audit) != 2 || d.Audit[0].Origin != "cli" || d.Audit[1].Origin != "api" || d.Audit[1].Actor != "192.0.2.7:5000" ||
		string(d.Audit[1].Args) != `{"source":"std","event_ids":["e3"]}` || !d.Audit[1].At.Equal(o.clock.Now()) {
		t.Errorf("events show audit = %+v", d.Audit)
	}
	if d, _ := o.s.ShowEvent(o.ctx, "std", "e0"); len(d.Audit) != 1 {
		t.Errorf("e0: %d audit entries, want 1", len(d.Audit))
	}
}

// Store.Audit is the entry point of the other writing commands; it refuses
// an entry without action or with an unknown origin.
func TestAuditEntryPoint(t *testing.T) {
	o := setupOps(t)
	o.record("std", "e1", `{}`, "std/app")
	id, err := o.s.Audit(o.ctx, hookwarden.AuditEntry{Action: "pause", Origin: hookwarden.AuditDashboard, Actor: "127.0.0.1:1",
		Args: json.RawMessage(`{"destination":"std/app"}`), Events: []hookwarden.EventKey{{Source: "std", EventID: "e1"}}})
	if err != nil || id == 0 {
		t.Fatal(id, err)
	}
	if d, _ := o.s.ShowEvent(o.ctx, "std", "e1"); len(d.Audit) != 1 || d.Audit[0].Action != "pause" || d.Audit[0].Result != nil {
		t.Errorf("audit = %+v", d.Audit)
	}
	for _, bad := range []hookwarden.AuditEntry{{Origin: "cli"}, {Action: "drop", Origin: "cron"}, {Action: "drop", Origin: "cli", Args: []byte("{")}} {
		if _, err := o.s.Audit(o.ctx, bad); err == nil {
			t.Errorf("Audit(%+v) accepted", bad)
		}
	}
}

// The CLI's prune is an operator action: one entry, with its counts.
func TestPruneAuditEntry(t *testing.T) {
	o := setupOps(t)
	o.record("std", "e1", `{}`, "std/app")
	o.finish("std/app", "e1", hookwarden.Delivered)
	o.clock.Add(48 * time.Hour)
	cli := &hookwarden.AuditEntry{Origin: hookwarden.AuditCLI, Actor: "bob"}
	if _, err := o.s.Prune(o.ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: time.Hour}, DryRun: true, Audit: cli}); err != nil {
		t.Fatal(err)
	}
	if n := o.count(`SELECT count(*) FROM audit`); n != 0 {
		t.Fatalf("a dry run wrote %d audit entries", n)
	}
	res, err := o.s.Prune(o.ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: time.Hour}, Audit: cli})
	if err != nil || res.PayloadsPruned != 1 || res.AuditID == 0 {
		t.Fatalf("prune: %+v %v", res, err)
	}
	var args, result string
	if err := o.s.DB().QueryRow(`SELECT args, result FROM audit WHERE id = ? AND action = 'prune' AND actor = 'bob'`, res.AuditID).
		Scan(&args, &result); err != nil {
		t.Fatal(err)
	}
	var got hookwarden.PruneResult
	if err := json.Unmarshal([]byte(result), &got); err != nil || got.PayloadsPruned != 1 || args != `{"claims":"0s","payloads":"1h0m0s"}` {
		t.Errorf("args %s result %s (%v)", args, result, err)
	}
}
