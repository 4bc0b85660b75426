package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// TestClaimFilter: every key added as the index spells it is held when
// asked by source and id (two ways to hash one key); of keys never added,
// about one in a hundred is a "maybe" at the size the filter was made for.
func TestClaimFilter(t *testing.T) {
	f := newClaimFilter(100_000) // sized for filterMinKeys
	n := int(f.size)
	for i := range n {
		f.addKey(claimKeyOf("github", uuidLike(i)))
	}
	for i := range n {
		if !f.mayHold("github", uuidLike(i)) {
			t.Fatalf("key %d was added but the filter says it is not there", i)
		}
	}
	maybe := 0
	for i := n; i < 2*n; i++ {
		if f.mayHold("github", uuidLike(i)) {
			maybe++
		}
	}
	if rate := float64(maybe) / float64(n); rate > 0.025 || rate < 0.002 {
		t.Errorf("%.4f of keys never added are a maybe, want about 0.01", rate)
	}
	// The source is part of the key.
	if f.mayHold("shopify", uuidLike(1)) && f.mayHold("shopify", uuidLike(2)) && f.mayHold("shopify", uuidLike(3)) {
		t.Error("another source's ids are held too")
	}
	if f.full() {
		t.Error("full at its size")
	}
	// A build's reader and the writer add to one filter at once.
	g := newClaimFilter(0)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < 20000; i += 2 {
				g.addKey(claimKeyOf("github", uuidLike(i)))
			}
		})
	}
	wg.Wait()
	for i := range 20000 {
		if !g.mayHold("github", uuidLike(i)) {
			t.Fatalf("key %d added concurrently is lost", i)
		}
	}
}

var errNoFilter = errors.New("no claims filter installed yet")

// filterCheck runs in the writer: errNoFilter until a filter is installed,
// then, after the writer's catch-up with the log, an error naming any key
// of either level the filter says it never saw.
func filterCheck(s *Store) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		fs := &s.claims.filters
		if fs.cur == nil || fs.next != nil {
			return errNoFilter
		}
		if err := s.catchUp(ctx, tx); err != nil {
			return err
		}
		return eachRow(ctx, tx, `SELECT source, event_id FROM claims_log UNION ALL SELECT source, event_id FROM claims`, func(rows *sql.Rows) error {
			var source, id string
			if err := rows.Scan(&source, &id); err != nil {
				return err
			}
			if !fs.cur.mayHold(source, id) {
				return fmt.Errorf("the dedup memory holds %s/%s and the claims filter says it does not", source, id)
			}
			return nil
		})
	}
}

