package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

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
	// Of EXPLAIN ANALYZE: rows per loop, the loops, rows dropped.
	ActualRows       float64 `json:"Actual Rows"`
	Loops            float64 `json:"Actual Loops"`
	RemovedByFilter  float64 `json:"Rows Removed by Filter"`
	RemovedByRecheck float64 `json:"Rows Removed by Index Recheck"`
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

// TestOperatorReadPlans: every statement behind the operator's reads
// (stats, hourly, the dashboard's windows, each listing filter, gaps'
// silences, an idle prune's statements) run with EXPLAIN ANALYZE on a store
// of 30,000 events: none reads events, receipts, receipt_events, jobs or
// attempts whole (no Seq Scan), and none touches more than a tenth of them
// (rows returned plus rows removed by a filter, over every loop): an index
// walk that reads the history row by row fails as a scan does.
func TestOperatorReadPlans(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Database(t), Options{})
	ctx := context.Background()
	const n = 30000
	end := seedHistory(t, s, n)
	// A rare type, and a repeat for every tenth event.
	for _, q := range []string{
		`UPDATE events SET event_type = 'rare.type' WHERE id % 5000 = 7`,
		`INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body_sha256)
		SELECT source, id, 'duplicate', claimed_at, '127.0.0.1:1', '', '' FROM events WHERE id % 10 = 0`,
		`ANALYZE`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	type stmt struct {
		name string
		q    string
		args []any
	}
	var stmts []stmt
	hour := end.Add(-time.Hour - 17*time.Minute) // inside an hour: the windows' partial first hour
	day := end.Add(-24*time.Hour - 17*time.Minute)
	for _, f := range []hookwarden.EventFilter{{}, {Since: hour}, {Since: hour, Cursor: n - 10},
		{Status: hookwarden.StatusDead}, {Status: hookwarden.StatusPending}, {Status: hookwarden.StatusDelivered},
		{Status: hookwarden.StatusDead, Source: "rare"}, {Status: hookwarden.StatusPending, Since: hour}} {
		q, args, _, err := eventsQuery(f)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, stmt{fmt.Sprintf("events %+v", f), q, args})
	}
	for _, f := range []hookwarden.EventFilter{{Source: "rare"}, {Type: "rare.type"}, {Type: "t.*"},
		{Source: "std", Type: "t.*"}, {Source: "rare", Type: "rare.type"}, {Source: "std", Since: hour},
		{Source: "gh", Status: hookwarden.StatusDelivered}, {Source: "std", Cursor: 100}} {
		if !byPairs(f) {
			t.Fatalf("%+v does not list by pairs", f)
		}
		var pairs [][2]string
		err := s.snapshot(ctx, func(tx pgx.Tx) error {
			var err error
			pairs, err = typePairs(ctx, tx, f)
			return err
		})
		if err != nil || pairs == nil {
			t.Fatalf("pairs of %+v: %v %v", f, pairs, err)
		}
		hi, lo := int64(1<<63-1), int64(0)
		if f.Cursor > 0 {
			hi = f.Cursor
		}
		var since *time.Time
		if !f.Since.IsZero() {
			since = &f.Since
			if err := s.Pool().QueryRow(ctx, sinceRefSQL, f.Since).Scan(&lo); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range pairs {
			stmts = append(stmts, stmt{fmt.Sprintf("events of pair %v %+v", p, f),
				pairListSQL(since != nil, f.Status == hookwarden.StatusDelivered), []any{p[0], p[1], hi, lo, since, limitOf(0) + 1}})
		}
	}
	stmts = append(stmts, stmt{"events: summaries of a page", summariesSQL, []any{[]int64{1, 2, 7, 29999, 30000}}},
		stmt{"events: since's first id", sinceRefSQL, []any{hour}})
	for _, f := range []hookwarden.DeadFilter{{}, {Source: "rare"}, {Since: hour}} {
		q, args, _ := deadQuery(f)
		stmts = append(stmts, stmt{fmt.Sprintf("dead %+v", f), q, args})
	}
	srcs := []string{"std", "gh", "rare"}
	stmts = append(stmts,
		stmt{"pairs of all sources", typePairsSQL, []any{2*maxTypePairs + 1}},
		stmt{"pairs of a source", typeOfSourcePairsSQL, []any{2*maxTypePairs + 1, "std", "t."}},
		stmt{"recent counts", recentCountsSQL, []any{srcs, hour, day}},
		stmt{"recent counts on the hour", recentCountsSQL, []any{srcs, end.Truncate(time.Hour), end.Truncate(time.Hour).Add(-24 * time.Hour)}},
		stmt{"last accepted", lastAcceptedSQL, []any{srcs}},
		stmt{"silences: first and last request", requestBoundsSQL, []any{"std", end.Add(-7 * 24 * time.Hour)}},
		stmt{"silences: the walk", requestGapsSQL, []any{"std", end.Add(-7 * 24 * time.Hour), time.Hour}},
		stmt{"silences: the walk of a rare source", requestGapsSQL, []any{"rare", end.Add(-7 * 24 * time.Hour), time.Hour}},
	)
	for _, st := range stmts {
		var plan []struct{ Plan planNode }
		var raw []byte
		// ANALYZE runs the statement; in a transaction rolled back, in
		// case one writes.
		err := pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+st.q, st.args...).Scan(&raw); err != nil {
				return err
			}
			return errRollback
		})
		if err != nil && !errors.Is(err, errRollback) {
			t.Fatalf("%s: %v", st.name, err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil {
			t.Fatal(err)
		}
		if scans := plan[0].Plan.seqScans(); len(scans) > 0 {
			t.Errorf("%s scans %v whole:\n%s", st.name, scans, raw)
		}
		if touched := plan[0].Plan.touched(); touched > n/10 {
			t.Errorf("%s touches %d rows of the history's %d events:\n%s", st.name, touched, n, raw)
		}
	}
}

var errRollback = errors.New("rolled back")

// touched is the rows the plan's nodes on the history's tables returned or
// filtered out, over all their loops.
func (n planNode) touched() int {
	sum := 0
	switch n.Relation {
	case "events", "receipts", "receipt_events", "jobs", "attempts":
		sum += int((n.ActualRows + n.RemovedByFilter + n.RemovedByRecheck) * max(n.Loops, 1))
	}
	for _, c := range n.Plans {
		sum += c.touched()
	}
	return sum
}
