package sqlitestore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// keyed is a receipt of a source whose signature does not cover the id.
func keyed(id, body string, dests ...string) *hookwarden.Receipt {
	r := receipt("gh", id, body, dests...)
	r.BodyReplayCheck = true
	return r
}

func mustRecord(t *testing.T, s *Store, r *hookwarden.Receipt) hookwarden.RecordResult {
	t.Helper()
	res, err := s.Record(context.Background(), r)
	if err != nil {
		t.Fatalf("record %s: %v", r.Source, err)
	}
	return res
}

func TestBodyReplayedUnderNewIDIsQuarantined(t *testing.T) {
	t.Parallel()
	s := MustOpen(t, Options{})
	body := `{"zen":"Keep it logically awesome."}`
	if res := mustRecord(t, s, keyed("d-1", body, "gh/app")); res.Outcome != hookwarden.Accepted {
		t.Fatalf("first: %+v", res)
	}
	res := mustRecord(t, s, keyed("d-2", body, "gh/app"))
	if res.Outcome != hookwarden.Quarantined || res.QuarantineKind != hookwarden.QuarantineBodyReplayed || len(res.Events) != 0 {
		t.Fatalf("same body, new id: %+v, want quarantined body_replayed", res)
	}
	// The provider retrying the first delivery: a plain duplicate.
	if res := mustRecord(t, s, keyed("d-1", body, "gh/app")); res.Outcome != hookwarden.Duplicate {
		t.Fatalf("same id, same body: %+v, want duplicate", res)
	}
	// A claimed id with a replayed body stays a duplicate (nothing new goes out).
	if res := mustRecord(t, s, keyed("d-3", `{"other":1}`, "gh/app")); res.Outcome != hookwarden.Accepted {
		t.Fatalf("other body: %+v", res)
	}
	if res := mustRecord(t, s, keyed("d-3", body, "gh/app")); res.Outcome != hookwarden.Duplicate {
		t.Fatalf("claimed id, replayed body: %+v, want duplicate", res)
	}
	if n := count(t, s, `SELECT count(*) FROM jobs`); n != 2 {
		t.Fatalf("jobs: %d, want 2 (d-1, d-3)", n)
	}
	// A third copy under yet another id counts as a repeat of the held one.
	if res := mustRecord(t, s, keyed("d-4", body, "gh/app")); res.Outcome != hookwarden.Quarantined {
		t.Fatalf("third copy: %+v", res)
	}
	items, _, err := s.ListQuarantine(context.Background(), hookwarden.QuarantineFilter{})
	if err != nil || len(items) != 1 {
		t.Fatalf("list: %v %+v", err, items)
	}
	h := items[0]
	if h.Source != "gh" || h.Reason != hookwarden.QuarantineBodyReplayed || h.CandidateEventID != "d-2" ||
		h.OriginalEventID != "d-1" || h.Repeats != 1 || h.ReleasedAt != nil || h.ReceiptID != res.ReceiptID {
		t.Fatalf("held: %+v", h)
	}

	// Without the check (the signature covers the id) the same body under
	// another id is a new event.
	plain := receipt("gh", "d-5", body, "gh/app")
	if res := mustRecord(t, s, plain); res.Outcome != hookwarden.Accepted {
		t.Fatalf("no check: %+v, want accepted", res)
	}
}

