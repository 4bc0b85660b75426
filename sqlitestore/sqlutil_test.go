package sqlitestore

import (
	"context"
	"slices"
	"testing"
)

// TestIDSetRoundTrip: what idSet writes, json_each reads back as the same
// ids in order, through selectIDs, on a real file; an empty set selects no
// row (json_each('null') would select one NULL).
func TestIDSetRoundTrip(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	for _, ids := range [][]int64{nil, {}, {7}, {3, 1, 2}, {-1, 0, 9007199254740993}} {
		got, err := selectIDs(ctx, s.DB(), `SELECT value FROM json_each(?) ORDER BY key`, idSet(ids))
		if err != nil {
			t.Fatalf("%v: %v", ids, err)
		}
		if !slices.Equal(got, ids) && !(len(got) == 0 && len(ids) == 0) {
			t.Errorf("idSet(%v) = %s read back as %v", ids, idSet(ids), got)
		}
	}
}
