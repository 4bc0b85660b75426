// Package storetest is the conformance suite of Hookwarden's store: every
// promise the rest of the program relies on, checked through the store's
// methods alone, so that each implementation (sqlitestore and
// pgstore) is held to the same contract by the same tests.
//
// An implementation's own test calls Run with a Harness that opens fresh
// stores of its kind:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{Open: ..., OpenCopy: ...})
//	}
//
// Each promise is a subtest with its own fresh store and its own clock, so
// subtests run in parallel and any one can be run alone with -run.
package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// Store is the contract every store implements; the suite checks the
// promises behind it.
type Store = hookwarden.Store

// Harness is how the suite opens stores of one implementation.
type Harness struct {
	// Open returns a fresh, empty store that reads the time from now
	// wherever it would read its own clock (leases, due times, retention
	// cutoffs, runs, stats), and closes it when t ends. Required.
	//
	// Receipts carry their own ReceivedAt, also from now. A store that
	// takes the time from its database server (PostgreSQL) passes now
	// as a statement parameter in place of now() under test.
	Open func(t *testing.T, now func() time.Time) Store
	// OpenCopy opens, read-only, the file (or target) a Backup of the store
	// wrote at path, the way the --db commands open it, with the same
	// clock, and closes it when t ends. Nil skips the backup subtest.
	OpenCopy func(t *testing.T, path string, now func() time.Time) Store
	// RefuseJobs makes every write that creates a job fail inside its
	// transaction (a trigger, say) until the returned func is called: the
	// direct hand-over must then give its reserved slots back. Nil skips
	// that subtest.
	RefuseJobs func(t *testing.T, s Store) (restore func())
	// FullCount counts by reading every row, not the counters, what Stats
	// (its ages measured at now) and Hourly (hours with traffic, per
	// source) must say: the suite compares them after each kind of write.
	// A store that deletes rows keeps what they counted its own way (in
	// pruned_totals, say), and FullCount adds that. Nil skips the subtest.
	FullCount func(t *testing.T, s Store, now time.Time) (Stats, map[string][]HourCount)
	// FillHistory writes h into s, empty, through the store's bulk path
	// (the benchmark's history phase). Nil skips that subtest.
	FillHistory func(t *testing.T, s Store, h hookwarden.History) error
}

// Run runs every check of the contract against stores opened by h.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is required")
	}
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"ClaimOnceAmong64Doubles", testClaimOnce},
		{"BatchEvents", testBatch},
		{"EnvelopeEvents", testEnvelopeEvents},
		{"EnvelopeConcurrent", testEnvelopeConcurrent},
		{"EnvelopeMixed", testEnvelopeMixed},
		{"DivergentDuplicates", testDivergent},
		{"SeenTokens", testSeenTokens},
		{"Quarantine/NoEventID", testQuarantineNoID},
		{"Quarantine/BodyReplayed", testBodyReplayed},
		{"Quarantine/ConcurrentBodyReplays", testConcurrentBodyReplays},
		{"Quarantine/Release", testRelease},
		{"Quarantine/Drop", testDrop},
		{"Lease/MaxAndDue", testLeaseMax},
		{"Lease/ExpiryAndStaleFinish", testLeaseExpiry},
		{"Lease/FinishAndLease", testFinishAndLease},
		{"Lease/Unlease", testUnlease},
		{"Lease/ReleaseLeases", testReleaseLeases},
		{"Direct/HandOver", testDirectHandOver},
		{"Direct/ReleaseOnFailedCommit", testDirectRelease},
		{"Flow/ManualPause", testManualPause},
		{"Flow/DestinationCounts", testDestinationCounts},
		{"Flow/AutoPause", testAutoPause},
		{"Flow/Rate", testRate},
		{"Flow/Order", testOrder},
		{"Flow/OrderReplay", testOrderReplay},
		{"Flow/NoDirect", testFlowNoDirect},
		{"Replay/Rules", testReplay},
		{"Replay/ThreeStrikes", testThreeStrikes},
		{"Retention/Payloads", testRetentionPayloads},
		{"Retention/Claims", testRetentionClaims},
		{"Retention/ClaimsBySource", testRetentionClaimsBySource},
		{"Retention/Quarantine", testRetentionQuarantine},
		{"Gaps/CrashWindow", testGapsCrash},
		{"Gaps/CleanRestart", testGapsClean},
		{"Gaps/LiveRun", testGapsLiveRun},
		{"Gaps/Silences", testSilences},
		{"Gaps/Unavailable", testGapsUnavailable},
		{"Gaps/SequenceHoles", testSequenceHoles},
		{"Gaps/SequenceConcurrent", testSequenceConcurrent},
		{"Gaps/LateArrivals", testLateArrivals},
		{"ListEvents", testListEvents},
		{"ListEvents/Filters", testListFilters},
		{"Stats", testStats},
		{"Stats/Refusals", testStatsRefusals},
		{"Counters/Honest", testCountersHonest},
		{"Inspect/ShowEvent", testShowEvent},
		{"Inspect/ShowBatchElement", testShowBatchElement},
		{"Inspect/ListDead", testListDead},
		{"Inspect/RecentCounts", testRecentCounts},
		{"Inspect/RecentCountsOffTheHour", testRecentCountsOffTheHour},
		{"Inspect/QuarantinePages", testQuarantinePages},
		{"BackupReadable", testBackup},
		{"Health/LastWrite", testHealth},
		{"Backfill/Recorded", testBackfillRecorded},
		{"Backfill/Runs", testBackfillRuns},
		{"FillHistory", testFillHistory},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, h)
		})
	}
}

