package storetest

// Recording: the claim, batches, divergent duplicates and one-time tokens.

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// recordAll records the receipts concurrently, released together, and
// returns their outcomes in order.
func (f *fixture) recordAll(rs []*hookwarden.Receipt) []hookwarden.RecordResult {
	f.t.Helper()
	out := make([]hookwarden.RecordResult, len(rs))
	errs := make([]error, len(rs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() {
			<-start
			out[i], errs[i] = f.s.Record(f.ctx, r)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.t.Fatalf("concurrent records: %v", err)
	}
	return out
}

// testClaimOnce: 64 concurrent copies of one event id claim it once: one
// Accepted with its job, 63 Duplicates with none, every copy kept.
func testClaimOnce(t *testing.T, h Harness) {
	f := setup(t, h)
	rs := make([]*hookwarden.Receipt, 64)
	for i := range rs {
		rs[i] = f.receipt("std", "msg_same", `{"n":1}`, "std/app")
	}
	got := map[hookwarden.Outcome]int{}
	jobs := 0
	for _, res := range f.recordAll(rs) {
		got[res.Outcome]++
		if len(res.Events) != 1 {
			t.Fatalf("result %+v: want one event result", res)
		}
		if res.Events[0].Outcome != res.Outcome {
			t.Errorf("event outcome %s, request outcome %s", res.Events[0].Outcome, res.Outcome)
		}
		jobs += res.Events[0].Jobs
	}
	if got[hookwarden.Accepted] != 1 || got[hookwarden.Duplicate] != 63 || jobs != 1 {
		t.Fatalf("outcomes %v, jobs %d; want 1 accepted, 63 duplicates, 1 job", got, jobs)
	}
	if leased := f.lease("std/app", 100, time.Minute); len(leased) != 1 {
		t.Fatalf("leased %d jobs, want exactly 1", len(leased))
	}
	d := f.show("std", "msg_same")
	if d.Receipts != 64 || d.Jobs != 1 || d.Divergent {
		t.Errorf("event: receipts %d jobs %d divergent %v; want 64, 1, false", d.Receipts, d.Jobs, d.Divergent)
	}
	if s := f.stats([]string{"std"}, nil).Sources[0]; s.Accepted != 1 || s.Duplicates != 63 {
		t.Errorf("stats %+v, want 1 accepted and 63 duplicates", s)
	}
}

// testBatch: each element of a batch is claimed on its own; a batch of
// only claimed ids is a duplicate; each job carries its element's bytes.
func testBatch(t *testing.T, h Harness) {
	f := setup(t, h)
	res := f.mustRecord(f.batch("sg", "sg/app", element("a"), element("b")))
	if res.Outcome != hookwarden.Accepted || len(res.Events) != 2 ||
		res.Events[0] != (hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: 1}) ||
		res.Events[1] != (hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: 1}) {
		t.Fatalf("first batch: %+v", res)
	}
	res = f.mustRecord(f.batch("sg", "sg/app", element("b"), element("c")))
	if res.Outcome != hookwarden.Accepted || len(res.Events) != 2 ||
		res.Events[0] != (hookwarden.EventResult{Outcome: hookwarden.Duplicate}) ||
		res.Events[1] != (hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: 1}) {
		t.Fatalf("batch with one new event: %+v, want accepted with b duplicate and c accepted", res)
	}
	res = f.mustRecord(f.batch("sg", "sg/app", element("a"), element("c")))
	if res.Outcome != hookwarden.Duplicate || res.Events[0].Outcome != hookwarden.Duplicate ||
		res.Events[1].Outcome != hookwarden.Duplicate || res.Events[0].Divergent {
		t.Fatalf("batch of claimed events: %+v, want duplicate", res)
	}
	res = f.mustRecord(f.batch("sg", "sg/app", [2]string{"a", `{"sg_event_id":"a","changed":1}`}))
	if res.Outcome != hookwarden.Duplicate || !res.Events[0].Divergent {
		t.Fatalf("batch element with other bytes: %+v, want a divergent duplicate", res)
	}

	jobs := f.lease("sg/app", 10, time.Minute)
	if len(jobs) != 3 {
		t.Fatalf("leased %d jobs, want 3 (a, b, c)", len(jobs))
	}
	for _, j := range jobs {
		if want := element(j.EventID)[1]; string(j.Body) != want || j.ContentType != "application/json" ||
			j.Source != "sg" || j.EventType != "delivered" || j.Header.Get("Content-Type") != "application/json" {
			t.Errorf("job %s: body %q type %q content %q header %v; want its element %q as JSON, with the batch request's headers",
				j.EventID, j.Body, j.EventType, j.ContentType, j.Header, want)
		}
	}
	d := f.show("sg", "b")
	if string(d.Body) != element("b")[1] || len(d.ReceiptLog) != 2 || !d.ReceiptLog[0].Batch ||
		d.ReceiptLog[0].Kind != "accepted" || d.ReceiptLog[1].Kind != "duplicate" || string(d.ReceiptLog[0].Body) != "[batch]" {
		t.Errorf("event b: body %q receipts %+v; want its element, from two batches", d.Body, d.ReceiptLog)
	}
	if s := f.stats([]string{"sg"}, nil).Sources[0]; s.Accepted != 3 || s.Duplicates != 4 || s.Divergent != 1 {
		t.Errorf("stats %+v, want 3 accepted, 4 duplicates, 1 divergent", s)
	}
}

