package pgstore

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestReleaseQuarantined: a release claims the candidate id (or the one
// given) through Record's claim, copies the held receipt as the event's
// accepted receipt with its original time, creates the jobs, keeps the body
// key and marks the row released, with its audit entry; an id claimed
// already, a second release and an unknown request change nothing.
func TestReleaseQuarantined(t *testing.T) {
	o := setupOps(t)
	body := `{"ping":true}`
	o.record(keyed("d-1", body))
	replayed := o.record(keyed("d-2", body))
	if replayed.Outcome != hookwarden.Quarantined {
		t.Fatalf("replayed body: %+v", replayed)
	}
	noID := o.held(`{"no":"id"}`)
	o.clock.Add(time.Hour)
	before := o.rowCounts()

	_, err := o.s.ReleaseQuarantined(o.ctx, hookwarden.Release{ReceiptID: replayed.ReceiptID, EventID: "d-1",
		Destinations: []string{"gh/app"}, Audit: cli()})
	if !errors.Is(err, hookwarden.ErrAlreadyClaimed) {
		t.Fatalf("release under a claimed id: %v, want ErrAlreadyClaimed", err)
	}
	if got := o.rowCounts(); got != before || o.count(`SELECT count(*) FROM audit`) != 0 {
		t.Fatalf("a refused release changed rows:\n%s\n%s", before, got)
	}

	rel, err := o.s.ReleaseQuarantined(o.ctx, hookwarden.Release{ReceiptID: replayed.ReceiptID, EventType: "ping",
		Destinations: []string{"gh/app"}, Audit: cli()})
	if err != nil || rel != (hookwarden.Released{Source: "gh", EventID: "d-2", Jobs: 1}) {
		t.Fatalf("release: %+v %v, want d-2 with 1 job", rel, err)
	}
	var claimed, received time.Time
	var kind, typ string
	var got []byte
	if err := o.s.Pool().QueryRow(o.ctx, `SELECT e.claimed_at, e.event_type, r.kind, r.received_at, r.body
		FROM events e JOIN receipts r ON r.event_ref = e.id WHERE e.source = 'gh' AND e.event_id = 'd-2'`).Scan(
		&claimed, &typ, &kind, &received, &got); err != nil {
		t.Fatal(err)
	}
	if !claimed.Equal(o.clock.Now()) || typ != "ping" || kind != "accepted" || !received.Equal(t0) || string(got) != body {
		t.Fatalf("released event: claimed %v type %q receipt %s received %v body %q", claimed, typ, kind, received, got)
	}
	if j := o.job("gh", "d-2", "gh/app"); j.State != "pending" || j.Attempts != 0 {
		t.Fatalf("released job: %v", j)
	}
	var releasedAt *time.Time
	var releasedID *string
	if err := o.s.Pool().QueryRow(o.ctx, `SELECT released_at, released_event_id FROM quarantine WHERE receipt_id = $1`,
		replayed.ReceiptID).Scan(&releasedAt, &releasedID); err != nil {
		t.Fatal(err)
	}
	if releasedAt == nil || !releasedAt.Equal(o.clock.Now()) || releasedID == nil || *releasedID != "d-2" {
		t.Fatalf("quarantine row: released %v as %v", releasedAt, releasedID)
	}
	var auditID int64
	if err := o.s.Pool().QueryRow(o.ctx, `SELECT id FROM audit`).Scan(&auditID); err != nil {
		t.Fatal(err)
	}
	if a := o.audit(auditID); a.Action != "release" || a.ReceiptID == nil || *a.ReceiptID != replayed.ReceiptID ||
		a.Result == nil || *a.Result != `{"source":"gh","event_id":"d-2","jobs":1}` || len(a.Events) != 1 || a.Events[0] != "gh/d-2" {
		t.Fatalf("audit entry %+v", a)
	}
	if _, err := o.s.ReleaseQuarantined(o.ctx, hookwarden.Release{ReceiptID: replayed.ReceiptID}); !errors.Is(err, hookwarden.ErrReleased) {
		t.Fatalf("second release: %v, want ErrReleased", err)
	}
	if _, err := o.s.ReleaseQuarantined(o.ctx, hookwarden.Release{ReceiptID: noID.ReceiptID}); err == nil {
		t.Fatal("release of a request without an id, none given: succeeded")
	}
	if _, err := o.s.ReleaseQuarantined(o.ctx, hookwarden.Release{ReceiptID: 1 << 40}); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("release of an unknown request: %v, want ErrNotFound", err)
	}
	// The same body again after the release is held anew.
	again := keyed("d-3", body)
	again.ReceivedAt = o.clock.Now()
	if r := o.record(again); r.Outcome != hookwarden.Quarantined || r.ReceiptID == replayed.ReceiptID {
		t.Fatalf("the released body again: %+v, want held anew", r)
	}
}

// TestReleaseConcurrentInstances: two instances releasing the same held
// request at once: one releases it, the other is told it was released;
// one event, one job.
func TestReleaseConcurrentInstances(t *testing.T) {
	o := setupOps(t)
	held := o.held(`{"no":"id"}`)
	var errs [2]error
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range []*Store{o.instance(), o.instance()} {
		wg.Go(func() {
			<-start
			_, errs[i] = s.ReleaseQuarantined(o.ctx, hookwarden.Release{ReceiptID: held.ReceiptID, EventID: "m-1",
				Destinations: []string{"std/app"}})
		})
	}
	close(start)
	wg.Wait()
	ok, released := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, hookwarden.ErrReleased):
			released++
		default:
			t.Fatalf("release: %v", err)
		}
	}
	if ok != 1 || released != 1 {
		t.Fatalf("releases: %v, want one done and one told it was released", errs)
	}
	if n := o.count(`SELECT count(*) FROM jobs`); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}

// TestDropQuarantined: a dropped request's row and held receipt go, its
// copies stay counted in pruned_totals, the audit entry commits with it;
// a second drop is not found.
func TestDropQuarantined(t *testing.T) {
	o := setupOps(t)
	keep := o.held(`{"keep":1}`)
	drop := o.held(`{"drop":1}`)
	o.held(`{"drop":1}`)
	if err := o.s.DropQuarantined(o.ctx, drop.ReceiptID, cli()); err != nil {
		t.Fatal(err)
	}
	if n := o.count(`SELECT count(*) FROM quarantine`) + o.count(`SELECT count(*) FROM receipts`); n != 2 {
		t.Fatalf("%d rows left, want the other request's row and receipt", n)
	}
	if n := o.count(`SELECT count(*) FROM quarantine WHERE receipt_id = $1`, keep.ReceiptID); n != 1 {
		t.Fatal("the other request went too")
	}
	if got := o.totals(); got != "[std/quarantined=2]" {
		t.Fatalf("pruned totals %s, want the 2 copies dropped", got)
	}
	if n := o.count(`SELECT count(*) FROM audit WHERE action = 'drop' AND receipt_id = $1`, drop.ReceiptID); n != 1 {
		t.Fatal("no audit entry for the drop")
	}
	if err := o.s.DropQuarantined(o.ctx, drop.ReceiptID, nil); !errors.Is(err, hookwarden.ErrNotFound) {
		t.Fatalf("second drop: %v, want ErrNotFound", err)
	}
}
