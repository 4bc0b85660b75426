package storetest

import (
	"errors"
	"testing"

	"github.com/hookwarden/hookwarden"
)

// testHealth: Healthy is the outcome of the last write (a failed Record
// makes it fail, the next successful write clears it: /readyz follows the
// store without a restart), and Ping succeeds on a writable store.
func testHealth(t *testing.T, h Harness) {
	f := setup(t, h)
	if err := f.s.Ping(f.ctx); err != nil {
		t.Fatalf("ping of a new store: %v", err)
	}
	f.record("std", "h1", `{}`, "std/app")
	if err := f.s.Healthy(); err != nil {
		t.Fatalf("healthy after a write: %v", err)
	}
	if h.RefuseJobs == nil {
		return
	}
	restore := h.RefuseJobs(t, f.s)
	if _, err := f.s.Record(f.ctx, f.receipt("std", "h2", `{}`, "std/app")); !errors.Is(err, hookwarden.ErrUnavailable) {
		t.Fatalf("record while jobs are refused: %v, want ErrUnavailable", err)
	}
	if err := f.s.Healthy(); err == nil {
		t.Fatal("healthy after a failed write")
	}
	restore()
	f.record("std", "h2", `{}`, "std/app") // the provider's retry
	if err := f.s.Healthy(); err != nil {
		t.Fatalf("healthy after the next write succeeded: %v", err)
	}
	if err := f.s.Ping(f.ctx); err != nil {
		t.Fatalf("ping after recovery: %v", err)
	}
}
