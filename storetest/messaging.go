package storetest

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// The messaging platforms' batches (SPEC 11): one receipt, several events,
// each delivered as the request's envelope holding only it.

// wa is a WhatsApp-shaped body, non-ASCII raw and escaped, with messages
// ids; envelope cuts out one of them (a stand-in for internal/batch, which
// the store never sees).
func wa(ids ...string) (body string, events []hookwarden.Event) {
	msgs := ""
	own := map[string]string{}
	for i, id := range ids {
		o := fmt.Sprintf(`{"id":%q,"text":{"body":"caf\u00e9 crème %d"}}`, id, i)
		own[id] = o
		if i > 0 {
			msgs += ","
		}
		msgs += o
	}
	env := func(m string) string {
		return `{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{"messages":[` + m + `]},"field":"messages"}]}]}`
	}
	for _, id := range ids {
		e := env(own[id])
		events = append(events, hookwarden.Event{ID: id, Type: "messages", Body: []byte(e),
			BodySHA256: sha256.Sum256([]byte(own[id])), Destinations: []string{"wa/app"}})
	}
	return env(msgs), events
}

func (f *fixture) envelopes(ids ...string) *hookwarden.Receipt {
	body, evs := wa(ids...)
	r := f.receipt("wa", "", body)
	r.QuarantineReason = ""
	r.Events = evs
	return r
}

// testEnvelopeEvents: each event of a request is claimed on its own id in
// the receipt's transaction; a resend is a duplicate, a mix delivers only
// the new; the jobs carry their envelopes byte for byte, the receipt the
// raw request; a derived id is marked, in a batch and alone.
func testEnvelopeEvents(t *testing.T, h Harness) {
	f := setup(t, h)
	first := f.envelopes("wamid.A", "wamid.B", "wamid.C")
	res := f.mustRecord(first)
	if res.Outcome != hookwarden.Accepted || len(res.Events) != 3 {
		t.Fatalf("first batch: %+v", res)
	}
	for i, er := range res.Events {
		if er != (hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: 1}) {
			t.Errorf("event %d: %+v, want accepted with one job", i, er)
		}
	}
	if res := f.mustRecord(f.envelopes("wamid.A", "wamid.B", "wamid.C")); res.Outcome != hookwarden.Duplicate ||
		res.Events[0] != (hookwarden.EventResult{Outcome: hookwarden.Duplicate}) {
		t.Fatalf("same batch again: %+v, want duplicate, not divergent", res)
	}
	res = f.mustRecord(f.envelopes("wamid.C", "wamid.D"))
	if res.Outcome != hookwarden.Accepted || res.Events[0].Outcome != hookwarden.Duplicate ||
		res.Events[1] != (hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: 1}) {
		t.Fatalf("old and new: %+v, want C duplicate, D accepted", res)
	}
	jobs := f.lease("wa/app", 10, time.Minute)
	if len(jobs) != 4 {
		t.Fatalf("leased %d jobs, want 4 (A, B, C, D once each)", len(jobs))
	}
	want := map[string]string{}
	for _, e := range append(first.Events, f.envelopes("wamid.C", "wamid.D").Events[1]) {
		want[e.ID] = string(e.Body)
	}
	for _, j := range jobs {
		if string(j.Body) != want[j.EventID] {
			t.Errorf("job %s: body %s, want its envelope %s", j.EventID, j.Body, want[j.EventID])
		}
	}
	d := f.show("wa", "wamid.B")
	if d.Derived || len(d.ReceiptLog) != 2 || string(d.ReceiptLog[0].Body) != string(first.Body) {
		t.Errorf("wamid.B: derived %v receipts %+v; want the raw request byte for byte, twice", d.Derived, d.ReceiptLog)
	}

	// Derived ids: in a batch, and alone (a Discord Webhook Event).
	body, evs := wa("x")
	evs[0].ID, evs[0].Derived = fmt.Sprintf("%x", sha256.Sum256([]byte("own")))+"", true
	r := f.receipt("wa", "", body)
	r.QuarantineReason, r.Events = "", evs
	f.mustRecord(r)
	if d := f.show("wa", evs[0].ID); !d.Derived {
		t.Errorf("derived batch event: derived_id false")
	}
	alone := f.receipt("dc", "d1", `{"event":{}}`, "dc/app")
	alone.Events[0].Derived = true
	if res := f.mustRecord(alone); res.Outcome != hookwarden.Accepted {
		t.Fatalf("derived single event: %+v", res)
	}
	if d := f.show("dc", "d1"); !d.Derived {
		t.Errorf("derived single event: derived_id false")
	}
	items, _, err := f.s.ListEvents(f.ctx, hookwarden.EventFilter{Source: "dc"})
	if err != nil || len(items) != 1 || !items[0].Derived {
		t.Errorf("list dc: %+v %v, want one event with derived_id", items, err)
	}
	if d := f.show("dc", "d1"); d.Derived && f.show("wa", "wamid.A").Derived {
		t.Errorf("wamid.A marked derived")
	}
}