// Clock is the suite's clock, moved by hand. It starts on a whole second
// so that every store's time encoding keeps it exactly.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock forward.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixture is one subtest's store, clock and helpers.
type fixture struct {
	t     *testing.T
	h     Harness
	s     Store
	clock *Clock
	ctx   context.Context
}

func setup(t *testing.T, h Harness) *fixture {
	t.Helper()
	c := &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	s := h.Open(t, c.Now)
	if s == nil {
		t.Fatal("Harness.Open returned nil")
	}
	return &fixture{t: t, h: h, s: s, clock: c, ctx: context.Background()}
}

// receipt is one request of source carrying event id (none: no event id
// found) with body, received now, for the destinations given.
func (f *fixture) receipt(source, id, body string, dests ...string) *hookwarden.Receipt {
	sum := sha256.Sum256([]byte(body))
	r := &hookwarden.Receipt{
		Source:     source,
		Header:     http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id}},
		Body:       []byte(body),
		BodySHA256: sum,
		RemoteAddr: "127.0.0.1:5555",
		ReceivedAt: f.clock.Now(),
	}
	if id != "" {
		r.Events = []hookwarden.Event{{ID: id, Type: "t.created", BodySHA256: sum, Destinations: dests}}
	} else {
		r.QuarantineReason = "no event id at json:id"
	}
	return r
}

// keyed is a receipt of a source whose signature does not cover its event
// id (github): the store checks the body against the ids claimed before.
func (f *fixture) keyed(id, body string, dests ...string) *hookwarden.Receipt {
	r := f.receipt("gh", id, body, dests...)
	r.BodyReplayCheck = true
	return r
}

// batch is a SendGrid-style request: one event per element, each with its
// own bytes, for dest.
func (f *fixture) batch(source, dest string, elements ...[2]string) *hookwarden.Receipt {
	r := f.receipt(source, "", "[batch]")
	r.QuarantineReason = ""
	for _, el := range elements {
		b := []byte(el[1])
		r.Events = append(r.Events, hookwarden.Event{ID: el[0], Type: "delivered", Body: b, BodySHA256: sha256.Sum256(b),
			Destinations: []string{dest}})
	}
	return r
}

// element is a batch element whose bytes name its id.
func element(id string) [2]string { return [2]string{id, fmt.Sprintf(`{"sg_event_id":%q}`, id)} }

func (f *fixture) mustRecord(r *hookwarden.Receipt) hookwarden.RecordResult {
	f.t.Helper()
	res, err := f.s.Record(f.ctx, r)
	if err != nil {
		f.t.Fatalf("record %s %v: %v", r.Source, eventIDs(r), err)
	}
	return res
}

func eventIDs(r *hookwarden.Receipt) []string {
	var ids []string
	for _, e := range r.Events {
		ids = append(ids, e.ID)
	}
	return ids
}

// record records one event of source, received now.
func (f *fixture) record(source, id, body string, dests ...string) hookwarden.RecordResult {
	f.t.Helper()
	return f.mustRecord(f.receipt(source, id, body, dests...))
}