// testDivergent: the same id with other bytes is a duplicate flagged
// divergent, and its body is kept for a human; the first copy's is the
// event's.
func testDivergent(t *testing.T, h Harness) {
	f := setup(t, h)
	if res := f.record("std", "e1", `{"v":1}`, "std/app"); res.Outcome != hookwarden.Accepted {
		t.Fatalf("first: %+v", res)
	}
	if res := f.record("std", "e1", `{"v":1}`, "std/app"); res.Outcome != hookwarden.Duplicate || res.Events[0].Divergent {
		t.Fatalf("identical copy: %+v, want a duplicate, not divergent", res)
	}
	res := f.record("std", "e1", `{"v":2}`, "std/app")
	if res.Outcome != hookwarden.Duplicate || !res.Events[0].Divergent || res.Events[0].Jobs != 0 {
		t.Fatalf("other bytes: %+v, want a divergent duplicate without jobs", res)
	}
	// The same id at another source is another event.
	if res := f.record("other", "e1", `{"v":2}`, "other/app"); res.Outcome != hookwarden.Accepted {
		t.Fatalf("same id, other source: %+v, want accepted", res)
	}
	d := f.show("std", "e1")
	if string(d.Body) != `{"v":1}` || !d.Divergent || d.Receipts != 3 || d.Jobs != 1 {
		t.Fatalf("event: body %q divergent %v receipts %d jobs %d; want the first copy's body, divergent, 3, 1",
			d.Body, d.Divergent, d.Receipts, d.Jobs)
	}
	kinds := map[string]int{}
	for _, r := range d.ReceiptLog {
		kinds[r.Kind]++
		if r.Kind == "divergent" && string(r.Body) != `{"v":2}` {
			t.Errorf("divergent receipt body %q, want it kept", r.Body)
		}
		if r.Kind == "divergent" && r.Header.Get("Webhook-Id") != "e1" {
			t.Errorf("divergent receipt headers %v, want them kept", r.Header)
		}
	}
	if kinds["accepted"] != 1 || kinds["duplicate"] != 1 || kinds["divergent"] != 1 {
		t.Errorf("receipt kinds %v, want one of each", kinds)
	}
	if s := f.stats([]string{"std"}, nil).Sources[0]; s.Accepted != 1 || s.Duplicates != 2 || s.Divergent != 1 {
		t.Errorf("stats %+v, want 1 accepted, 2 duplicates, 1 divergent", s)
	}
}

