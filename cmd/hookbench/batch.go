package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
)

// The batch phase measures what a platform's many-event request costs
// (SPEC 11, issue 47): WhatsApp-shaped requests of 1, 10 and 100 messages,
// every one new, signed as Meta signs them, at 64 connections, one fresh
// hookwarden (scheme meta) per cell. Each event is claimed on its own id,
// gets its own job and envelope; the request is one receipt. The figures
// are the events recorded per second and the p99 per request, each against
// the 1-message requests of the same run.

// batchSizes are the messages per request of the batch phase.
var batchSizes = []int{1, 10, 100}

// batchConns is the connection count of the batch phase.
const batchConns = 64

// waMessage is one WhatsApp text message; the body keeps the non-ASCII
// escaped, as Meta sends it.
const waMessage = `{"from":"16505551234","id":"wamid.%s.%d","timestamp":"1749416383","type":"text","text":{"body":"caf\u00e9 order %d"}}`

// buildMeta renders request n: a WhatsApp batch of g.meta messages,
// X-Hub-Signature-256 over the raw body.
func (lc *loadConn) buildMeta(n uint64) {
	g := lc.g
	id := string(g.appendID(nil, n))
	b := lc.body[:0]
	b = append(b, `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp",`+
		`"metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},`+
		`"contacts":[{"profile":{"name":"Sheena Nelson"},"wa_id":"16505551234"}],"messages":[`...)
	for j := range g.meta {
		if j > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, waMessage, id, j, j)
	}
	b = append(b, `]},"field":"messages"}]}]}`...)
	lc.body = b
	lc.mac.Reset()
	lc.mac.Write(b)
	sum := lc.mac.Sum(lc.sig[:0])
	r := lc.req[:0]
	r = append(r, "POST "...)
	r = append(r, lc.spec.Path...)
	r = append(r, " HTTP/1.1\r\nHost: "...)
	r = append(r, lc.spec.Addr...)
	r = append(r, "\r\nUser-Agent: facebookexternalua\r\nContent-Type: application/json\r\nX-Hub-Signature-256: sha256="...)
	r = hex.AppendEncode(r, sum)
	r = append(r, "\r\nContent-Length: "...)
	r = strconv.AppendInt(r, int64(len(b)), 10)
	r = append(r, "\r\n\r\n"...)
	r = append(r, b...)
	lc.req = r
}

// newMetaGenerator makes requests of n messages signed with secret (Meta's
// App Secret is used as is, not decoded).
func newMetaGenerator(secret string, n int) *generator {
	g := newGenerator([]byte(secret), 0)
	g.meta = n
	return g
}

// batchSize is one request size of the batch phase; values are means over
// the rounds.
type batchSize struct {
	Events        int       `json:"events_per_request"`
	RequestsPerS  float64   `json:"requests_per_sec"`
	EventsPerS    float64   `json:"events_per_sec"`
	P99           float64   `json:"p99_ms"`
	CPUPerEvent   float64   `json:"server_cpu_us_per_event"`
	EventsRatio   float64   `json:"events_per_sec_ratio"` // to the 1-event requests
	P99Ratio      float64   `json:"p99_ratio"`            // to the 1-event requests
	RoundEvRatios []float64 `json:"round_events_ratios"`
	RoundP99      []float64 `json:"round_p99_ratios"`
}

type batchReport struct {
	Conns int         `json:"conns"`
	Sizes []batchSize `json:"sizes"`
	Cells []cell      `json:"cells"`
}

// batchPhase runs each size once per round, the order rotated every round
// so that a drift of the machine's speed does not favour one size.
func (b *bench) batchPhase(ctx context.Context) error {
	rounds := max(b.o.rounds, 2)
	b.printf("\n== batch: %d conns, WhatsApp-shaped requests of %v messages (scheme meta), %d rounds\n", batchConns, batchSizes, rounds)
	gens := make([]*generator, len(batchSizes))
	for i, n := range batchSizes {
		gens[i] = newMetaGenerator(b.secret, n)
	}
	r := &batchReport{Conns: batchConns}
	cells := make([][]cell, len(batchSizes))
	for round := 1; round <= rounds; round++ {
		for k := range batchSizes {
			i := (k + round - 1) % len(batchSizes)
			if err := ctx.Err(); err != nil {
				return err
			}
			c, err := b.batchCell(ctx, gens[i], round)
			if err != nil {
				return err
			}
			r.Cells = append(r.Cells, c)
			cells[i] = append(cells[i], c)
		}
	}
	r.fill(cells)
	b.rep.Batch = r
	for _, s := range r.Sizes {
		b.printf("  => %3d events/request: %.0f events/s (x%.2f of 1-event, rounds %v), p99 %.2f ms (x%.2f, rounds %v), cpu %.1f µs/event\n",
			s.Events, s.EventsPerS, s.EventsRatio, s.RoundEvRatios, s.P99, s.P99Ratio, s.RoundP99, s.CPUPerEvent)
	}
	return nil
}

