package sqlitestore

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestWarmClaimsReadsTheClaimIndex: the warm-up at start reads the claim
// index, every claim of it, and not the table (whose pages, the payloads
// among them, are ten times the size).
func TestWarmClaimsReadsTheClaimIndex(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	for i := range 30 {
		if _, err := s.Record(ctx, receipt("stripe", fmt.Sprint("evt_", i), fmt.Sprintf(`{"i":%d}`, i), "stripe/app")); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.WarmClaims(ctx); err != nil || n != 30 {
		t.Fatalf("WarmClaims = %d, %v; want the 30 claims", n, err)
	}
	var id, parent, notused int
	var detail string
	if err := s.DB().QueryRowContext(ctx, "EXPLAIN QUERY PLAN "+warmClaimsSQL).Scan(&id, &parent, &notused, &detail); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(detail, "COVERING INDEX sqlite_autoindex_events_1") {
		t.Errorf("the warm-up reads %q, want the claim index alone", detail)
	}
}