// testSeenTokens: a one-time token (Mailgun) with another body is refused
// as Replayed and nothing is kept; the same body again is a plain
// duplicate; tokens go once they expire.
func testSeenTokens(t *testing.T, h Harness) {
	f := setup(t, h)
	tok := func(id, body, token string) *hookwarden.Receipt {
		r := f.receipt("mg", id, body, "mg/app")
		r.Token = &hookwarden.Token{SHA256: sha256.Sum256([]byte(token)), Expires: f.clock.Now().Add(10 * time.Minute)}
		return r
	}
	if res := f.mustRecord(tok("e-1", `{"a":1}`, "tok")); res.Outcome != hookwarden.Accepted {
		t.Fatalf("first: %+v", res)
	}
	// The read the receiver makes before extraction and filters
	// (receiver.TokenReader): the recorded body's hash, until expiry.
	tr, ok := f.s.(interface {
		SeenToken(ctx context.Context, source string, token [32]byte, at time.Time) ([32]byte, bool, error)
	})
	if !ok {
		t.Fatal("the store has no SeenToken (receiver.TokenReader)")
	}
	seen := func(token string, at time.Time) ([32]byte, bool) {
		t.Helper()
		sum, found, err := tr.SeenToken(f.ctx, "mg", sha256.Sum256([]byte(token)), at)
		if err != nil {
			t.Fatal(err)
		}
		return sum, found
	}
	if sum, found := seen("tok", f.clock.Now()); !found || sum != sha256.Sum256([]byte(`{"a":1}`)) {
		t.Fatalf("SeenToken(tok): %x %v, want the first body's hash", sum, found)
	}
	if _, found := seen("other", f.clock.Now()); found {
		t.Fatal("SeenToken(other): found a token never recorded")
	}
	if _, found := seen("tok", f.clock.Now().Add(10*time.Minute)); found {
		t.Fatal("SeenToken(tok) at its expiry: found, want expired")
	}
	before := f.statsText()
	// The signature block pasted onto forged event data.
	if res := f.mustRecord(tok("e-2", `{"a":2}`, "tok")); res.Outcome != hookwarden.Replayed {
		t.Fatalf("same token, other body: %+v, want replayed", res)
	}
	if _, err := f.s.ShowEvent(f.ctx, "mg", "e-2"); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("forged event: %v, want it not claimed (ErrNotFound)", err)
	}
	if got := f.statsText(); got != before {
		t.Errorf("a refused request changed the counts:\n%s\n%s", before, got)
	}
	if res := f.mustRecord(tok("e-1", `{"a":1}`, "tok")); res.Outcome != hookwarden.Duplicate {
		t.Fatalf("exact resend: %+v, want duplicate", res)
	}
	// A held request's token is kept too.
	if res := f.mustRecord(tok("", `{"b":1}`, "tok-q")); res.Outcome != hookwarden.Quarantined {
		t.Fatalf("token without event id: %+v, want quarantined", res)
	}
	if res := f.mustRecord(tok("e-3", `{"b":2}`, "tok-q")); res.Outcome != hookwarden.Replayed {
		t.Fatalf("token of a held request with another body: %+v, want replayed", res)
	}
	if leased := f.lease("mg/app", 10, time.Minute); len(leased) != 1 || leased[0].EventID != "e-1" {
		t.Fatalf("leased %+v, want only e-1's job", leased)
	}

	if r := f.prune(PruneOptions{}); r.TokensDeleted != 0 {
		t.Fatalf("prune before expiry deleted %d tokens", r.TokensDeleted)
	}
	f.clock.Add(11 * time.Minute)
	if r := f.prune(PruneOptions{}); r.TokensDeleted != 2 {
		t.Fatalf("prune after expiry deleted %d tokens, want 2", r.TokensDeleted)
	}
}