// Concurrent copies go through the writer's batches; the unique key lets
// exactly one through whatever the interleaving.
func TestConcurrentBodyReplaysClaimOnce(t *testing.T) {
	t.Parallel()
	s := MustOpen(t, Options{})
	body := `{"action":"released"}`
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[hookwarden.Outcome]int{}
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Record(context.Background(), keyed(fmt.Sprintf("d-%d", i), body, "gh/app"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got[res.Outcome]++
			mu.Unlock()
		}()
		// Plain receipts of other sources share the batches (recordMany).
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Record(context.Background(), receipt("std", fmt.Sprintf("m-%d", i), body, "std/app")); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got[hookwarden.Accepted] != 1 || got[hookwarden.Quarantined] != 63 {
		t.Fatalf("outcomes %v, want 1 accepted and 63 quarantined", got)
	}
	if n := count(t, s, `SELECT count(*) FROM jobs WHERE destination = 'gh/app'`); n != 1 {
		t.Fatalf("gh jobs: %d, want 1", n)
	}
	if n := count(t, s, `SELECT count(*) FROM jobs WHERE destination = 'std/app'`); n != 64 {
		t.Fatalf("std jobs: %d, want 64", n)
	}
	if n := count(t, s, `SELECT count FROM quarantine`); n != 63 {
		t.Fatalf("quarantine count: %d, want 63", n)
	}
}

func tokenReceipt(id, body, token string, at time.Time) *hookwarden.Receipt {
	r := receipt("mg", id, body, "mg/app")
	r.ReceivedAt = at
	r.Token = &hookwarden.Token{SHA256: sha256.Sum256([]byte(token)), Expires: at.Add(10 * time.Minute)}
	return r
}

func TestSeenTokens(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := now
	var mu sync.Mutex
	s := MustOpen(t, Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }})
	if res := mustRecord(t, s, tokenReceipt("e-1", `{"a":1}`, "tok", now)); res.Outcome != hookwarden.Accepted {
		t.Fatalf("first: %+v", res)
	}
	receipts := count(t, s, `SELECT count(*) FROM receipts`)
	// The signature block pasted onto forged event data: refused, nothing kept.
	res := mustRecord(t, s, tokenReceipt("e-2", `{"a":2}`, "tok", now))
	if res.Outcome != hookwarden.Replayed {
		t.Fatalf("same token, other body: %+v, want replayed", res)
	}
	if n := count(t, s, `SELECT count(*) FROM receipts`); n != receipts {
		t.Fatalf("receipts %d after a refused replay, want %d", n, receipts)
	}
	if n := count(t, s, `SELECT count(*) FROM events WHERE event_id = 'e-2'`); n != 0 {
		t.Fatal("the forged event was claimed")
	}
	// An exact resend passes the token and is a duplicate.
	if res := mustRecord(t, s, tokenReceipt("e-1", `{"a":1}`, "tok", now)); res.Outcome != hookwarden.Duplicate {
		t.Fatalf("exact resend: %+v, want duplicate", res)
	}
	// The token of a quarantined request (no id) is kept too.
	q := tokenReceipt("", `{"b":1}`, "tok-q", now)
	if res := mustRecord(t, s, q); res.Outcome != hookwarden.Quarantined {
		t.Fatalf("no id: %+v", res)
	}
	if res := mustRecord(t, s, tokenReceipt("e-3", `{"b":2}`, "tok-q", now)); res.Outcome != hookwarden.Replayed {
		t.Fatalf("token of a quarantined request reused: %+v", res)
	}

	// Pruning keeps unexpired tokens and removes expired ones.
	if r, err := s.Prune(context.Background(), hookwarden.PruneOptions{}); err != nil || r.TokensDeleted != 0 {
		t.Fatalf("prune before expiry: %+v %v", r, err)
	}
	mu.Lock()
	clock = now.Add(11 * time.Minute)
	mu.Unlock()
	if r, err := s.Prune(context.Background(), hookwarden.PruneOptions{}); err != nil || r.TokensDeleted != 2 {
		t.Fatalf("prune after expiry: %+v %v, want 2 tokens deleted", r, err)
	}
	if n := count(t, s, `SELECT count(*) FROM seen_tokens`); n != 0 {
		t.Fatalf("seen tokens left: %d", n)
	}
}

