package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// receipt is one request of source carrying event id (none: no event id)
// with body, for the destinations given.
func receipt(source, id, body string, dests ...string) *hookwarden.Receipt {
	sum := sha256.Sum256([]byte(body))
	r := &hookwarden.Receipt{
		Source: source, Header: http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id}},
		Body: []byte(body), BodySHA256: sum, RemoteAddr: "127.0.0.1:5555", ReceivedAt: t0,
	}
	if id != "" {
		r.Events = []hookwarden.Event{{ID: id, Type: "t.created", BodySHA256: sum, Destinations: dests}}
	} else {
		r.QuarantineReason = "no event id at json:id"
	}
	return r
}

func keyed(id, body string) *hookwarden.Receipt {
	r := receipt("gh", id, body, "gh/app")
	r.BodyReplayCheck = true
	return r
}

func batch(elements ...[2]string) *hookwarden.Receipt {
	r := receipt("sg", "", "[batch]")
	r.QuarantineReason = ""
	for _, el := range elements {
		b := []byte(el[1])
		r.Events = append(r.Events, hookwarden.Event{ID: el[0], Type: "delivered", Body: b, BodySHA256: sha256.Sum256(b),
			Destinations: []string{"sg/app"}})
	}
	return r
}

func element(id string) [2]string { return [2]string{id, fmt.Sprintf(`{"sg_event_id":%q}`, id)} }

// fixture is a fresh store and its test's helpers.
type fixture struct {
	t *testing.T
	s *Store
}

func setup(t *testing.T) *fixture {
	t.Parallel()
	return &fixture{t: t, s: open(t, pgtest.Database(t), Options{Now: func() time.Time { return t0 }})}
}

func (f *fixture) record(r *hookwarden.Receipt) hookwarden.RecordResult {
	f.t.Helper()
	res, err := f.s.Record(context.Background(), r)
	if err != nil {
		f.t.Fatalf("record %s: %v", r.Source, err)
	}
	return res
}

