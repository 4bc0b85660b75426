package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestWarmClaimsReadsTheClaimIndex: the warm-up at start reads every claim
// through the claim index alone, an index-only scan, not the table (whose
// pages are many times the index's), however the planner would rather
// count them.
func TestWarmClaimsReadsTheClaimIndex(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	const n = 3000
	seedHistory(t, s, n)
	if got, err := s.WarmClaims(ctx); err != nil || got != n {
		t.Fatalf("WarmClaims = %d, %v; want the %d claims", got, err, n)
	}
	var raw []byte
	err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, warmClaimsSet); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+warmClaimsSQL).Scan(&raw); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	var plan []struct{ Plan planNode }
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	if !plan[0].Plan.reads("Index Only Scan", "events_source_event_id_key") {
		t.Errorf("the warm-up is not an index-only scan of the claim index:\n%s", raw)
	}
	if scans := plan[0].Plan.seqScans(); len(scans) > 0 {
		t.Errorf("the warm-up reads %v whole:\n%s", scans, raw)
	}
}

// reads says whether the plan has a node of nodeType on index.
func (n planNode) reads(nodeType, index string) bool {
	if n.NodeType == nodeType && n.IndexName == index {
		return true
	}
	for _, c := range n.Plans {
		if c.reads(nodeType, index) {
			return true
		}
	}
	return false
}
