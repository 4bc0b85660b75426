package hookwarden

import (
	"slices"
	"testing"
)

// TestHistoryEventIDs: the bulk history's ids are unique, of one shape,
// and out of order, so that its claims (and the benchmark's, made the same
// way) land all over the claim index as UUIDs do.
func TestHistoryEventIDs(t *testing.T) {
	const n = 100000
	ids := make([]string, 0, n)
	seen := map[string]bool{}
	ascending := 0
	for i := 1; i <= n; i++ {
		id := HistoryEventID(i)
		if seen[id] || len(id) < 10 || id[8] != '-' {
			t.Fatalf("claim %d: id %q repeated or misshapen", i, id)
		}
		seen[id] = true
		if len(ids) > 0 && id > ids[len(ids)-1] {
			ascending++
		}
		ids = append(ids, id)
	}
	if got := HistoryEventID(1); got != "9e3779b1-1" {
		t.Errorf("HistoryEventID(1) = %q; the SQL of both stores writes 9e3779b1-1", got)
	}
	// In order, every step would ascend; in no order, about half do.
	if ascending < n/3 || ascending > 2*n/3 {
		t.Errorf("%d of %d steps ascend: the ids are in order, not spread", ascending, n)
	}
	slices.Sort(ids)
	if first, last := ids[0][:2], ids[n-1][:2]; first > "02" || last < "fd" {
		t.Errorf("the ids span %s.. to %s..: not spread over the key space", first, last)
	}
}
