package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"sync"
	"testing"
	"time"
)

// TestDuplicateOfHashlessClaim: payload retention empties a claim's hash, so
// a late copy cannot be compared. It is a duplicate (no job, not flagged
// divergent) and its body is kept, alone or in a multi-row batch.
func TestDuplicateOfHashlessClaim(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	for _, id := range []string{"old_1", "old_2", "old_3"} {
		if _, err := s.Record(ctx, receipt("standard", id, `{"v":1}`, "standard/app")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE events SET body_sha256 = x''`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Alone: the single-request path.
	res, err := s.Record(ctx, receipt("standard", "old_1", `{"v":2}`, "standard/app"))
	if err != nil || res.Outcome != "duplicate" || res.Events[0].Divergent {
		t.Fatalf("late copy: %+v, %v; want a duplicate, not flagged", res, err)
	}
	// In a batch with a new event: the multi-row path.
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	for i, id := range []string{"old_2", "old_3", "new_1"} {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 5 * time.Millisecond)
			body := `{"v":1}`
			if id == "old_3" {
				body = `{"v":3}`
			}
			res, err := s.Record(ctx, receipt("standard", id, body, "standard/app"))
			want := "duplicate"
			if id == "new_1" {
				want = "accepted"
			}
			if err != nil || string(res.Outcome) != want || res.Events[0].Divergent {
				t.Errorf("%s: %+v, %v; want %s, not flagged", id, res, err, want)
			}
		})
	}
	time.Sleep(40 * time.Millisecond)
	release()
	wg.Wait()
	if got := count(t, s, `SELECT count(*) FROM receipts WHERE kind = 'duplicate' AND body IS NOT NULL`); got != 3 {
		t.Errorf("%d late copies kept their body, want 3", got)
	}
	if got := count(t, s, `SELECT count(*) FROM jobs`); got != 4 {
		t.Errorf("%d jobs, want 4 (late copies create none)", got)
	}
}

// TestReceiptHashOnlyWhenItDiffers: the accepted copy and byte-identical
// duplicates do not repeat the event's hash (32 bytes each); a divergent
// copy stores its own. events show gives every receipt its hash either way.
func TestReceiptHashOnlyWhenItDiffers(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	for _, body := range []string{`{"v":1}`, `{"v":1}`, `{"v":2}`} {
		if _, err := s.Record(ctx, receipt("standard", "evt_1", body, "standard/app")); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(t, s, `SELECT count(*) FROM receipts WHERE length(body_sha256) = 0 AND kind IN ('accepted', 'duplicate')`); got != 2 {
		t.Errorf("%d accepted/duplicate receipts without a hash, want 2", got)
	}
	if got := count(t, s, `SELECT count(*) FROM receipts WHERE length(body_sha256) = 32 AND kind = 'divergent'`); got != 1 {
		t.Errorf("%d divergent receipts with their hash, want 1", got)
	}
	d, err := s.ShowEvent(ctx, "standard", "evt_1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"v":1}`, `{"v":1}`, `{"v":2}`}
	if len(d.ReceiptLog) != len(want) {
		t.Fatalf("%d receipts shown, want %d", len(d.ReceiptLog), len(want))
	}
	for i, r := range d.ReceiptLog {
		if sum := sha256.Sum256([]byte(want[i])); r.BodySHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("receipt %d (%s) shows hash %q, want that of %s", i, r.Kind, r.BodySHA256, want[i])
		}
	}
}
