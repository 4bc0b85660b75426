package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestWarmClaimsReadsTheClaimIndex: the warm-up at start reads every page
// of the claim index and nothing else: not the table, and not an entry
// handed to the executor (each costs a look at the visibility map, or the
// table when the map is not set), however the planner would rather count.
func TestWarmClaimsReadsTheClaimIndex(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	seedHistory(t, s, 3000)
	pages, err := s.WarmClaims(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, warmClaimsSet); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+warmClaimsSQL).Scan(&raw); err != nil {
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
	scan := plan[0].Plan.find("Index Only Scan", "events_source_event_id_key")
	if scan == nil {
		t.Fatalf("the warm-up is not an index-only scan of the claim index:\n%s", raw)
	}
	if scans := plan[0].Plan.seqScans(); len(scans) > 0 {
		t.Errorf("the warm-up reads %v whole:\n%s", scans, raw)
	}
	if scan.ActualRows != 0 {
		t.Errorf("%v entries of the index reached the executor, want none:\n%s", scan.ActualRows, raw)
	}
	// Every page but the metapage, and no other: the root and inner pages
	// on the way down, then each leaf once.
	if got := scan.SharedHit + scan.SharedRead; got < pages-1 || got > pages {
		t.Errorf("the warm-up read %d buffers, want the claim index's %d pages:\n%s", got, pages, raw)
	}
}

// find is the plan's first node of nodeType on index, or nil.
func (n *planNode) find(nodeType, index string) *planNode {
	if n.NodeType == nodeType && n.IndexName == index {
		return n
	}
	for i := range n.Plans {
		if f := n.Plans[i].find(nodeType, index); f != nil {
			return f
		}
	}
	return nil
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

// TestWarmUpOnlyOnceAServerStart: the first serve to start after the
// database server reads the claim index; a later one (a deploy, another
// instance) does not, until the server restarts and its buffers are empty
// again.
func TestWarmUpOnlyOnceAServerStart(t *testing.T) {
	t.Parallel()
	c := pgtest.Start(t)
	url := c.NewDatabase(t)
	ctx := context.Background()
	started := func() *Store {
		t.Helper()
		s := open(t, url, Options{})
		if _, err := s.StartRun(ctx, "test"); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if need, why := started().WarmUpNeeded(); !need {
		t.Fatalf("the first run since the server started skips the warm-up: %s", why)
	}
	second := started()
	if need, _ := second.WarmUpNeeded(); need {
		t.Fatal("a second run since the server started reads the claim index again")
	}
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	if need, why := started().WarmUpNeeded(); !need {
		t.Fatalf("the first run after the server restarted skips the warm-up: %s", why)
	}
}
