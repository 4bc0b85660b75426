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

// TestRequestGapsJumpsAsRowsSay: the short ways of finding silences (a row
// an hour of request_hours, and the jumping walk on the receipts) find the
// same gaps as reading every request (LAG), on irregular traffic with
// bursts, quarantined requests, another source's requests in between, gaps
// of exactly expect_within (no silence) and a microsecond more (one), and
// long silences, for an expect_within of an hour and of more.
func TestRequestGapsJumpsAsRowsSay(t *testing.T) {
	q := setupQueue(t)
	rng := rand.New(rand.NewPCG(18, 18))
	at := t0
	for i := range 400 {
		steps := []time.Duration{time.Second, 10 * time.Minute, 59 * time.Minute, time.Hour, time.Hour + time.Microsecond,
			90 * time.Minute, 90*time.Minute + time.Microsecond, 2 * time.Hour, 3 * time.Hour}
		at = at.Add(steps[rng.IntN(len(steps))])
		switch rng.IntN(8) {
		case 0:
			q.recordAt(receipt("stripe", "", "{}"), at) // no id: quarantined, a request all the same
		case 1:
			q.recordAt(receipt("other", fmt.Sprint("o_", i), "{}"), at) // another source's traffic in between
		default:
			q.recordAt(receipt("stripe", fmt.Sprint("evt_", i), "{}"), at)
		}
		if rng.IntN(5) == 0 {
			q.recordAt(receipt("stripe", fmt.Sprint("evt_", i), "{}"), at) // a duplicate at the same time
		}
	}
	var firstReq time.Time
	if err := q.s.pool.QueryRow(q.ctx, `SELECT min(received_at) FROM receipts WHERE source = 'stripe'`).Scan(&firstReq); err != nil {
		t.Fatal(err)
	}
	firstReq = firstReq.UTC()
	for _, e := range []time.Duration{time.Hour, 90 * time.Minute, 2 * time.Hour} {
		p := hookwarden.SourcePolicy{Name: "stripe", ExpectWithin: e}
		collect := func(way string) string {
			var out []string
			add := func(a, b time.Time, _ bool) {
				if b.Sub(a) > p.ExpectWithin { // as silences' add
					out = append(out, a.Format(time.RFC3339Nano)+"→"+b.Format(time.RFC3339Nano))
				}
			}
			first, last := firstReq, time.Time{}
			err := q.s.snapshot(q.ctx, func(tx pgx.Tx) error {
				var err error
				switch way {
				case "requestGaps":
					first, last, err = requestGaps(q.ctx, tx, p, nil, at, add)
				case "walk":
					err = requestGapsWalk(q.ctx, tx, p, first, add)
				case "by hour":
					var ok bool
					if ok, err = requestGapsByHour(q.ctx, tx, p, first, add); !ok && err == nil {
						t.Errorf("expect_within %v: request_hours does not tell the first request's hour", e)
					}
				case "by row":
					err = requestGapsByRow(q.ctx, tx, p, first, add)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if way == "requestGaps" && (!first.Equal(firstReq) || last.IsZero()) {
				t.Errorf("first and last requests %v, %v; want %v and a last", first, last, firstReq)
			}
			return fmt.Sprint(first, out)
		}
		rows := collect("by row")
		for _, way := range []string{"requestGaps", "walk", "by hour"} {
			if got := collect(way); got != rows {
				t.Errorf("expect_within %v, %s:\n%s\nreading every request:\n%s", e, way, got, rows)
			}
		}
		if !strings.Contains(rows, "→") {
			t.Fatalf("expect_within %v: no gap at all: the traffic does not test anything", e)
		}
	}
}

// TestRequestGapsReadsTheHours: with an expect_within of an hour or more,
// requestGaps reads request_hours and never walks the receipts (the walk
// took a step per hour with traffic: 20-25 ms of a CLI read at 10 M
// claims); under an hour it walks; and when request_hours does not tell
// the first request's hour (retention deleted it while its receipts stay)
// it walks too, with the same answer.
func TestRequestGapsReadsTheHours(t *testing.T) {
	q, trace := tracedQueue(t)
	at := t0
	for i := range 48 {
		at = at.Add(time.Duration(1+i%3) * time.Hour)
		q.recordAt(receipt("stripe", fmt.Sprint("evt_", i), "{}"), at)
	}
	gaps := func(e time.Duration) (string, string) {
		t.Helper()
		trace.reset()
		p := hookwarden.SourcePolicy{Name: "stripe", ExpectWithin: e}
		var out []string
		err := q.s.snapshot(q.ctx, func(tx pgx.Tx) error {
			_, _, err := requestGaps(q.ctx, tx, p, nil, at, func(a, b time.Time, _ bool) {
				if b.Sub(a) > e {
					out = append(out, a.Format(time.RFC3339)+"→"+b.Format(time.RFC3339))
				}
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		way := "neither"
		for _, sql := range trace.sqls() {
			switch {
			case strings.Contains(sql, "FROM request_hours"):
				way = "hours"
			case strings.Contains(sql, "WITH RECURSIVE walk"):
				way = "walk"
			}
		}
		return way, fmt.Sprint(out)
	}
	hourWay, hourGaps := gaps(time.Hour)
	if hourWay != "hours" {
		t.Errorf("expect_within 1h read by %s, want request_hours alone", hourWay)
	}
	if !strings.Contains(hourGaps, "→") {
		t.Fatal("no silence: the traffic does not test anything")
	}
	if way, _ := gaps(30 * time.Minute); way != "walk" {
		t.Errorf("expect_within 30m read by %s, want the walk", way)
	}
	// The first hour's row gone (as when retention.claims deleted it and
	// the receipts stay): the walk answers, the same.
	if _, err := q.s.pool.Exec(q.ctx, `DELETE FROM request_hours WHERE hour = (SELECT min(hour) FROM request_hours)`); err != nil {
		t.Fatal(err)
	}
	if way, got := gaps(time.Hour); way != "walk" || got != hourGaps {
		t.Errorf("without the first hour's row: read by %s, %s; want the walk, %s", way, got, hourGaps)
	}
}
