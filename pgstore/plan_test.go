package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// TestListingsWalkIndexes: on a store with a history, every listing's
// plan reaches events, receipts and jobs through an index, never a scan of
// the whole table, so that a page costs its rows, not the history. The
// plans are the server's own choice, from its statistics (ANALYZE).
func TestListingsWalkIndexes(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	end := seedHistory(t, s, 30000)
	type stmt struct {
		name string
		q    string
		args []any
	}
	var stmts []stmt
	for _, f := range []hookwarden.EventFilter{{}, {Source: "std"}, {Source: "rare"}, {Since: end.Add(-time.Hour)},
		{Status: hookwarden.StatusDead}, {Status: hookwarden.StatusPending}, {Status: hookwarden.StatusDelivered},
		{Type: "t.*"}, {Source: "std", Since: end.Add(-time.Hour), Cursor: 29990}} {
		q, args, _, err := eventsQuery(f)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, stmt{fmt.Sprintf("events %+v", f), q, args})
	}
	for _, f := range []hookwarden.DeadFilter{{}, {Source: "std"}, {Source: "rare"}, {Destination: "gh/app"},
		{Since: end.Add(-time.Hour)}} {
		q, args, _ := deadQuery(f)
		stmts = append(stmts, stmt{fmt.Sprintf("dead %+v", f), q, args})
	}
	srcs := []string{"std", "gh", "rare"}
	stmts = append(stmts,
		stmt{"recent counts", recentCountsSQL, []any{srcs, end.Add(-time.Hour), end.Add(-24 * time.Hour)}},
		stmt{"last accepted", lastAcceptedSQL, []any{srcs}})
	for _, st := range stmts {
		var plan []struct{ Plan planNode }
		var raw []byte
		if err := s.Pool().QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+st.q, st.args...).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		if scans := plan[0].Plan.seqScans(); len(scans) > 0 {
			t.Errorf("%s scans %v whole:\n%s", st.name, scans, raw)
		}
	}
}

// seedHistory writes n events of three sources (one in 1000 of source
// rare, the others std and gh), ten seconds apart, one receipt and one job
// each (one job in 500 dead, the newest 1000 pending, the rest
// delivered), analyzes the tables and returns the newest event's time.
func seedHistory(tb testing.TB, s *Store, n int) time.Time {
	tb.Helper()
	for _, q := range []string{`
INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256)
SELECT CASE WHEN g % 1000 = 0 THEN 'rare' WHEN g % 2 = 0 THEN 'std' ELSE 'gh' END, 'e' || g, 't.created',
	timestamptz '2026-01-01 00:00:00+00' + g * interval '10 seconds', '\x00'::bytea FROM generate_series(1, $1::int) g`, `
INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
SELECT source, id, 'accepted', claimed_at, '127.0.0.1:1', 'Content-Type: application/json', '{}', '' FROM events
WHERE $1::int > 0`, `
INSERT INTO jobs (event_ref, destination, state, next_at, created_at, finished_at)
SELECT id, source || '/app', CASE WHEN id % 500 = 0 THEN 'dead' WHEN id > $1::int - 1000 THEN 'pending' ELSE 'delivered' END,
	claimed_at, claimed_at, claimed_at FROM events`,
	} {
		if _, err := s.Pool().Exec(context.Background(), q, n); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(context.Background(), `ANALYZE`); err != nil {
		tb.Fatal(err)
	}
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * 10 * time.Second)
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Plans    []planNode `json:"Plans"`
}

// seqScans lists the big tables the plan reads whole.
func (n planNode) seqScans() []string {
	var out []string
	if n.NodeType == "Seq Scan" {
		switch n.Relation {
		case "events", "receipts", "jobs":
			out = append(out, n.Relation)
		}
	}
	for _, c := range n.Plans {
		out = append(out, c.seqScans()...)
	}
	return out
}
