package pgstore

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// TestRequestGapsJumpsAsRowsSay: the jumping walk of silences finds the
// same gaps as reading every request (LAG), on irregular traffic with
// bursts, gaps of exactly expect_within (no silence) and a microsecond
// more (one), and long silences.
func TestRequestGapsJumpsAsRowsSay(t *testing.T) {
	q := setupQueue(t)
	rng := rand.New(rand.NewPCG(18, 18))
	at := t0
	for i := range 400 {
		steps := []time.Duration{time.Second, 10 * time.Minute, time.Hour, time.Hour + time.Microsecond, 3 * time.Hour}
		at = at.Add(steps[rng.IntN(len(steps))])
		q.recordAt(receipt("stripe", fmt.Sprint("evt_", i), "{}"), at)
		if rng.IntN(5) == 0 {
			q.recordAt(receipt("stripe", fmt.Sprint("evt_", i), "{}"), at) // a duplicate at the same time
		}
	}
	p := hookwarden.SourcePolicy{Name: "stripe", ExpectWithin: time.Hour}
	collect := func(jump bool) string {
		var out []string
		add := func(a, b time.Time, _ bool) {
			if b.Sub(a) > p.ExpectWithin { // as silences' add
				out = append(out, a.Format(time.RFC3339Nano)+"→"+b.Format(time.RFC3339Nano))
			}
		}
		err := q.s.snapshot(q.ctx, func(tx pgx.Tx) error {
			if !jump {
				return requestGapsByRow(q.ctx, tx, p, t0, add)
			}
			first, last, err := requestGaps(q.ctx, tx, p, nil, at, add)
			if first.Sub(t0) != time.Second || !last.Equal(at) {
				t.Errorf("first and last requests %v, %v; want %v, %v", first, last, t0.Add(time.Second), at)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(out)
	}
	jump, rows := collect(true), collect(false)
	if jump != rows {
		t.Errorf("jumping walk:\n%s\nreading every request:\n%s", jump, rows)
	}
	if !strings.Contains(rows, "→") {
		t.Fatal("no gap at all: the traffic does not test anything")
	}
}
