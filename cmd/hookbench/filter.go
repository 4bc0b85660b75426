package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
)

// The filter phase measures what content filters cost the ack path: one
// hookwarden with two destinations, plain, against the same with a typical
// filter on each destination, in alternating cells, at 64 connections with
// a Stripe-like body. Both filters are true for every event, so both
// configurations write the same jobs and the difference is the filters'
// work alone (the body parsed once per request, two evaluations).

// The two filters: one over the body and the type, one over a header and
// the type.
const (
	filterOnBody   = `body.livemode && event.type.startsWith("invoice.") && body.data.object.amount_paid >= 1000`
	filterOnHeader = `headers["content-type"].startsWith("application/json") && event.type in ["invoice.paid", "invoice.payment_failed"]`
)

// filterConns is the connection count of the filter phase.
const filterConns = 64

// stripeBody completes head (`{"id":"<event id>`) into a Stripe-like
// invoice.paid event of size bytes, padded in the invoice's description.
func stripeBody(head []byte, size int) []byte {
	b := append(head, `","object":"event","api_version":"2024-06-20","created":1733011200,"livemode":true,`+
		`"pending_webhooks":2,"type":"invoice.paid","request":{"id":null,"idempotency_key":null},`+
		`"data":{"object":{"id":"in_1QxYz1LkdIwHu7ix","object":"invoice","customer":"cus_R2kL9mQ",`+
		`"amount_paid":2000,"currency":"eur","status":"paid","billing_reason":"subscription_cycle",`+
		`"metadata":{"plan":"pro"},"description":"`...)
	const tail = `"}}}`
	for len(b) < size-len(tail) {
		b = append(b, 'x')
	}
	return append(b, tail...)
}

// filterReport compares the plain and filtered cells; values are means over
// the rounds.
type filterReport struct {
	Conns        int       `json:"conns"`
	BodyBytes    int       `json:"body_bytes"`
	Filters      []string  `json:"filters"`
	PlainAcks    float64   `json:"plain_acks_per_sec"`
	FilteredAcks float64   `json:"filtered_acks_per_sec"`
	Ratio        float64   `json:"ratio"` // filtered/plain acks/s
	RoundRatios  []float64 `json:"round_ratios"`
	// MedianRatio is the median of RoundRatios: on a shared machine one
	// disturbed cell moves the mean, not the median.
	MedianRatio float64   `json:"median_round_ratio"`
	PlainP50    float64   `json:"plain_p50_ms"`
	FilteredP50 float64   `json:"filtered_p50_ms"`
	PlainP99    float64   `json:"plain_p99_ms"`
	FilteredP99 float64   `json:"filtered_p99_ms"`
	P99Ratio    float64   `json:"p99_ratio"` // filtered/plain
	P99Rounds   []float64 `json:"p99_round_ratios"`
	PlainCPU    float64   `json:"plain_cpu_us_per_ack"`
	FilteredCPU float64   `json:"filtered_cpu_us_per_ack"`
	// CPURounds are each round's filtered/plain CPU µs per ack, and
	// MedianCPURatio their median: the steadier figure on a shared machine,
	// where acks/s moves with the neighbours' load.
	CPURounds      []float64 `json:"cpu_round_ratios"`
	MedianCPURatio float64   `json:"median_cpu_round_ratio"`
	PlainBatch     float64   `json:"plain_avg_commit_batch"`
	FilteredBatch  float64   `json:"filtered_avg_commit_batch"`
	Cells          []cell    `json:"cells"`
}

// filterRounds is the least number of rounds of the filter phase: even, so
// each order runs as often, and enough that the median of the round ratios
// stands against a few disturbed cells (a 5 % difference is within the
// noise of one 3 s cell on a shared 2-core machine).
const filterRounds = 6

// filterPhase runs the plain/filtered pair. Each round runs both cells, the
// order swapped every round (plain first, then filtered first), so a drift
// of the machine's speed does not favour one side.
func (b *bench) filterPhase(ctx context.Context) error {
	rounds := max(b.o.rounds, filterRounds)
	body := b.o.body
	b.printf("\n== filter: %d conns, two destinations, plain vs a filter on each, %d B Stripe-like body, %d rounds\n",
		filterConns, body, rounds)
	b.printf("  filters: %s\n           %s\n", filterOnBody, filterOnHeader)
	if b.stripeGen == nil {
		b.stripeGen = newGenerator(b.key, body)
		b.stripeGen.stripe = true
	}
	r := &filterReport{Conns: filterConns, BodyBytes: body, Filters: []string{filterOnBody, filterOnHeader}}
	var plain, filtered []cell
	for round := 1; round <= rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		for _, withFilter := range order {
			if err := ctx.Err(); err != nil {
				return err
			}
			c, err := b.filterCell(ctx, withFilter, body, round)
			if err != nil {
				return err
			}
			r.Cells = append(r.Cells, c)
			if withFilter {
				filtered = append(filtered, c)
			} else {
				plain = append(plain, c)
			}
		}
		p, f := plain[round-1], filtered[round-1]
		if p.AcksPerSec > 0 {
			r.RoundRatios = append(r.RoundRatios, round3(f.AcksPerSec/p.AcksPerSec))
		}
		if p.P99 > 0 {
			r.P99Rounds = append(r.P99Rounds, round3(f.P99/p.P99))
		}
		if p.ServerCPUPerAck > 0 {
			r.CPURounds = append(r.CPURounds, round3(f.ServerCPUPerAck/p.ServerCPUPerAck))
		}
	}
	r.fill(plain, filtered)
	b.rep.Filter = r
	b.printf("  => filtered/plain acks %.3f (rounds %v, median %.3f), p99 %.3f (rounds %v), cpu %.1f vs %.1f µs/ack (rounds %v, median %.3f)\n",
		r.Ratio, r.RoundRatios, r.MedianRatio, r.P99Ratio, r.P99Rounds, r.FilteredCPU, r.PlainCPU, r.CPURounds, r.MedianCPURatio)
	return nil
}

