package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestQueueFullFailsFast: with the writer busy and its queue full, Record
// answers ErrUnavailable at once (the receiver's 503) instead of waiting or
// buffering more; what was queued still commits.
func TestQueueFullFailsFast(t *testing.T) {
	const size = 4
	s := MustOpen(t, Options{QueueSize: size})
	ctx := context.Background()
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	errs := make([]error, size)
	for i := range size {
		wg.Go(func() { _, errs[i] = s.Record(ctx, receipt("stripe", fmt.Sprint("queued_", i), `{}`, "stripe/app")) })
	}
	for len(s.ops) < size {
		time.Sleep(100 * time.Microsecond)
	}
	start := time.Now()
	_, err := s.Record(ctx, receipt("stripe", "overflow", `{}`, "stripe/app"))
	if !errors.Is(err, hookwarden.ErrUnavailable) {
		t.Fatalf("Record on a full queue = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Record on a full queue took %s, want an immediate answer", d)
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("queued request %d: %v", i, err)
		}
	}
	if got := count(t, s, `SELECT count(*) FROM events WHERE event_id = 'overflow'`); got != 0 {
		t.Error("the refused request was recorded")
	}
}