func TestReleaseAndDrop(t *testing.T) {
	t.Parallel()
	s := MustOpen(t, Options{})
	ctx := context.Background()
	body := `{"ping":true}`
	mustRecord(t, s, keyed("d-1", body, "gh/app"))
	replay := mustRecord(t, s, keyed("d-2", body, "gh/app"))
	noID := mustRecord(t, s, receipt("gh", "", `{"no":"id"}`))
	if noID.QuarantineKind != hookwarden.QuarantineNoEventID {
		t.Fatalf("no id: %+v", noID)
	}

	// The candidate d-1 is claimed: refused, still held.
	_, err := s.ReleaseQuarantined(ctx, hookwarden.Release{ReceiptID: replay.ReceiptID, EventID: "d-1", Destinations: []string{"gh/app"}})
	if !errors.Is(err, hookwarden.ErrAlreadyClaimed) {
		t.Fatalf("release under a claimed id: %v, want ErrAlreadyClaimed", err)
	}
	if h, err := s.ShowQuarantined(ctx, replay.ReceiptID); err != nil || h.ReleasedAt != nil {
		t.Fatalf("after a refused release: %+v %v", h, err)
	}
	// Released under its candidate id, skipping the body check.
	rel, err := s.ReleaseQuarantined(ctx, hookwarden.Release{ReceiptID: replay.ReceiptID, EventType: "ping", Destinations: []string{"gh/app"}})
	if err != nil || rel.EventID != "d-2" || rel.Jobs != 1 {
		t.Fatalf("release: %+v %v", rel, err)
	}
	d, err := s.ShowEvent(ctx, "gh", "d-2")
	if err != nil || string(d.Body) != body || d.Pending != 1 || d.Type != "ping" {
		t.Fatalf("released event: %+v %v", d, err)
	}
	if _, err := s.ReleaseQuarantined(ctx, hookwarden.Release{ReceiptID: replay.ReceiptID}); !errors.Is(err, hookwarden.ErrReleased) {
		t.Fatalf("second release: %v, want ErrReleased", err)
	}
	items, _, _ := s.ListEvents(ctx, hookwarden.EventFilter{Status: hookwarden.StatusQuarantined})
	if len(items) != 1 || items[0].Receipt != noID.ReceiptID {
		t.Fatalf("events list --status quarantined after release: %+v", items)
	}
	// A released body that comes again is held anew.
	again := mustRecord(t, s, keyed("d-9", body, "gh/app"))
	if again.Outcome != hookwarden.Quarantined || again.ReceiptID == replay.ReceiptID {
		t.Fatalf("released body again: %+v", again)
	}
	if h, err := s.ShowQuarantined(ctx, again.ReceiptID); err != nil || h.CandidateEventID != "d-9" || h.ReleasedAt != nil {
		t.Fatalf("held anew: %+v %v", h, err)
	}

	// No id: --event-id is needed.
	if _, err := s.ReleaseQuarantined(ctx, hookwarden.Release{ReceiptID: noID.ReceiptID}); err == nil {
		t.Fatal("release without an id succeeded")
	}
	if rel, err := s.ReleaseQuarantined(ctx, hookwarden.Release{ReceiptID: noID.ReceiptID, EventID: "manual-1"}); err != nil || rel.Jobs != 0 {
		t.Fatalf("release with an id: %+v %v", rel, err)
	}

	if err := s.DropQuarantined(ctx, again.ReceiptID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ShowQuarantined(ctx, again.ReceiptID); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("after drop: %v", err)
	}
	if err := s.DropQuarantined(ctx, again.ReceiptID, nil); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("second drop: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM receipts WHERE id = ?`, again.ReceiptID); n != 0 {
		t.Fatal("dropped receipt still stored")
	}
}

func TestRetentionOfQuarantineAndBodyKeys(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	s := MustOpen(t, Options{Now: now})
	ctx := context.Background()
	old := now().Add(-40 * 24 * time.Hour)
	at := func(r *hookwarden.Receipt, t time.Time) *hookwarden.Receipt { r.ReceivedAt = t; return r }

	mustRecord(t, s, at(keyed("d-1", `{"n":1}`), old))
	heldOld := mustRecord(t, s, at(keyed("d-2", `{"n":1}`), old))
	heldNew := mustRecord(t, s, keyed("d-3", `{"n":1}`))
	if heldOld.ReceiptID != heldNew.ReceiptID {
		t.Fatalf("repeat not counted on the held row")
	}
	noID := mustRecord(t, s, at(receipt("gh", "", `{"x":1}`), old))

	res, err := s.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Quarantine: 30 * 24 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	// The replayed body's last copy is recent: it stays; the old no-id one goes.
	if res.QuarantineDeleted != 1 {
		t.Fatalf("prune: %+v, want 1 quarantined request deleted", res)
	}
	if _, err := s.ShowQuarantined(ctx, noID.ReceiptID); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("old held request: %v, want gone", err)
	}
	if n := count(t, s, `SELECT count(*) FROM receipts WHERE id = ?`, noID.ReceiptID); n != 0 {
		t.Fatal("its receipt stayed")
	}
	if _, err := s.ShowQuarantined(ctx, heldNew.ReceiptID); err != nil {
		t.Fatalf("recent held request: %v", err)
	}

	// The body key goes with claims retention; then the same body under a
	// new id is new (the claim it repeated is gone too).
	res, err = s.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Claims: 35 * 24 * time.Hour}})
	if err != nil || res.BodyKeysDeleted != 1 {
		t.Fatalf("prune claims: %+v %v, want 1 body key deleted", res, err)
	}
	if n := count(t, s, `SELECT count(*) FROM body_keys`); n != 0 {
		t.Fatalf("body keys left: %d", n)
	}
	mu.Lock()
	clock = clock.Add(31 * 24 * time.Hour)
	mu.Unlock()
	res, err = s.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Quarantine: 30 * 24 * time.Hour}})
	if err != nil || res.QuarantineDeleted != 1 {
		t.Fatalf("prune later: %+v %v", res, err)
	}
	if n := count(t, s, `SELECT count(*) FROM quarantine`); n != 0 {
		t.Fatalf("quarantine rows left: %d", n)
	}
	// stats still counts the three quarantined requests retention removed.
	st, err := s.Stats(ctx, []string{"gh"}, nil)
	if err != nil || st.Sources[0].Quarantined != 3 {
		t.Fatalf("stats after retention: %+v %v, want 3 quarantined", st.Sources, err)
	}
}