// testEnvelopeConcurrent: 64 copies of one batch at once: each event is
// claimed once and gets one job.
func testEnvelopeConcurrent(t *testing.T, h Harness) {
	f := setup(t, h)
	ids := []string{"wamid.1", "wamid.2", "wamid.3", "wamid.4", "wamid.5"}
	var wg sync.WaitGroup
	results := make([]hookwarden.RecordResult, 64)
	errs := make([]error, 64)
	for i := range 64 {
		r := f.envelopes(ids...)
		wg.Go(func() { results[i], errs[i] = f.s.Record(f.ctx, r) })
	}
	wg.Wait()
	accepted := map[int]int{}
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("copy %d: %v", i, errs[i])
		}
		for j, er := range res.Events {
			if er.Outcome == hookwarden.Accepted {
				accepted[j]++
			}
		}
	}
	for j := range ids {
		if accepted[j] != 1 {
			t.Errorf("event %s accepted %d times, want once", ids[j], accepted[j])
		}
	}
	if jobs := f.lease("wa/app", 100, time.Minute); len(jobs) != len(ids) {
		t.Errorf("leased %d jobs, want %d", len(jobs), len(ids))
	}
}

// testEnvelopeMixed: a request of 300 events (more than one multi-row
// statement's worth) whose ids were partly claimed before, by a batch and
// by a single-event receipt, and which repeats an id twice, once with the
// same bytes and once with others: each new id is claimed once with one
// job, the old ones and the repeats are duplicates, the differing repeat
// divergent, and the receipt is linked once per id.
func testEnvelopeMixed(t *testing.T, h Harness) {
	f := setup(t, h)
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = fmt.Sprintf("m.%d", i)
	}
	r := f.envelopes(ids...)
	earlier := f.envelopes("m.5", "m.17")
	earlier.Events = []hookwarden.Event{r.Events[5], r.Events[17]}
	f.mustRecord(earlier)
	alone := f.receipt("wa", "m.250", string(r.Events[250].Body), "wa/app")
	alone.Events[0].BodySHA256 = r.Events[250].BodySHA256
	f.mustRecord(alone)
	// Two more copies of m.40: the same bytes, then others.
	same := r.Events[40]
	other := r.Events[40]
	other.Body = []byte(`{"id":"m.40","text":{"body":"edited"}}`)
	other.BodySHA256 = sha256.Sum256(other.Body)
	r.Events = append(r.Events, same, other)
	res := f.mustRecord(r)
	if res.Outcome != hookwarden.Accepted || len(res.Events) != 302 {
		t.Fatalf("mixed batch: outcome %v, %d events", res.Outcome, len(res.Events))
	}
	old := map[int]bool{5: true, 17: true, 250: true}
	for i, er := range res.Events {
		want := hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: 1}
		switch {
		case i == 300:
			want = hookwarden.EventResult{Outcome: hookwarden.Duplicate}
		case i == 301:
			want = hookwarden.EventResult{Outcome: hookwarden.Duplicate, Divergent: true}
		case old[i]:
			want = hookwarden.EventResult{Outcome: hookwarden.Duplicate}
		}
		if er != want {
			t.Errorf("event %d (%s): %+v, want %+v", i, r.Events[i].ID, er, want)
		}
	}
	jobs := f.lease("wa/app", 1000, time.Minute)
	if len(jobs) != 300 {
		t.Fatalf("leased %d jobs, want 300 (each id once)", len(jobs))
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		if seen[j.EventID] {
			t.Errorf("%s leased twice", j.EventID)
		}
		seen[j.EventID] = true
	}
	kinds := func(id string) (k []string) {
		for _, ri := range f.show("wa", id).ReceiptLog {
			k = append(k, fmt.Sprintf("%s batch=%v", ri.Kind, ri.Batch))
		}
		return k
	}
	if k := kinds("m.40"); len(k) != 1 || k[0] != "accepted batch=true" {
		t.Errorf("m.40: receipts %q, want the batch once, accepted", k)
	}
	if k := kinds("m.17"); len(k) != 2 || k[1] != "duplicate batch=true" {
		t.Errorf("m.17: receipts %q, want the first batch then a duplicate", k)
	}
	if k := kinds("m.250"); len(k) != 2 || k[0] != "accepted batch=false" || k[1] != "duplicate batch=true" {
		t.Errorf("m.250: receipts %q, want its own receipt then the batch's duplicate", k)
	}
	if d := f.show("wa", "m.299"); d.Body == nil || string(d.Body) != string(r.Events[299].Body) {
		t.Errorf("m.299: body %s, want its envelope", d.Body)
	}
}

