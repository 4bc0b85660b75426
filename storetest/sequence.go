package storetest

// Sequence holes (SPEC 12): a source's sequence values are kept as the
// receipts arrive, and gaps lists what is missing between them.

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// seqReceipt is a Telegram-shaped update of source "tg" with update_id v.
func (f *fixture) seqReceipt(v int64) *hookwarden.Receipt {
	r := f.receipt("tg", strconv.FormatInt(v, 10), fmt.Sprintf(`{"update_id":%d}`, v))
	r.Events[0].Seq = &hookwarden.Seq{Value: v, Reset: hookwarden.DefaultSequenceReset, Horizon: 24 * time.Hour}
	return r
}

var seqPolicy = []hookwarden.SourcePolicy{{Name: "tg", RetryHorizon: 24 * time.Hour, Sequence: true}}

// holes lists the holes gaps reports for "tg", as "from-to state" strings.
func (f *fixture) holes() []string {
	f.t.Helper()
	rep, err := hookwarden.GapsWithRecovery(f.ctx, f.s, hookwarden.GapOptions{Sources: seqPolicy})
	if err != nil {
		f.t.Fatalf("gaps: %v", err)
	}
	out := []string{}
	for _, h := range rep.SequenceHoles {
		if h.Kind != "sequence_hole" || h.Source != "tg" || h.Missing != h.ToSeq-h.FromSeq+1 {
			f.t.Errorf("hole %+v: want kind sequence_hole, source tg, missing = to - from + 1", h)
		}
		out = append(out, fmt.Sprintf("%d-%d %s", h.FromSeq, h.ToSeq, h.State))
	}
	return out
}

// testSequenceHoles: 1000, 1001, 1003, 1006 leave two holes, with the
// receipt times either side; 1002 arriving late fills one; a duplicate
// changes nothing; a reset to a random id (backwards, or forwards beyond
// sequence_reset) starts an epoch and no hole; holes older than the retry
// horizon are lost.
func testSequenceHoles(t *testing.T, h Harness) {
	f := setup(t, h)
	t0 := f.clock.Now()
	for _, v := range []int64{1000, 1001, 1003, 1006} {
		f.mustRecord(f.seqReceipt(v))
		f.clock.Add(time.Second)
	}
	if got := fmt.Sprint(f.holes()); got != "[1002-1002 may_still_arrive 1004-1005 may_still_arrive]" {
		t.Fatalf("holes after 1000 1001 1003 1006: %s, want 1002 and 1004-1005", got)
	}
	rep, err := hookwarden.GapsWithRecovery(f.ctx, f.s, hookwarden.GapOptions{Sources: seqPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if hl := rep.SequenceHoles[1]; !hl.Between.From.Equal(t0.Add(2*time.Second)) || !hl.Between.To.Equal(t0.Add(3*time.Second)) || hl.Missing != 2 {
		t.Errorf("hole 1004-1005 %+v: want between the receipts of 1003 (+2s) and 1006 (+3s), 2 missing", hl)
	}
	f.mustRecord(f.seqReceipt(1002)) // a late retry
	if res := f.mustRecord(f.seqReceipt(1002)); res.Outcome != hookwarden.Duplicate {
		t.Fatalf("1002 again: %s, want duplicate", res.Outcome)
	}
	if got := fmt.Sprint(f.holes()); got != "[1004-1005 may_still_arrive]" {
		t.Fatalf("holes after 1002 arrived: %s, want 1004-1005 only", got)
	}
	f.mustRecord(f.seqReceipt(1004))
	f.mustRecord(f.seqReceipt(1005))
	if got := f.holes(); len(got) != 0 {
		t.Fatalf("holes after 1004 and 1005: %v, want none", got)
	}
	f.mustRecord(f.seqReceipt(1008))
	// A week later the bot's ids were re-randomised: forwards far, then
	// (another week) backwards: each a new epoch.
	f.clock.Add(8 * 24 * time.Hour)
	base := 50_000_000 + rand.Int64N(1_000_000_000)
	for _, v := range []int64{base, base + 2} {
		f.mustRecord(f.seqReceipt(v))
	}
	f.clock.Add(8 * 24 * time.Hour)
	for _, v := range []int64{500, 501, 503} {
		f.mustRecord(f.seqReceipt(v))
	}
	want := fmt.Sprintf("[1007-1007 lost %d-%d lost 502-502 may_still_arrive]", base+1, base+1)
	if got := fmt.Sprint(f.holes()); got != want {
		t.Fatalf("holes over three epochs: %s, want %s (old ones lost, no hole across a reset)", got, want)
	}
	// Out of order at an epoch's start: 498 just below 500, within the
	// retry horizon of the epoch's first receipt, is the same epoch.
	f.mustRecord(f.seqReceipt(498))
	want = fmt.Sprintf("[1007-1007 lost %d-%d lost 499-499 may_still_arrive 502-502 may_still_arrive]", base+1, base+1)
	if got := fmt.Sprint(f.holes()); got != want {
		t.Fatalf("holes after 498: %s, want %s", got, want)
	}
}

// testSequenceConcurrent: values recorded at once from many goroutines, in
// no order, leave exactly the holes of the values never sent, whatever the
// interleaving (on a shared store, another instance's transactions are
// such concurrent calls).
func testSequenceConcurrent(t *testing.T, h Harness) {
	f := setup(t, h)
	const n = 300
	var vals []int64
	for v := int64(1); v <= n; v++ {
		if v%50 != 0 { // 50, 100, ... never arrive
			vals = append(vals, 10_000+v)
		}
	}
	rand.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	// Whichever value comes first starts the epoch; lower ones then arrive
	// within the retry horizon of its start and extend it downwards.
	var wg sync.WaitGroup
	errs := make(chan error, len(vals))
	next := make(chan int64)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range next {
				if _, err := f.s.Record(f.ctx, f.seqReceipt(v)); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, v := range vals {
		next <- v
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want []string
	for v := int64(50); v < n; v += 50 {
		want = append(want, fmt.Sprintf("%d-%d may_still_arrive", 10_000+v, 10_000+v))
	}
	if got, w := fmt.Sprint(f.holes()), fmt.Sprint(want); got != w {
		t.Fatalf("holes after concurrent out-of-order receipts: %s, want %s", got, w)
	}
}