func (r *filterReport) fill(plain, filtered []cell) {
	acks := func(c cell) float64 { return c.AcksPerSec }
	p50 := func(c cell) float64 { return c.P50 }
	p99 := func(c cell) float64 { return c.P99 }
	cpu := func(c cell) float64 { return c.ServerCPUPerAck }
	batch := func(c cell) float64 { return c.AvgBatch }
	r.PlainAcks, r.FilteredAcks = mean(plain, acks), mean(filtered, acks)
	r.PlainP50, r.FilteredP50 = mean(plain, p50), mean(filtered, p50)
	r.PlainP99, r.FilteredP99 = mean(plain, p99), mean(filtered, p99)
	r.PlainCPU, r.FilteredCPU = mean(plain, cpu), mean(filtered, cpu)
	r.PlainBatch, r.FilteredBatch = mean(plain, batch), mean(filtered, batch)
	if r.PlainAcks > 0 {
		r.Ratio = round3(r.FilteredAcks / r.PlainAcks)
	}
	if r.PlainP99 > 0 {
		r.P99Ratio = round3(r.FilteredP99 / r.PlainP99)
	}
	r.MedianRatio = median(r.RoundRatios)
	r.MedianCPURatio = median(r.CPURounds)
}

func median(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	return round3((s[(n-1)/2] + s[n/2]) / 2)
}

// filterCell is one cell of the pair: a fresh hookwarden with the two
// destinations, deliveries parked at the sink. Afterwards it checks that
// the cell measured what it claims: every accepted event has a job at both
// destinations, and no filter failed (a failing filter creates the job too,
// but would measure an error path).
func (b *bench) filterCell(ctx context.Context, withFilter bool, body, round int) (cell, error) {
	target, dests := "plain", []hwDestination{{name: "app"}, {name: "audit"}}
	if withFilter {
		target = "filtered"
		dests[0].filter, dests[1].filter = filterOnBody, filterOnHeader
	}
	start := func() (*server, error) {
		o := b.hwOptions(b.dir("filter"), "/hold", 2*body+4096)
		o.destinations = dests
		return startHookwarden(ctx, o)
	}
	return b.measure(cell{Target: target, Round: round, BodyBytes: body}, filterConns,
		cellRun{start: start, gen: b.stripeGen, after: func(s *server) error { return checkFilterCell(ctx, s, len(dests)) }})
}

// checkFilterCell verifies a stopped filter cell's database and log.
func checkFilterCell(ctx context.Context, s *server, dests int) error {
	log, err := os.ReadFile(s.logPath)
	if err != nil {
		return err
	}
	if bytes.Contains(log, []byte("filter failed")) {
		return fmt.Errorf("a filter failed during the cell (log: %s)", tail(s.logPath))
	}
	db, err := openDB(s.dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	var events, jobs, perDest int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&events); err != nil {
		return fmt.Errorf("count events: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*), count(DISTINCT destination) FROM jobs`).Scan(&jobs, &perDest); err != nil {
		return fmt.Errorf("count jobs: %w", err)
	}
	if events == 0 || jobs != int64(dests)*events || perDest != int64(dests) {
		return fmt.Errorf("%d events have %d jobs at %d destinations; want %d at each of %d", events, jobs, perDest, events, dests)
	}
	return nil
}

// evaluateFilter adds the target: filters cost at most 5 % of acks/s
// and of p99.
func (r *report) evaluateFilter(add func(targetCheck)) {
	f := r.Filter
	if f == nil {
		return
	}
	// The median of the round ratios: one disturbed cell moves the mean.
	add(targetCheck{Name: "acks/s with a filter on each of 2 destinations, median round ratio to none", Value: f.MedianRatio,
		Target: ">= 0.95", Met: f.MedianRatio >= 0.95, Note: fmt.Sprintf("rounds %v, ratio of the means %.3f", f.RoundRatios, f.Ratio)})
	add(targetCheck{Name: "server CPU per ack with a filter on each of 2 destinations, median round ratio to none", Value: f.MedianCPURatio,
		Target: "<= 1.05", Met: f.MedianCPURatio > 0 && f.MedianCPURatio <= 1.05, Note: fmt.Sprintf("rounds %v", f.CPURounds)})
	add(targetCheck{Name: "p99 with a filter on each of 2 destinations, ratio to none", Value: f.P99Ratio,
		Target: "<= 1.05", Met: f.P99Ratio > 0 && f.P99Ratio <= 1.05, Note: fmt.Sprintf("rounds %v", f.P99Rounds)})
}

func (r *report) printFilter(w io.Writer) {
	f := r.Filter
	if f == nil {
		return
	}
	fmt.Fprintf(w, "filter: %d conns, 2 destinations, %d B: plain %.0f acks/s p99 %.2f ms %.1f µs/ack; filtered %.0f acks/s p99 %.2f ms %.1f µs/ack; ratio %.3f (median %.3f), p99 %.3f, cpu/ack median %.3f\n",
		f.Conns, f.BodyBytes, f.PlainAcks, f.PlainP99, f.PlainCPU, f.FilteredAcks, f.FilteredP99, f.FilteredCPU, f.Ratio, f.MedianRatio, f.P99Ratio, f.MedianCPURatio)
}