func (f *fixture) lease(dest string, max int, leaseFor time.Duration) []hookwarden.Job {
	f.t.Helper()
	jobs, err := f.s.Lease(f.ctx, dest, max, leaseFor)
	if err != nil {
		f.t.Fatalf("lease %s: %v", dest, err)
	}
	return jobs
}

// attempt is the record of an attempt of j with verdict v, now.
func (f *fixture) attempt(j hookwarden.Job, v hookwarden.Verdict) hookwarden.Attempt {
	a := hookwarden.Attempt{JobID: j.ID, Number: j.Attempt, StartedAt: f.clock.Now(), Duration: time.Millisecond,
		ExitCode: -1, Verdict: v}
	switch v {
	case hookwarden.Delivered:
		a.StatusCode = 200
	case hookwarden.Dead:
		a.StatusCode, a.Error = 422, "unprocessable"
	case hookwarden.Retry:
		a.StatusCode, a.Error, a.RetryAt = 503, "HTTP 503", f.clock.Now()
	}
	return a
}

func (f *fixture) finishJob(a hookwarden.Attempt) {
	f.t.Helper()
	if err := f.s.Finish(f.ctx, a); err != nil {
		f.t.Fatalf("finish job %d: %v", a.JobID, err)
	}
}

// finish leases every due job of dest and applies v to the one of event
// id; the others are retried, due now.
func (f *fixture) finish(dest, id string, v hookwarden.Verdict) {
	f.t.Helper()
	found := false
	for _, j := range f.lease(dest, 1000, time.Minute) {
		a := f.attempt(j, hookwarden.Retry)
		if j.EventID == id {
			found = true
			a = f.attempt(j, v)
		}
		f.finishJob(a)
	}
	if !found {
		f.t.Fatalf("no due job of %s for %s", id, dest)
	}
}

func (f *fixture) show(source, id string) *EventDetail {
	f.t.Helper()
	d, err := f.s.ShowEvent(f.ctx, source, id)
	if err != nil {
		f.t.Fatalf("show event %s/%s: %v", source, id, err)
	}
	return d
}

func (f *fixture) stats(sources, dests []string) Stats {
	f.t.Helper()
	st, err := f.s.Stats(f.ctx, sources, dests)
	if err != nil {
		f.t.Fatalf("stats: %v", err)
	}
	return st
}

// statsText renders stats without their clock, to compare two readings.
func (f *fixture) statsText() string {
	f.t.Helper()
	st := f.stats(nil, nil)
	st.At = time.Time{}
	return fmt.Sprintf("%+v", st)
}

func (f *fixture) prune(opt PruneOptions) PruneResult {
	f.t.Helper()
	res, err := f.s.Prune(f.ctx, opt)
	if err != nil {
		f.t.Fatalf("prune: %v", err)
	}
	return res
}

func (f *fixture) replay(sel ReplaySelector, opt ReplayOptions) ReplayResult {
	f.t.Helper()
	res, err := f.s.Replay(f.ctx, sel, opt)
	if err != nil {
		f.t.Fatalf("replay %+v: %v", sel, err)
	}
	return res
}

func (f *fixture) held(source string) []Held {
	f.t.Helper()
	items, _, err := f.s.ListQuarantine(f.ctx, QuarantineFilter{Source: source})
	if err != nil {
		f.t.Fatalf("list quarantine: %v", err)
	}
	return items
}

// jobOf is the job of event source/id for dest, as ShowEvent lists it.
func (f *fixture) jobOf(source, id, dest string) JobInfo {
	f.t.Helper()
	for _, j := range f.show(source, id).JobLog {
		if j.Destination == dest {
			return j
		}
	}
	f.t.Fatalf("event %s/%s has no job for %s", source, id, dest)
	return JobInfo{}
}

// skips renders a replay's skips as "event:reason" for comparison.
func skips(res ReplayResult) string {
	var out []string
	for _, k := range res.Skipped {
		what := k.EventID
		if k.JobID != 0 && k.EventID == "" {
			what = fmt.Sprint("job", k.JobID)
		}
		out = append(out, what+":"+k.Reason)
	}
	return fmt.Sprint(out)
}

// cliAudit is the operator action the suite records with its writes.
func cliAudit() *hookwarden.AuditEntry {
	return &hookwarden.AuditEntry{Origin: hookwarden.AuditCLI, Actor: "storetest"}
}