// testRetentionClaimsBySource: a source's own claims retention
// (retention_claims) replaces retention.claims for its events, shorter
// (Telegram's 7 days) or longer, on the same pass; a dry run counts the
// same; the claims tier runs for those sources even without
// retention.claims.
func testRetentionClaimsBySource(t *testing.T, h Harness) {
	f := setup(t, h)
	for _, src := range []string{"tg", "std", "long"} {
		f.record(src, "u1", `{"update_id":1}`) // no destination: finished at once
	}
	f.clock.Add(10 * day)
	f.record("tg", "u2", `{"update_id":2}`)
	by := map[string]time.Duration{"tg": 7 * day, "long": 365 * day}
	if res := f.prune(hookwarden.PruneOptions{Retention: hookwarden.Retention{Claims: 90 * day, ClaimsBySource: by}, DryRun: true}); res.EventsDeleted != 1 {
		t.Fatalf("dry run: %+v, want 1 (tg/u1)", res)
	}
	if res := f.prune(hookwarden.PruneOptions{Retention: hookwarden.Retention{Claims: 90 * day, ClaimsBySource: by}, BatchSize: 1}); res.EventsDeleted != 1 {
		t.Fatalf("prune at 10 days: %+v, want tg/u1 only", res)
	}
	if r := f.record("tg", "u1", `{"update_id":1}`); r.Outcome != hookwarden.Accepted {
		t.Errorf("tg/u1 after its 7 days: %+v, want a new event (update_id re-randomized)", r)
	}
	for _, k := range [][2]string{{"std", "u1"}, {"long", "u1"}, {"tg", "u2"}} {
		if r := f.record(k[0], k[1], `{"update_id":1}`); r.Outcome != hookwarden.Duplicate {
			t.Errorf("%s/%s: %+v, want still claimed", k[0], k[1], r)
		}
	}
	f.clock.Add(100 * day)
	if res := f.prune(hookwarden.PruneOptions{Retention: hookwarden.Retention{Claims: 90 * day, ClaimsBySource: by}}); res.EventsDeleted != 3 {
		t.Fatalf("prune at 110 days: %+v, want std/u1 and tg's two, long kept", res)
	}
	if r := f.record("long", "u1", `{"update_id":1}`); r.Outcome != hookwarden.Duplicate {
		t.Errorf("long/u1 at 110 days: %+v, want still claimed (365 days)", r)
	}
	f.record("std", "u2", `{"update_id":2}`)
	// Only per-source retention: the others are kept forever.
	f.clock.Add(400 * day)
	if res := f.prune(hookwarden.PruneOptions{Retention: hookwarden.Retention{ClaimsBySource: map[string]time.Duration{"long": 365 * day}}}); res.EventsDeleted != 1 {
		t.Fatalf("prune of long alone: %+v, want long/u1", res)
	}
	if r := f.record("std", "u2", `{"update_id":2}`); r.Outcome != hookwarden.Duplicate {
		t.Errorf("std/u2 without retention.claims: %+v, want kept", r)
	}
}