func (r *batchReport) fill(cells [][]cell) {
	for i, n := range batchSizes {
		cs := cells[i]
		s := batchSize{Events: n}
		s.RequestsPerS = mean(cs, func(c cell) float64 { return c.AcksPerSec })
		s.EventsPerS = s.RequestsPerS * float64(n)
		s.P99 = mean(cs, func(c cell) float64 { return c.P99 })
		s.CPUPerEvent = mean(cs, func(c cell) float64 { return c.ServerCPUPerAck }) / float64(n)
		if one := r.Sizes; len(one) > 0 {
			if one[0].EventsPerS > 0 {
				s.EventsRatio = round3(s.EventsPerS / one[0].EventsPerS)
			}
			if one[0].P99 > 0 {
				s.P99Ratio = round3(s.P99 / one[0].P99)
			}
			for k, c := range cs {
				base := cells[0][k]
				if base.AcksPerSec > 0 {
					s.RoundEvRatios = append(s.RoundEvRatios, round3(c.AcksPerSec*float64(n)/base.AcksPerSec))
				}
				if base.P99 > 0 {
					s.RoundP99 = append(s.RoundP99, round3(c.P99/base.P99))
				}
			}
		} else {
			s.EventsRatio, s.P99Ratio = 1, 1
		}
		r.Sizes = append(r.Sizes, s)
	}
}

// batchCell is one size in one round: a fresh hookwarden with a meta source
// and one destination, deliveries parked at the sink. Afterwards it checks
// that every request's events were claimed, each with its job.
func (b *bench) batchCell(ctx context.Context, g *generator, round int) (cell, error) {
	start := func() (*server, error) {
		o := b.hwOptions(b.dir(fmt.Sprintf("batch%d", g.meta)), "/hold", 1<<20)
		o.scheme = "meta"
		return startHookwarden(ctx, o)
	}
	return b.measure(cell{Target: fmt.Sprintf("meta x%d", g.meta), Round: round}, batchConns,
		cellRun{start: start, gen: g, noDup: true, after: func(s *server) error { return checkBatchCell(ctx, s, g.meta) }})
}

// checkBatchCell verifies a stopped batch cell's database: whole requests'
// worth of events, one job each.
func checkBatchCell(ctx context.Context, s *server, n int) error {
	db, err := openDB(s.dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	var events, jobs int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM jobs)`).Scan(&events, &jobs); err != nil {
		return fmt.Errorf("count events: %w", err)
	}
	if events == 0 || events%int64(n) != 0 || jobs != events {
		return fmt.Errorf("%d events with %d jobs; want a multiple of %d, one job each", events, jobs, n)
	}
	return nil
}

// evaluateBatch adds the target: 100-event requests record at
// least 5x the events/s of 1-event requests, their p99 at most 3x.
func (r *report) evaluateBatch(add func(targetCheck)) {
	if r.Batch == nil || len(r.Batch.Sizes) == 0 {
		return
	}
	s := r.Batch.Sizes[len(r.Batch.Sizes)-1]
	add(targetCheck{Name: fmt.Sprintf("events/s of %d-event requests (WhatsApp, meta), ratio to 1-event", s.Events), Value: s.EventsRatio,
		Target: ">= 5", Met: s.EventsRatio >= 5, Note: fmt.Sprintf("rounds %v", s.RoundEvRatios)})
	add(targetCheck{Name: fmt.Sprintf("p99 per request of %d-event requests, ratio to 1-event", s.Events), Value: s.P99Ratio,
		Target: "<= 3", Met: s.P99Ratio > 0 && s.P99Ratio <= 3, Note: fmt.Sprintf("rounds %v", s.RoundP99)})
}

func (r *report) printBatch(w io.Writer) {
	if r.Batch == nil {
		return
	}
	fmt.Fprintf(w, "batch: %d conns, WhatsApp-shaped (meta):", r.Batch.Conns)
	for _, s := range r.Batch.Sizes {
		fmt.Fprintf(w, " %d/request %.0f events/s (x%.2f) p99 %.2f ms (x%.2f);", s.Events, s.EventsPerS, s.EventsRatio, s.P99, s.P99Ratio)
	}
	fmt.Fprintln(w)
}

// metaSignature is the X-Hub-Signature-256 value of body under secret
// (for tests).
func metaSignature(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
