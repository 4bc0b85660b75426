package sqlitestore

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestRecordManyMatchesOneByOne queues requests behind a held writer so that
// they commit as one batch (the multi-row path), and checks that each gets
// the outcome, receipt and jobs it would get had they run one by one in
// queue order: new, duplicate, divergent, doubles within the batch, several
// destinations, and requests that take the one-by-one path in the same
// transaction (quarantine, a SendGrid-style batch).
func TestRecordManyMatchesOneByOne(t *testing.T) {
	var batches []int
	var mu sync.Mutex
	s := MustOpen(t, Options{OnCommit: func(n int, _ time.Duration, _ error) {
		mu.Lock()
		batches = append(batches, n)
		mu.Unlock()
	}})
	ctx := context.Background()
	if _, err := s.Record(ctx, receipt("stripe", "old", `{"v":1}`, "stripe/app")); err != nil {
		t.Fatal(err)
	}
	sendgrid := receipt("sendgrid", "", `[...]`)
	sendgrid.QuarantineReason = ""
	for _, id := range []string{"x", "y"} {
		b := []byte(`{"sg_event_id":"` + id + `"}`)
		sendgrid.Events = append(sendgrid.Events, hookwarden.Event{ID: id, Type: "delivered", Body: b,
			BodySHA256: sha256.Sum256(b), Destinations: []string{"sendgrid/app"}})
	}
	cases := []struct {
		r         *hookwarden.Receipt
		outcome   hookwarden.Outcome
		divergent bool
		jobs      int
		kind      string
	}{
		{receipt("stripe", "a", `{"a":1}`, "stripe/app", "stripe/notify"), hookwarden.Accepted, false, 2, "accepted"},
		{receipt("stripe", "old", `{"v":1}`, "stripe/app"), hookwarden.Duplicate, false, 0, "duplicate"},
		{receipt("stripe", "a", `{"a":1}`, "stripe/app", "stripe/notify"), hookwarden.Duplicate, false, 0, "duplicate"},
		{receipt("github", "a", `{"a":1}`, "github/app"), hookwarden.Accepted, false, 1, "accepted"},
		{receipt("stripe", "old", `{"v":2}`, "stripe/app"), hookwarden.Duplicate, true, 0, "divergent"},
		{receipt("stripe", "b", ``, "stripe/app"), hookwarden.Accepted, false, 1, "accepted"},
		{receipt("stripe", "", `no id`), hookwarden.Quarantined, false, 0, "quarantined"},
		{sendgrid, hookwarden.Accepted, false, 2, "batch"},
		{receipt("stripe", "b", `{"b":2}`, "stripe/app"), hookwarden.Duplicate, true, 0, "divergent"},
		{receipt("stripe", "c", `{"c":1}`), hookwarden.Accepted, false, 0, "accepted"},
	}
	release := holdWriter(t, s)
	results := make([]hookwarden.RecordResult, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() { results[i], errs[i] = s.Record(ctx, c.r) })
		for len(s.ops) < i+1 { // keep the queue order
			time.Sleep(100 * time.Microsecond)
		}
	}
	release()
	wg.Wait()
	mu.Lock()
	if last := batches[len(batches)-1]; last != len(cases) {
		t.Fatalf("last batch had %d requests, want all %d in one", last, len(cases))
	}
	mu.Unlock()
	for i, c := range cases {
		got := results[i]
		if errs[i] != nil {
			t.Fatalf("case %d: %v", i, errs[i])
		}
		if got.Outcome != c.outcome {
			t.Errorf("case %d: outcome %s, want %s", i, got.Outcome, c.outcome)
		}
		if len(c.r.Events) == 1 {
			if ev := got.Events[0]; ev.Divergent != c.divergent || ev.Jobs != c.jobs {
				t.Errorf("case %d: %+v, want divergent %v, %d jobs", i, ev, c.divergent, c.jobs)
			}
		}
		var kind, source string
		var body []byte
		var ref *int64
		if err := s.DB().QueryRow(`SELECT kind, source, body, event_ref FROM receipts WHERE id = ?`, got.ReceiptID).
			Scan(&kind, &source, &body, &ref); err != nil {
			t.Fatalf("case %d: receipt %d: %v", i, got.ReceiptID, err)
		}
		if kind != c.kind || source != c.r.Source {
			t.Errorf("case %d: receipt %d is %s/%s, want %s/%s", i, got.ReceiptID, source, kind, c.r.Source, c.kind)
		}
		if wantBody := kind != "duplicate" && kind != "batch"; wantBody && string(body) != string(c.r.Body) {
			t.Errorf("case %d: receipt body %q, want %q", i, body, c.r.Body)
		}
		if len(c.r.Events) == 1 {
			var id string
			if ref == nil || s.DB().QueryRow(`SELECT event_id FROM events WHERE id = ?`, *ref).Scan(&id) != nil || id != c.r.Events[0].ID {
				t.Errorf("case %d: receipt's event is %q, want %q", i, id, c.r.Events[0].ID)
			}
		}
	}
	// The first copy of an id in the batch is the claim: its hash is kept.
	empty := sha256.Sum256(nil)
	if got := count(t, s, `SELECT count(*) FROM events WHERE source = 'stripe' AND event_id = 'b' AND body_sha256 = ?`, empty[:]); got != 1 {
		t.Errorf("event b keeps the hash of its first copy: %d rows", got)
	}
	if got := count(t, s, `SELECT count(*) FROM receipts WHERE kind='accepted' AND body = x''`); got != 1 {
		t.Errorf("an empty body must be stored empty, not NULL: %d", got)
	}
	for dest, want := range map[string]int{"stripe/app": 3, "stripe/notify": 1, "github/app": 1, "sendgrid/app": 2} {
		if got := count(t, s, `SELECT count(*) FROM jobs WHERE destination = ?`, dest); got != want {
			t.Errorf("jobs for %s: %d, want %d", dest, got, want)
		}
	}
	// Receipt ids are the rows' own, in queue order of the plain requests.
	if got := count(t, s, `SELECT count(*) FROM receipts`); got != len(cases)+1 {
		t.Errorf("receipts: %d, want %d", got, len(cases)+1)
	}
}
