package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// forensicQueries extracts the ```sql blocks of docs/forensics.md.
func forensicQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/forensics.md")
	if err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, m := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		qs = append(qs, strings.TrimSpace(m[1]))
	}
	return qs
}

// TestForensicQueriesRunOnARealDatabase runs every query of the forensics
// guide against a database filled through the store's own API (plus a run
// history with a crash), and checks that each one answers what it says.
func TestForensicQueriesRunOnARealDatabase(t *testing.T) {
	qs := forensicQueries(t)
	if len(qs) < 10 {
		t.Fatalf("docs/forensics.md has %d queries, want at least ten", len(qs))
	}
	o := setupOps(t)
	t0 := o.clock.Now()
	// An event delivered at once, pruned by retention.payloads below.
	o.record("stripe", "evt_old", `{"id":"evt_old","type":"t.created"}`, "stripe/old")
	o.finish("stripe/old", "evt_old", hookwarden.Delivered)

	// Run 1 crashed 10 minutes in; run 2 started 15 minutes later.
	err := o.s.write(o.ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO runs (started_at, heartbeat_at, stopped_at, version, pid) VALUES
			(?1, ?2, NULL, 'test', 1), (?3, ?3, NULL, 'test', 2)`,
			fmtTime(t0), fmtTime(t0.Add(10*time.Minute)), fmtTime(t0.Add(25*time.Minute)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A Stripe event created during the outage, redelivered after it.
	o.clock.Add(26 * time.Minute)
	stripe := fmt.Sprintf(`{"id":"evt_1","type":"invoice.paid","created":%d,"data":{"object":{"customer":"cus_42"}}}`,
		t0.Add(15*time.Minute).Unix())
	o.record("stripe", "evt_1", stripe, "stripe/app")
	o.record("stripe", "evt_1", stripe, "stripe/app")                                 // duplicate
	o.record("stripe", "evt_1", strings.Replace(stripe, "42", "43", 1), "stripe/app") // divergent
	o.finish("stripe/app", "evt_1", hookwarden.Dead)
	if res, err := o.s.Replay(o.ctx, hookwarden.ReplaySelector{Source: "stripe", EventIDs: []string{"evt_1"}},
		hookwarden.ReplayOptions{Audit: &hookwarden.AuditEntry{Origin: hookwarden.AuditCLI, Actor: "alice"}}); err != nil || res.Replayed != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	o.clock.Add(time.Second)
	o.finish("stripe/app", "evt_1", hookwarden.Delivered)
	o.record("stripe", "evt_2", `{"id":"evt_2","type":"charge.failed"}`, "stripe/app")
	o.finish("stripe/app", "evt_2", hookwarden.Dead)
	o.record("stripe", "evt_3", `{"id":"evt_3","type":"charge.succeeded"}`, "stripe/app") // pending
	o.recordBatch("sg", "sg/app", "a", "b")
	o.recordBatch("sg", "sg/app", "b")
	o.record("stripe", "", `{"no":"id"}`)
	// A backfill run that recovered evt_bf.
	run, err := o.s.StartBackfill(o.ctx, hookwarden.BackfillRun{Source: "stripe", From: t0.Add(9 * time.Minute),
		To: t0.Add(26 * time.Minute), Auto: true, Method: "list"})
	if err != nil {
		t.Fatal(err)
	}
	bf := receipt("stripe", "evt_bf", `{"id":"evt_bf","type":"invoice.paid"}`, "stripe/app")
	bf.ReceivedAt, bf.Backfill = o.clock.Now(), true
	bf.Header.Set("Hookwarden-Backfill-Run", fmt.Sprint(run))
	if _, err := o.s.Record(o.ctx, bf); err != nil {
		t.Fatal(err)
	}
	one := 1
	if err := o.s.UpdateBackfill(o.ctx, hookwarden.BackfillRun{ID: run, FinishedAt: o.clock.Now(),
		BackfillCounts: hookwarden.BackfillCounts{Listed: &one, AlreadyClaimed: new(int), Recovered: 1}}); err != nil {
		t.Fatal(err)
	}
	if res, err := o.s.Prune(o.ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: 20 * time.Minute}}); err != nil || res.PayloadsPruned != 1 {
		t.Fatalf("prune: %+v %v", res, err)
	}

	params := map[string]any{"source": "stripe", "event_id": "evt_1", "since": "2000-01-01", "run": "1",
		"path": "$.data.object.customer", "value": "cus_42"}
	// want: a value some row of the query must show (any column).
	want := map[int]string{
		1: "crash", 2: "evt_1", 3: "stripe | t.created | 2 | 1", 4: `"cus_43"`, 5: "after last replay", 6: "evt_2",
		7: "stripe/app", 8: "stripe/app", 9: "sg", 10: "2026-03-01T12:00:00Z | 7 | 4 | 2 | 1", 11: "evt_1", 12: "no event id",
		13: "evt_1", 14: "accepted",
		15: "evt_old | t.created | 2026-03-01T12:00:00.000000Z | 2026-03-01T12:26:01.000000Z | 1 | 1 | 1 | " +
			"2026-03-01T12:00:00.000000Z | 2026-03-01T12:00:00.000000Z",
		16: "stripe | last_accepted | 2026-03-01T12:00:00.000000Z\nstripe | last_received | 2026-03-01T12:00:00.000000Z\nstripe/old | delivered | 1", 17: `replay | cli | alice | {"source":"stripe","event_ids":["evt_1"]}`,
		18: `replay | cli | alice | {"selected":1,"replayed":1,"skipped":0}`,
		19: "stripe | 2026-03-01T12:09:00.000000Z | 2026-03-01T12:26:00.000000Z | 1 |", 20: "evt_bf | t.created | stripe/app | pending",
		21: "stripe/app | dead | 1 | 1\nstripe/app | delivered | 1 | 1\nstripe/app | pending | 2 | 2",
		22: "sg | 2026-03-01T12 | 2 | 2 | 1 | 1\nstripe | 2026-03-01T12 | 5 | 5 | 2 | 2",
		// evt_old's receipt was pruned: its hour still remembers it.
		23: "sg | 2026-03-01T12 | 2026-03-01T12:26:01.000000Z | 2026-03-01T12:26:01.000000Z | 2026-03-01T12:26:01.000000Z | 2026-03-01T12:26:01.000000Z\n" +
			"stripe | 2026-03-01T12 | 2026-03-01T12:00:00.000000Z | 2026-03-01T12:26:00.000000Z | 2026-03-01T12:26:01.000000Z | 2026-03-01T12:26:01.000000Z",
	}
	for i, q := range qs {
		n := i + 1
		t.Run(fmt.Sprintf("query_%d", n), func(t *testing.T) {
			var args []any
			for name, v := range params {
				if strings.Contains(q, ":"+name) {
					args = append(args, sql.Named(name, v))
				}
			}
			rows, err := o.s.DB().Query(q, args...)
			if err != nil {
				t.Fatalf("query %d: %v\n%s", n, err, q)
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			var got []string
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				var cells []string
				for _, v := range vals {
					if b, ok := v.([]byte); ok {
						v = string(b)
					}
					cells = append(cells, fmt.Sprint(v))
				}
				got = append(got, strings.Join(cells, " | "))
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("query %d: %v", n, err)
			}
			if len(got) == 0 {
				t.Fatalf("query %d returned no rows on a database made to answer it\n%s", n, q)
			}
			if w, ok := want[n]; ok && !strings.Contains(strings.Join(got, "\n"), w) {
				t.Errorf("query %d: no row shows %q:\n%s", n, w, strings.Join(got, "\n"))
			}
		})
	}
}