// recordAll records the receipts concurrently, released together.
func (f *fixture) recordAll(rs []*hookwarden.Receipt) []hookwarden.RecordResult {
	f.t.Helper()
	out := make([]hookwarden.RecordResult, len(rs))
	errs := make([]error, len(rs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() {
			<-start
			out[i], errs[i] = f.s.Record(context.Background(), r)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.t.Fatalf("concurrent records: %v", err)
	}
	return out
}

// count runs a counting query.
func (f *fixture) count(q string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.s.Pool().QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestClaimOnceAmong64Doubles: 64 concurrent copies of one event claim it
// once: 1 accepted with its job, 63 duplicates, every copy's receipt kept.
func TestClaimOnceAmong64Doubles(t *testing.T) {
	f := setup(t)
	rs := make([]*hookwarden.Receipt, 64)
	for i := range rs {
		rs[i] = receipt("std", "msg_same", `{"n":1}`, "std/app")
	}
	got := map[hookwarden.Outcome]int{}
	jobs := 0
	ids := map[int64]bool{}
	for _, res := range f.recordAll(rs) {
		got[res.Outcome]++
		if len(res.Events) != 1 || res.Events[0].Outcome != res.Outcome || res.Events[0].Divergent {
			t.Fatalf("result %+v", res)
		}
		jobs += res.Events[0].Jobs
		ids[res.ReceiptID] = true
	}
	if got[hookwarden.Accepted] != 1 || got[hookwarden.Duplicate] != 63 || jobs != 1 || len(ids) != 64 {
		t.Fatalf("outcomes %v, jobs %d, receipts %d; want 1 accepted, 63 duplicates, 1 job, 64 receipts", got, jobs, len(ids))
	}
	if n := f.count(`SELECT count(*) FROM jobs WHERE state = 'pending' AND destination = 'std/app' AND next_at = $1`, t0); n != 1 {
		t.Fatalf("%d jobs due at the store's clock, want 1", n)
	}
	if n := f.count(`SELECT count(*) FROM events`); n != 1 {
		t.Fatalf("%d claims, want 1", n)
	}
	// The duplicates are byte-identical: their bodies are not kept again.
	if n := f.count(`SELECT count(*) FROM receipts WHERE kind = 'duplicate' AND body IS NULL`); n != 63 {
		t.Fatalf("%d duplicate receipts without a body, want 63", n)
	}
	if n := f.count(`SELECT count(*) FROM receipts WHERE kind = 'accepted' AND body = $1 AND headers LIKE '%Webhook-Id: msg_same%'`,
		[]byte(`{"n":1}`)); n != 1 {
		t.Fatalf("%d accepted receipts with the body and headers, want 1", n)
	}
}

// TestBatchEvents: each element of a batch is claimed on its own, with its
// own bytes; a batch of claimed ids is a duplicate; a repeated id in one
// batch is linked once.
func TestBatchEvents(t *testing.T) {
	f := setup(t)
	acc := hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: 1}
	dup := hookwarden.EventResult{Outcome: hookwarden.Duplicate}
	res := f.record(batch(element("a"), element("b")))
	if res.Outcome != hookwarden.Accepted || len(res.Events) != 2 || res.Events[0] != acc || res.Events[1] != acc {
		t.Fatalf("first batch: %+v", res)
	}
	res = f.record(batch(element("b"), element("c"), element("c")))
	if res.Outcome != hookwarden.Accepted || res.Events[0] != dup || res.Events[1] != acc || res.Events[2] != dup {
		t.Fatalf("batch b, c, c: %+v, want duplicate, accepted, duplicate", res)
	}
	res = f.record(batch(element("a"), element("c")))
	if res.Outcome != hookwarden.Duplicate || res.Events[0] != dup || res.Events[1] != dup {
		t.Fatalf("batch of claimed events: %+v, want duplicate", res)
	}
	res = f.record(batch([2]string{"a", `{"sg_event_id":"a","changed":1}`}))
	if res.Outcome != hookwarden.Duplicate || !res.Events[0].Divergent {
		t.Fatalf("batch element with other bytes: %+v, want a divergent duplicate", res)
	}
	if n := f.count(`SELECT count(*) FROM jobs`); n != 3 {
		t.Fatalf("%d jobs, want 3", n)
	}
	for _, id := range []string{"a", "b", "c"} {
		if n := f.count(`SELECT count(*) FROM events WHERE source = 'sg' AND event_id = $1 AND body = $2`, id, []byte(element(id)[1])); n != 1 {
			t.Errorf("event %s: its element's bytes not kept", id)
		}
	}
	if n := f.count(`SELECT count(*) FROM receipts WHERE kind = 'batch' AND event_ref IS NULL AND body = '[batch]'`); n != 4 {
		t.Fatalf("%d batch receipts, want 4", n)
	}
	if n := f.count(`SELECT count(*) FROM receipt_events l JOIN events e ON e.id = l.event_ref WHERE e.event_id = 'c'`); n != 2 {
		t.Fatalf("c linked %d times, want 2 (once per batch)", n)
	}
	if n := f.count(`SELECT count(*) FROM receipt_events WHERE kind = 'divergent'`); n != 1 {
		t.Fatalf("%d divergent links, want 1", n)
	}
}

// TestDivergentDuplicates: the same id with other bytes is a duplicate
// flagged divergent with its body kept; the claim keeps the first hash.
func TestDivergentDuplicates(t *testing.T) {
	f := setup(t)
	if res := f.record(receipt("std", "e1", `{"v":1}`, "std/app")); res.Outcome != hookwarden.Accepted {
		t.Fatalf("first: %+v", res)
	}
	if res := f.record(receipt("std", "e1", `{"v":1}`, "std/app")); res.Outcome != hookwarden.Duplicate || res.Events[0].Divergent {
		t.Fatalf("identical copy: %+v", res)
	}
	res := f.record(receipt("std", "e1", `{"v":2}`, "std/app"))
	if res.Outcome != hookwarden.Duplicate || !res.Events[0].Divergent || res.Events[0].Jobs != 0 {
		t.Fatalf("other bytes: %+v, want a divergent duplicate", res)
	}
	if res := f.record(receipt("other", "e1", `{"v":2}`, "other/app")); res.Outcome != hookwarden.Accepted {
		t.Fatalf("same id, other source: %+v", res)
	}
	sum := sha256.Sum256([]byte(`{"v":2}`))
	if n := f.count(`SELECT count(*) FROM receipts WHERE kind = 'divergent' AND body = $1 AND body_sha256 = $2`, []byte(`{"v":2}`), sum[:]); n != 1 {
		t.Fatal("divergent receipt's body and hash not kept")
	}
	first := sha256.Sum256([]byte(`{"v":1}`))
	if n := f.count(`SELECT count(*) FROM events WHERE source = 'std' AND body_sha256 = $1`, first[:]); n != 1 {
		t.Fatal("the claim does not keep the first copy's hash")
	}
	// A claim whose hash retention emptied cannot tell: a duplicate, body kept.
	if _, err := f.s.Pool().Exec(context.Background(), `UPDATE events SET body_sha256 = '' WHERE source = 'std'`); err != nil {
		t.Fatal(err)
	}
	if res := f.record(receipt("std", "e1", `{"v":3}`, "std/app")); res.Outcome != hookwarden.Duplicate || res.Events[0].Divergent {
		t.Fatalf("copy of a pruned claim: %+v, want a plain duplicate", res)
	}
	if n := f.count(`SELECT count(*) FROM receipts WHERE kind = 'duplicate' AND body = $1`, []byte(`{"v":3}`)); n != 1 {
		t.Fatal("a duplicate of a pruned claim lost its body")
	}
}

// TestQuarantineRepeats: a request without an event id is held once per
// body, repeats counted on the first; a released body is held anew.
func TestQuarantineRepeats(t *testing.T) {
	f := setup(t)
	var first int64
	for i := range 5 {
		res := f.record(receipt("std", "", `{"no":"id"}`))
		if res.Outcome != hookwarden.Quarantined || res.QuarantineKind != hookwarden.QuarantineNoEventID || res.Events != nil {
			t.Fatalf("copy %d: %+v", i, res)
		}
		if i == 0 {
			first = res.ReceiptID
		} else if res.ReceiptID != first {
			t.Fatalf("copy %d held as %d, want %d", i, res.ReceiptID, first)
		}
	}
	if other := f.record(receipt("std", "", `{"other":1}`)); other.ReceiptID == first {
		t.Fatal("another body held on the first's row")
	}
	if n := f.count(`SELECT count FROM quarantine WHERE receipt_id = $1 AND kind = 'no_event_id' AND reason = 'no event id at json:id'`, first); n != 5 {
		t.Fatalf("count %d, want 5", n)
	}
	if n := f.count(`SELECT count(*) FROM receipts WHERE kind = 'quarantined'`); n != 2 {
		t.Fatalf("%d held receipts, want 2", n)
	}
	// Concurrent copies of a new body: one row, every copy counted.
	rs := make([]*hookwarden.Receipt, 32)
	for i := range rs {
		rs[i] = receipt("std", "", `{"burst":1}`)
	}
	ids := map[int64]bool{}
	for _, res := range f.recordAll(rs) {
		ids[res.ReceiptID] = true
	}
	if len(ids) != 1 || f.count(`SELECT count FROM quarantine WHERE body_sha256 = $1`, rs[0].BodySHA256[:]) != 32 {
		t.Fatalf("32 concurrent copies held as %d receipts; want one, counted 32", len(ids))
	}
	// Released (as an operator's release marks it), the body comes again.
	if _, err := f.s.Pool().Exec(context.Background(), `UPDATE quarantine SET released_at = now(), released_event_id = 'x' WHERE receipt_id = $1`, first); err != nil {
		t.Fatal(err)
	}
	again := f.record(receipt("std", "", `{"no":"id"}`))
	if again.Outcome != hookwarden.Quarantined || again.ReceiptID == first {
		t.Fatalf("released body again: %+v, want held anew", again)
	}
	if n := f.count(`SELECT count(*) FROM quarantine WHERE receipt_id = $1 AND count = 1 AND released_at IS NULL`, again.ReceiptID); n != 1 {
		t.Fatal("released row not taken over")
	}
	if n := f.count(`SELECT count(*) FROM receipts WHERE id = $1`, first); n != 0 {
		t.Fatal("the released request's old held receipt was kept")
	}
}

// TestBodyReplayed: a signed body already claimed under another id is held
// (body_replayed); the same id again is the provider's retry.
func TestBodyReplayed(t *testing.T) {
	f := setup(t)
	body := `{"zen":"Keep it logically awesome."}`
	if res := f.record(keyed("d-1", body)); res.Outcome != hookwarden.Accepted {
		t.Fatalf("first: %+v", res)
	}
	res := f.record(keyed("d-2", body))
	if res.Outcome != hookwarden.Quarantined || res.QuarantineKind != hookwarden.QuarantineBodyReplayed || res.Events != nil {
		t.Fatalf("same body, fresh id: %+v", res)
	}
	if r := f.record(keyed("d-1", body)); r.Outcome != hookwarden.Duplicate {
		t.Fatalf("same id, same body: %+v", r)
	}
	if r := f.record(keyed("d-3", body)); r.Outcome != hookwarden.Quarantined || r.ReceiptID != res.ReceiptID {
		t.Fatalf("third copy: %+v, want a repeat of %d", r, res.ReceiptID)
	}
	if n := f.count(`SELECT count(*) FROM quarantine WHERE kind = 'body_replayed' AND candidate_event_id = 'd-2'
		AND original_event_id = 'd-1' AND count = 2 AND reason = 'signed body already claimed as event d-1'`); n != 1 {
		t.Fatal("held row is not body_replayed d-2 of d-1 with 2 copies")
	}
	if n := f.count(`SELECT count(*) FROM events WHERE event_id IN ('d-2', 'd-3')`); n != 0 {
		t.Fatal("a replayed id was claimed")
	}
	if r := f.record(receipt("gh", "d-4", body, "gh/app")); r.Outcome != hookwarden.Accepted {
		t.Fatalf("without the check: %+v, want accepted", r)
	}
	if n := f.count(`SELECT count(*) FROM jobs`); n != 2 {
		t.Fatalf("%d jobs, want 2 (d-1, d-4)", n)
	}
}

// TestConcurrentBodyReplays: 64 concurrent copies of one body under 64 ids:
// exactly one accepted, the others held on one row.
func TestConcurrentBodyReplays(t *testing.T) {
	f := setup(t)
	rs := make([]*hookwarden.Receipt, 64)
	for i := range rs {
		rs[i] = keyed(fmt.Sprint("d-", i), `{"action":"released"}`)
	}
	got := map[hookwarden.Outcome]int{}
	for _, res := range f.recordAll(rs) {
		got[res.Outcome]++
	}
	if got[hookwarden.Accepted] != 1 || got[hookwarden.Quarantined] != 63 {
		t.Fatalf("outcomes %v, want 1 accepted and 63 quarantined", got)
	}
	if n := f.count(`SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	if n := f.count(`SELECT count FROM quarantine WHERE source = 'gh'`); n != 63 {
		t.Fatalf("held count %d, want 63 copies on one row", n)
	}
}

// TestSeenTokens: a one-time token with another body is Replayed and
// nothing is kept; with the same body it is a duplicate; an expired token
// is taken over.
func TestSeenTokens(t *testing.T) {
	f := setup(t)
	tok := func(id, body, token string, at time.Time) *hookwarden.Receipt {
		r := receipt("mg", id, body, "mg/app")
		r.ReceivedAt = at
		r.Token = &hookwarden.Token{SHA256: sha256.Sum256([]byte(token)), Expires: at.Add(10 * time.Minute)}
		return r
	}
	if res := f.record(tok("e-1", `{"a":1}`, "tok", t0)); res.Outcome != hookwarden.Accepted {
		t.Fatalf("first: %+v", res)
	}
	rows := func() int {
		return f.count(`SELECT (SELECT count(*) FROM receipts) + (SELECT count(*) FROM events) + (SELECT count(*) FROM jobs) +
			(SELECT count(*) FROM quarantine) + (SELECT count(*) FROM seen_tokens)`)
	}
	before := rows()
	if res := f.record(tok("e-2", `{"a":2}`, "tok", t0)); res.Outcome != hookwarden.Replayed || res.ReceiptID != 0 {
		t.Fatalf("same token, other body: %+v, want replayed", res)
	}
	if rows() != before {
		t.Fatal("a replayed request wrote rows")
	}
	if res := f.record(tok("e-1", `{"a":1}`, "tok", t0)); res.Outcome != hookwarden.Duplicate {
		t.Fatalf("exact resend: %+v, want duplicate", res)
	}
	if res := f.record(tok("", `{"b":1}`, "tok-q", t0)); res.Outcome != hookwarden.Quarantined {
		t.Fatalf("token without event id: %+v", res)
	}
	if res := f.record(tok("e-3", `{"b":2}`, "tok-q", t0)); res.Outcome != hookwarden.Replayed {
		t.Fatalf("held request's token, other body: %+v, want replayed", res)
	}
	// Concurrent: one token, 16 bodies: one recorded, the rest replayed.
	rs := make([]*hookwarden.Receipt, 16)
	for i := range rs {
		rs[i] = tok(fmt.Sprint("c-", i), fmt.Sprintf(`{"c":%d}`, i), "tok-c", t0)
	}
	got := map[hookwarden.Outcome]int{}
	for _, res := range f.recordAll(rs) {
		got[res.Outcome]++
	}
	if got[hookwarden.Accepted] != 1 || got[hookwarden.Replayed] != 15 {
		t.Fatalf("one token, 16 bodies at once: %v", got)
	}
	// Expired (not pruned yet): another body takes it over.
	if res := f.record(tok("e-4", `{"a":4}`, "tok", t0.Add(11*time.Minute))); res.Outcome != hookwarden.Accepted {
		t.Fatalf("expired token, other body: %+v, want accepted", res)
	}
}

// TestUnstorableText: an event id PostgreSQL's text cannot hold (a NUL
// byte, bytes that are not UTF-8) is held in quarantine, not a 503 for ever.
func TestUnstorableText(t *testing.T) {
	f := setup(t)
	for _, id := range []string{"a\x00b", "caf\xe9"} {
		r := receipt("std", id, `{"id":1}`+id, "std/app")
		r.Header.Set("X-Latin", "caf\xe9")
		res := f.record(r)
		if res.Outcome != hookwarden.Quarantined || res.QuarantineKind != hookwarden.QuarantineNoEventID {
			t.Fatalf("id %q: %+v, want quarantined", id, res)
		}
		if n := f.count(`SELECT count(*) FROM receipts WHERE id = $1 AND body = $2`, res.ReceiptID, r.Body); n != 1 {
			t.Fatalf("id %q: body not kept", id)
		}
	}
}

// TestCrossedBatches: batches carrying the same ids in opposite orders at
// once claim them in one order (in batch order they would deadlock in the
// server, each abort costing deadlock_timeout), so each id is claimed once
// and no request fails, however loaded the machine.
func TestCrossedBatches(t *testing.T) {
	f := setup(t)
	var rs []*hookwarden.Receipt
	for i := range 16 {
		x, y := element(fmt.Sprint("x", i)), element(fmt.Sprint("y", i))
		rs = append(rs, batch(x, y), batch(y, x))
	}
	accepted := 0
	for _, res := range f.recordAll(rs) {
		for _, e := range res.Events {
			if e.Outcome == hookwarden.Accepted {
				accepted++
			}
		}
	}
	if accepted != 32 || f.count(`SELECT count(*) FROM jobs`) != 32 {
		t.Fatalf("%d accepted, %d jobs; want 32 (each id once)", accepted, f.count(`SELECT count(*) FROM jobs`))
	}
}

// TestBatchOrderKept: the claims of a batch go in id order, but its jobs
// are created, and so leased and delivered, in the batch's order.
func TestBatchOrderKept(t *testing.T) {
	f := setup(t)
	f.record(batch(element("c"), element("a"), element("b"), element("a")))
	jobs, err := f.s.Lease(context.Background(), "sg/app", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.EventID)
	}
	if fmt.Sprint(ids) != "[c a b]" {
		t.Fatalf("leased %v, want the batch's order [c a b]", ids)
	}
}

// TestDueByDatabaseClock: without a test clock, a new job is due by the
// database's clock, whatever the instance's; the receipt keeps its own time.
func TestDueByDatabaseClock(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	f := &fixture{t: t, s: s}
	f.record(receipt("std", "e1", `{}`, "std/app")) // received at t0, months off
	if n := f.count(`SELECT count(*) FROM jobs WHERE abs(extract(epoch FROM next_at - now())) < 600
		AND created_at = next_at`); n != 1 {
		t.Fatal("the job is not due by the database's clock")
	}
	if n := f.count(`SELECT count(*) FROM receipts WHERE received_at = $1`, t0); n != 1 {
		t.Fatal("the receipt lost its own time")
	}
}