// WaitFilter waits until serve's writer (Options.Fold) has a claims filter
// installed and no build under way, and checks that it holds every key of
// both levels. The conformance suite calls it after each operation.
func WaitFilter(t testing.TB, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.write(context.Background(), true, filterCheck(s))
		if !errors.Is(err, errNoFilter) {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no claims filter installed after 10 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// filterNow reads the writer's filter state, in the writer.
func filterNow(t *testing.T, s *Store) (cur, next *claimFilter) {
	t.Helper()
	if err := s.write(context.Background(), true, func(context.Context, *sql.Tx) error {
		cur, next = s.claims.filters.cur, s.claims.filters.next
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return cur, next
}

// TestFilterHoldsClaimsFoldedDuringItsBuild: a build reads claims range by
// range while the writer goes on claiming and folding; once installed the
// filter holds every key of both levels, those folded after the build read
// their range too, and a copy of every claim is still a duplicate.
func TestFilterHoldsClaimsFoldedDuringItsBuild(t *testing.T) {
	s := MustOpen(t, Options{Fold: true, FoldMin: 8, FoldChunk: 4})
	ctx := context.Background()
	record := func(lo, hi int, want hookwarden.Outcome) {
		t.Helper()
		var wg sync.WaitGroup
		for i := lo; i < hi; i++ {
			wg.Go(func() {
				res, err := s.Record(ctx, receipt("github", uuidLike(i), `{}`, "gh/app"))
				if err != nil || res.Outcome != want {
					t.Errorf("record %d: %v, %v; want %v", i, res.Outcome, err, want)
				}
			})
		}
		wg.Wait()
	}
	WaitFilter(t, s)
	record(0, 200, hookwarden.Accepted)
	WaitFilter(t, s)

	// A new build, held after its first range while 300 more claims come
	// and the writer folds some of them.
	hold := make(chan struct{})
	if err := s.write(ctx, true, func(context.Context, *sql.Tx) error {
		s.claims.filters.hold = hold
		s.forgetFilter() // the next build starts after this commit
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, next := filterNow(t, s); next == nil {
		t.Fatal("no build under way after the filter was thrown away")
	}
	var folded0 int
	if err := s.DB().QueryRow(`SELECT count(*) FROM claims`).Scan(&folded0); err != nil {
		t.Fatal(err)
	}
	record(200, 500, hookwarden.Accepted)
	var folded1 int
	if err := s.DB().QueryRow(`SELECT count(*) FROM claims`).Scan(&folded1); err != nil {
		t.Fatal(err)
	}
	if folded1 <= folded0 {
		t.Fatalf("no claim folded during the build (claims held %d at its start, %d at its end)", folded0, folded1)
	}
	close(hold)
	WaitFilter(t, s)
	record(0, 500, hookwarden.Duplicate)
	record(500, 600, hookwarden.Accepted)
	WaitFilter(t, s)
	CheckDedupMemory(t, s.DB())
}

// TestFilterSkipsTheLookUps: with the filter installed, a new id does not
// look in claims: the claims filter is what tells it is new. A key put
// into claims behind the writer's back (as no code path does) is then not
// seen, which shows the look-up was skipped; once the filter is built
// anew, it is.
func TestFilterSkipsTheLookUps(t *testing.T) {
	s := MustOpen(t, Options{Fold: true})
	ctx := context.Background()
	WaitFilter(t, s)
	res, err := s.Record(ctx, receipt("github", "first", `{}`, "gh/app"))
	if err != nil || res.Outcome != hookwarden.Accepted {
		t.Fatal(res.Outcome, err)
	}
	var ref int64
	if err := s.DB().QueryRow(`SELECT id FROM events WHERE event_id = 'first'`).Scan(&ref); err != nil {
		t.Fatal(err)
	}
	// "hidden" claims the same events row, in claims only.
	if err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO claims (source, event_id, event_ref) VALUES ('github', 'hidden', ?)`, ref)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err = s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.catchUp(ctx, tx); err != nil {
			return err
		}
		if !s.claims.absent("github", "hidden") {
			return errors.New("the filter holds a key it was never given")
		}
		if s.claims.absent("github", "first") {
			return errors.New("the filter does not hold a claimed key")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Built anew: the build reads claims.
	if err := s.write(ctx, true, func(context.Context, *sql.Tx) error {
		s.forgetFilter()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	WaitFilter(t, s)
	if err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		if s.claims.absent("github", "hidden") {
			return errors.New("a new build did not read claims")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryClaimsStayDuplicates: FillHistory moves most of its claims
// into claims outside the fold; the filter is then built anew, and a copy
// of any history claim, folded or recent, is a duplicate.
func TestHistoryClaimsStayDuplicates(t *testing.T) {
	s := MustOpen(t, Options{Fold: true, FoldMin: 16})
	ctx := context.Background()
	WaitFilter(t, s)
	const n = 20000
	if err := s.FillHistory(ctx, hookwarden.History{Claims: n, Payloads: 2000, Source: "bench", Body: 16}, nil); err != nil {
		t.Fatal(err)
	}
	WaitFilter(t, s)
	for i := 1; i <= n; i += 97 {
		source := "bench"
		switch {
		case i%1000 == 0:
			source = "rare"
		case i%4 == 1:
			source = "other"
		}
		id := fmt.Sprintf("%08x-%d", (int64(i)*2654435761)%4294967291, i)
		res, err := s.Record(ctx, receipt(source, id, `{}`, "bench/app"))
		if err != nil || res.Outcome != hookwarden.Duplicate {
			t.Fatalf("copy of history claim %d (%s/%s): %v, %v; want a duplicate", i, source, id, res.Outcome, err)
		}
	}
}

// keptFilters counts the filters the file at path keeps: complete headers
// (one being kept has parts -1).
func keptFilters(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM claims_filter WHERE parts >= 0`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitKept waits until the file at path keeps a filter (its header), as
// serve's idle writer writes it.
func waitKept(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for keptFilters(t, path) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the idle writer kept no claims filter in the file within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFilterKeptAcrossACleanStop: serve's Close keeps the filter and the
// next serve reads it at Open, installed before the first request with no
// build; it holds the claims a process that does not fold made while serve
// was stopped (they are in the log), and the row stays while serve runs.
func TestFilterKeptAcrossACleanStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	open := func(fold bool) *Store {
		t.Helper()
		s, err := Open(ctx, path, Options{Fold: fold, FoldMin: 8, FoldChunk: 4})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	record := func(s *Store, lo, hi int, want hookwarden.Outcome) {
		t.Helper()
		for i := lo; i < hi; i++ {
			res, err := s.Record(ctx, receipt("github", uuidLike(i), `{}`, "gh/app"))
			if err != nil || res.Outcome != want {
				t.Fatalf("record %d: %v, %v; want %v", i, res.Outcome, err, want)
			}
		}
	}
	s := open(true)
	if need, _ := s.WarmUpNeeded(); !need {
		t.Error("serve's first start, with no kept filter, skips the claim index's warm-up")
	}
	WaitFilter(t, s)
	record(s, 0, 300, hookwarden.Accepted)
	WaitFilter(t, s)
	var folded int
	if err := s.DB().QueryRow(`SELECT count(*) FROM claims`).Scan(&folded); err != nil || folded == 0 {
		t.Fatalf("%d claims folded (%v): the test needs some in claims", folded, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := keptFilters(t, path); n != 1 {
		t.Fatalf("%d filters kept after a clean stop, want 1", n)
	}

	// A command that does not fold claims while serve is stopped.
	c := open(false)
	record(c, 300, 350, hookwarden.Accepted)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := keptFilters(t, path); n != 1 {
		t.Fatalf("a command that does not fold changed the kept filter: %d rows", n)
	}

	s = open(true)
	defer s.Close()
	// In memory: the log's rows but those of the generation being folded
	// that are in claims already (keys up to the fold's cursor).
	var logRows int
	if err := s.DB().QueryRow(`SELECT count(*) FROM claims_log l, claim_fold f
		WHERE l.seq > f.gen_max OR (l.source, l.event_id) > (f.source, f.event_id)`).Scan(&logRows); err != nil {
		t.Fatal(err)
	}
	if got := s.ClaimsInMemory(); got != logRows || got == 0 {
		t.Errorf("after the restart %d claims in memory, want the log's %d not yet folded", got, logRows)
	}
	if cur, next := filterNow(t, s); cur == nil || next != nil {
		t.Fatalf("after a clean stop, serve starts with filter %v and build %v; want the kept one and no build", cur != nil, next != nil)
	}
	if need, why := s.WarmUpNeeded(); need || why == "" {
		t.Errorf("with the kept filter, WarmUpNeeded = %v %q; want no warm-up, and why", need, why)
	}
	if n := keptFilters(t, path); n != 1 {
		t.Fatalf("serve's start took the kept filter out of the file (%d rows): a crash would leave none", n)
	}
	WaitFilter(t, s) // every key of both levels, the command's too
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.catchUp(ctx, tx); err != nil {
			return err
		}
		for i := range 350 {
			if s.claims.absent("github", uuidLike(i)) {
				return fmt.Errorf("claim %d is missing from the kept filter", i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	record(s, 0, 350, hookwarden.Duplicate)
	record(s, 350, 400, hookwarden.Accepted)
	CheckDedupMemory(t, s.DB())
}

// TestFilterKeptAcrossACrash: serve's idle writer keeps its filter in the
// file, so a start after a crash reads it instead of building one. The
// fold of a generation claimed after the kept filter deletes it (its first
// insert into claims: a crash then leaves none, and the next start
// builds); so the idle writer keeps the filter again before it folds a
// generation, and that one survives the fold and a crash in the middle of
// it. After each crash the filter holds every key of both levels, and a
// copy of every claim is a duplicate.
func TestFilterKeptAcrossACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	open := func(idle time.Duration) *Store {
		t.Helper()
		s, err := Open(ctx, path, Options{Fold: true, FoldMin: 64, FoldChunk: 16, FoldIdle: idle})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	claimed := 0
	record := func(s *Store, n int) {
		t.Helper()
		for i := claimed; i < claimed+n; i++ {
			res, err := s.Record(ctx, receipt("github", uuidLike(i), `{}`, "gh/app"))
			if err != nil || res.Outcome != hookwarden.Accepted {
				t.Fatalf("record %d: %v, %v", i, res.Outcome, err)
			}
		}
		claimed += n
	}
	holdsAll := func(s *Store) {
		t.Helper()
		WaitFilter(t, s)
		for i := range claimed {
			res, err := s.Record(ctx, receipt("github", uuidLike(i), `{}`, "gh/app"))
			if err != nil || res.Outcome != hookwarden.Duplicate {
				t.Fatalf("copy of claim %d: %v, %v; want a duplicate", i, res.Outcome, err)
			}
		}
		CheckDedupMemory(t, s.DB())
	}
	loaded := func(s *Store, want bool) {
		t.Helper()
		if s.filterKept != want {
			t.Fatalf("after the crash, kept filter read at start: %v, want %v", s.filterKept, want)
		}
		if need, _ := s.WarmUpNeeded(); need == want {
			t.Fatalf("after the crash, WarmUpNeeded = %v with the kept filter read: %v", need, want)
		}
		if cur, next := filterNow(t, s); want && (cur == nil || next != nil) {
			t.Fatalf("after the crash, with the kept filter read: installed %v, build %v", cur != nil, next != nil)
		}
	}

	s := open(0)
	record(s, 40)
	WaitFilter(t, s)
	waitKept(t, path) // the first filter, kept while the writer is idle
	crash(t, s)

	// Quiet never lasts an hour: the fold takes steps beside the commits
	// only, once the log holds twice its limit, and the filter is not kept
	// again.
	s = open(time.Hour)
	loaded(s, true)
	record(s, 100) // past 128: a generation is cut and some of it folded
	var folded int
	if err := s.DB().QueryRow(`SELECT count(*) FROM claims`).Scan(&folded); err != nil || folded == 0 {
		t.Fatalf("%d claims folded (%v): the test needs a fold under way", folded, err)
	}
	if n := keptFilters(t, path); n != 0 {
		t.Fatalf("the fold's insert into claims left the kept filter (%d rows)", n)
	}
	crash(t, s)

	s = open(0)
	loaded(s, false) // nothing to trust: built
	holdsAll(s)
	waitFolded(t, s) // the generation (beside the build, when the fold comes first)
	waitKept(t, path)
	record(s, 30) // in the log, after the filter was kept
	crash(t, s)

	s = open(0)
	loaded(s, true)
	holdsAll(s)
	s.Close()

	// A crash while a generation is being folded, the filter kept before
	// it: one claim a fold step, a pause between steps.
	s, err := Open(ctx, path, Options{Fold: true, FoldMin: 64, FoldChunk: 1, FoldIdle: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	loaded(s, true)
	var before int
	if err := s.DB().QueryRow(`SELECT count(*) FROM claims`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	record(s, 40) // the log past 64: a generation is cut
	deadline := time.Now().Add(10 * time.Second)
	for {
		var covering, folded int
		var genMax int64
		if err := s.DB().QueryRow(`SELECT (SELECT count(*) FROM claims_filter f, claim_fold g WHERE f.parts > 0 AND f.log_seq >= g.gen_max),
			(SELECT count(*) FROM claims), (SELECT gen_max FROM claim_fold)`).Scan(&covering, &folded, &genMax); err != nil {
			t.Fatal(err)
		}
		if genMax > 0 && covering == 1 && folded > before {
			break // kept for the generation, and some of it folded
		}
		if genMax == 0 || time.Now().After(deadline) {
			t.Fatalf("no fold under way with a filter kept for it: generation %d, %d covering, %d claims folded", genMax, covering, folded-before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	crash(t, s)

	s = open(0)
	defer s.Close()
	loaded(s, true)
	holdsAll(s)
}

// crash closes s as a crash leaves the file: the filter is not written at
// the stop.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.testCrash = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitFolded waits until no generation is being folded.
func waitFolded(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var genMax int64
		if err := s.DB().QueryRow(`SELECT gen_max FROM claim_fold`).Scan(&genMax); err != nil {
			t.Fatal(err)
		}
		if genMax == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("generation %d still being folded after 10 s", genMax)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFilterKeptAnewAfterAFoldDuringIt: a generation folded while the
// writer was keeping the filter part by part makes it start again from the
// first part, as the parts written before may lack the keys the fold
// moved; what a crash leaves then holds every claim.
func TestFilterKeptAnewAfterAFoldDuringIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	// 160 parts of 256 blocks.
	opts := Options{Fold: true, FoldMin: 64, FoldChunk: 16, partBlocks: 256}
	s, err := Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	WaitFilter(t, s)
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var parts int
		err := db.QueryRow(`SELECT count(*) FROM claims_filter_parts WHERE (SELECT parts FROM claims_filter) = -1`).Scan(&parts)
		if err != nil {
			t.Fatal(err)
		}
		if parts >= 40 {
			break // a quarter written
		}
		if time.Now().After(deadline) {
			t.Fatalf("the writer did not keep 40 parts of the filter within 10 s (%d)", parts)
		}
		time.Sleep(time.Millisecond)
	}
	const n = 400
	for i := range n {
		res, err := s.Record(ctx, receipt("github", uuidLike(i), `{}`, "gh/app"))
		if err != nil || res.Outcome != hookwarden.Accepted {
			t.Fatalf("record %d: %v, %v", i, res.Outcome, err)
		}
	}
	waitKept(t, path)
	var folded int
	if err := db.QueryRow(`SELECT count(*) FROM claims`).Scan(&folded); err != nil || folded == 0 {
		t.Fatalf("%d claims folded (%v): the test needs a fold", folded, err)
	}
	crash(t, s)
	s, err = Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.filterKept {
		t.Fatal("no kept filter read after the crash")
	}
	for i := range n {
		res, err := s.Record(ctx, receipt("github", uuidLike(i), `{}`, "gh/app"))
		if err != nil || res.Outcome != hookwarden.Duplicate {
			t.Fatalf("copy of claim %d after the crash: %v, %v; want a duplicate", i, res.Outcome, err)
		}
	}
}

// TestFilterKeptInlineStillRead: a filter kept as schemas 17 and 18 wrote
// it (its bits in the one row) is read after the step to schema 19.
func TestFilterKeptInlineStillRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	s, err := Open(ctx, path, Options{Fold: true})
	if err != nil {
		t.Fatal(err)
	}
	WaitFilter(t, s)
	res, err := s.Record(ctx, receipt("github", "first", `{}`, "gh/app"))
	if err != nil || res.Outcome != hookwarden.Accepted {
		t.Fatal(res.Outcome, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	schema18Filter(t, path)
	execRaw(t, path, `ALTER TABLE events DROP COLUMN derived`, `PRAGMA user_version = 18`) // and schema 20's (22's and 21's went in schema18Filter)

	s, err = Open(ctx, path, Options{Fold: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cur, next := filterNow(t, s); cur == nil || next != nil || !s.filterKept {
		t.Fatalf("an inline kept filter: installed %v, build %v; want it read, no build", cur != nil, next != nil)
	}
	if res, err := s.Record(ctx, receipt("github", "first", `{}`, "gh/app")); err != nil || res.Outcome != hookwarden.Duplicate {
		t.Fatal(res.Outcome, err)
	}
}

// schema18Filter turns the claims filter's tables of the file at path back
// into schemas 17's and 18's: one row, its bits inline (the complete kept
// filter's, if any), and the trigger that deletes it on every insert into
// claims.
func schema18Filter(t *testing.T, path string) {
	t.Helper()
	execRaw(t, path, schema22Undo...) // schema 22's first
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var raw []byte
	var hash string
	var size, keys int64
	err = db.QueryRow(`SELECT hash, size, keys FROM claims_filter WHERE parts > 0`).Scan(&hash, &size, &keys)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	if found {
		rows, err := db.Query(`SELECT p.bits FROM claims_filter_parts p JOIN claims_filter f USING (slot) WHERE f.parts > 0 ORDER BY p.part`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			raw = append(raw, b...)
		}
		rows.Close()
	}
	for _, q := range []string{
		`DROP TABLE IF EXISTS refusal_hours`,       // schema 23's
		`DROP TABLE IF EXISTS unavailable_minutes`, // schema 21's
		`DROP TRIGGER claims_filter_stale`, `DROP TABLE claims_filter_parts`, `DROP TABLE claims_filter`,
		`CREATE TABLE claims_filter (id INTEGER PRIMARY KEY CHECK (id = 1), hash TEXT NOT NULL, size INTEGER NOT NULL,
			keys INTEGER NOT NULL, bits BLOB NOT NULL) STRICT`,
		`CREATE TRIGGER claims_filter_stale AFTER INSERT ON claims BEGIN DELETE FROM claims_filter; END`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if found {
		if _, err := db.Exec(`INSERT INTO claims_filter (id, hash, size, keys, bits) VALUES (1, ?, ?, ?, ?)`, hash, size, keys, raw); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeptFilterNotTrustedAfterClaimsChanged: a key put into claims while
// serve is stopped (any insert but serve's own fold) deletes the kept
// filter, and so does nothing else but serve's start; a row this build
// cannot read is set aside. Either way serve builds a filter that holds
// the key.
func TestKeptFilterNotTrustedAfterClaimsChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	start := func() *Store {
		t.Helper()
		s, err := Open(ctx, path, Options{Fold: true})
		if err != nil {
			t.Fatal(err)
		}
		WaitFilter(t, s)
		return s
	}
	s := start()
	res, err := s.Record(ctx, receipt("github", "first", `{}`, "gh/app"))
	if err != nil || res.Outcome != hookwarden.Accepted {
		t.Fatal(res.Outcome, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	execRaw(t, path, `INSERT INTO claims (source, event_id, event_ref) SELECT 'github', 'hidden', id FROM events WHERE event_id = 'first'`)
	if n := keptFilters(t, path); n != 0 {
		t.Fatalf("an insert into claims left the kept filter (%d rows)", n)
	}
	s = start()
	held := func(id string) {
		t.Helper()
		if err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
			if s.claims.absent("github", id) {
				return fmt.Errorf("the filter says claims does not hold %s", id)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	held("hidden")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Bits of the wrong length (a part short, a part missing, inline bits
	// as schema 17 wrote them), then another hash's name: set aside.
	for _, q := range []string{
		`UPDATE claims_filter_parts SET bits = x'00' WHERE part = 1`,
		`DELETE FROM claims_filter_parts WHERE part = 2`,
		`UPDATE claims_filter SET parts = 0, bits = x'00'`,
		`UPDATE claims_filter SET hash = 'maphash'`,
	} {
		execRaw(t, path, q)
		s = start()
		held("hidden")
		held("first")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkFilterBuild: the CPU a build spends per claim of claims (its
// pace aside), from a store of 100,000 claims in the page cache.
func BenchmarkFilterBuild(b *testing.B) {
	s := MustOpen(b, Options{FoldMin: 1000}) // most claims folded
	ctx := context.Background()
	const n = 100_000
	if err := s.FillHistory(ctx, hookwarden.History{Claims: n, Payloads: 1000, Source: "bench", Body: 16}, nil); err != nil {
		b.Fatal(err)
	}
	var folded int
	if err := s.DB().QueryRow(`SELECT count(*) FROM claims`).Scan(&folded); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		f := newClaimFilter(2 * n)
		if err := s.fillFilter(ctx, f, nil, 0); err != nil {
			b.Fatal(err)
		}
		// A key that sets no new bit is not counted: rare at this fill.
		if k := f.keys.Load(); k > int64(folded) || k < int64(folded)*99/100 {
			b.Fatalf("%d keys read, claims holds %d", k, folded)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(folded), "ns/claim")
}

// BenchmarkKeepPart: what one idle step of the writer costs when it keeps
// the claims filter in the file: a part of 256 KiB written and committed
// (run in the writer's transaction, as the step runs in one of its own).
// The baseline, BenchmarkKeepPart/empty, commits the same transaction with
// no part: the step's own cost is the difference.
func BenchmarkKeepPart(b *testing.B) {
	for _, write := range []bool{false, true} {
		name := "empty"
		if write {
			name = "part"
		}
		b.Run(name, func(b *testing.B) {
			s := MustOpen(b, Options{Fold: true})
			WaitFilter(b, s)
			ctx := context.Background()
			f := s.claims.filters.cur
			per := s.partBlocks()
			n := f.parts(per)
			i := 0
			for b.Loop() {
				err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
					if !write {
						_, err := tx.ExecContext(ctx, `UPDATE claim_fold SET gen_max = gen_max`)
						return err
					}
					_, _, err := s.keepParts(ctx, tx, f, 0, 0, i%n, i%n+1)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
			if write {
				b.SetBytes(int64(per) * 32)
			}
		})
	}
}