// TestRecordManyBodyReplaysMatchOneByOne: receipts with the body-replay
// check that commit in one writer batch (the multi-row path) get the
// outcome they would get one by one, in queue order.
func TestRecordManyBodyReplaysMatchOneByOne(t *testing.T) {
	t.Parallel()
	cases := func() []*hookwarden.Receipt {
		return []*hookwarden.Receipt{
			keyed("a", `{"n":1}`, "gh/app"),
			keyed("b", `{"n":1}`, "gh/app"), // replay of a
			keyed("a", `{"n":1}`, "gh/app"), // retry of a
			keyed("c", `{"n":2}`, "gh/app"),
			keyed("c", `{"n":1}`, "gh/app"), // c is claimed (earlier in the batch): a duplicate
			receipt("gh", "x", `{"n":1}`, "gh/app"),
			keyed("d", `{"n":1}`, "gh/app"), // another replay of a: a repeat of b's hold
			keyed("old", `{"n":0}`, "gh/app"),
			keyed("e", `{"n":0}`, "gh/app"), // replay of a claim from before the batch
			keyed("f", `{"n":3}`, "gh/app"),
			keyed("f", `{"n":3}`, "gh/app"),
			receipt("gh", "", `no id`),
		}
	}
	type result struct {
		outcome hookwarden.Outcome
		kind    string
	}
	run := func(batch bool) ([]result, *Store) {
		var mu sync.Mutex
		var sizes []int
		s := MustOpen(t, Options{OnCommit: func(n int, _ time.Duration, _ error) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }})
		ctx := context.Background()
		mustRecord(t, s, keyed("old", `{"n":0}`, "gh/app"))
		rs := cases()
		out := make([]result, len(rs))
		if !batch {
			for i, r := range rs {
				res := mustRecord(t, s, r)
				out[i] = result{res.Outcome, res.QuarantineKind}
			}
			return out, s
		}
		release := holdWriter(t, s)
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Go(func() {
				res, err := s.Record(ctx, r)
				if err != nil {
					t.Error(err)
				}
				out[i] = result{res.Outcome, res.QuarantineKind}
			})
			for len(s.ops) < i+1 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		release()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if last := sizes[len(sizes)-1]; last != len(rs) {
			t.Fatalf("last batch had %d requests, want %d", last, len(rs))
		}
		return out, s
	}
	one, s1 := run(false)
	many, s2 := run(true)
	want := []hookwarden.Outcome{"accepted", "quarantined", "duplicate", "accepted", "duplicate", "accepted",
		"quarantined", "duplicate", "quarantined", "accepted", "duplicate", "quarantined"}
	for i := range want {
		if one[i].outcome != want[i] {
			t.Errorf("one by one, case %d: %s, want %s", i, one[i].outcome, want[i])
		}
		if many[i] != one[i] {
			t.Errorf("batch, case %d: %+v, one by one %+v", i, many[i], one[i])
		}
	}
	for _, q := range []string{`SELECT count(*) FROM jobs`, `SELECT count(*) FROM body_keys`, `SELECT count(*) FROM receipts`,
		`SELECT sum(count) FROM quarantine`, `SELECT count(*) FROM quarantine WHERE kind = 'body_replayed'`} {
		if a, b := count(t, s1, q), count(t, s2, q); a != b {
			t.Errorf("%s: one by one %d, batch %d", q, a, b)
		}
	}
}
