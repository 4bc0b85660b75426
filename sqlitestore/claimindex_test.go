package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// record records one claim of id in s and returns its outcome.
func record(t *testing.T, s *Store, id string) hookwarden.Outcome {
	t.Helper()
	res, err := s.Record(context.Background(), receipt("github", id, fmt.Sprintf(`{"id":%q}`, id)))
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	return res.Outcome
}

// TestClaimIndexSeesOtherProcesses: serve's index of the claims log learns
// what another process (a backfill or a quarantine release from the
// command line) claims in the same file: serve's next claim of it is a
// duplicate, and its readers find it before serve claims anything; the
// other process, in turn, sees serve's claims, in the log, in a generation
// being folded and in claims.
func TestClaimIndexSeesOtherProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	serve, err := Open(ctx, path, Options{Fold: true, FoldMin: 8, FoldChunk: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer serve.Close()
	WaitFilter(t, serve) // serve's new claims go through its claims filter
	for i := range 40 {
		if o := record(t, serve, uuidLike(i)); o != hookwarden.Accepted {
			t.Fatalf("serve: %s: %v", uuidLike(i), o)
		}
	}
	var gen int64
	if err := serve.DB().QueryRow(`SELECT gen_max FROM claim_fold`).Scan(&gen); err != nil {
		t.Fatal(err)
	}
	_, folded, _, _ := levels(t, serve)
	if folded == 0 {
		t.Fatalf("nothing folded after 40 claims (generation %d)", gen)
	}

	cli, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := range 40 {
		if o := record(t, cli, uuidLike(i)); o != hookwarden.Duplicate {
			t.Fatalf("the other process: copy of %s: %v, want a duplicate", uuidLike(i), o)
		}
	}
	have, err := cli.Claimed(ctx, "github", []string{uuidLike(3), "nobody", uuidLike(39)})
	if err != nil || len(have) != 2 || !have[uuidLike(3)] || !have[uuidLike(39)] {
		t.Errorf("Claimed = %v, %v; want the two claimed ids", have, err)
	}
	for i := range 5 {
		id := fmt.Sprint("cli-", i)
		if o := record(t, cli, id); o != hookwarden.Accepted {
			t.Fatalf("the other process: %s: %v", id, o)
		}
		if d, err := serve.ShowEvent(ctx, "github", id); err != nil || d.EventID != id {
			t.Fatalf("serve reads %s before its next claim: %+v, %v", id, d, err)
		}
		if o := record(t, serve, id); o != hookwarden.Duplicate {
			t.Fatalf("serve: copy of the other process's %s: %v, want a duplicate", id, o)
		}
		// serve goes on folding; the other process keeps seeing its claims.
		for k := range 8 {
			if o := record(t, serve, fmt.Sprint("serve-", i, "-", k)); o != hookwarden.Accepted {
				t.Fatalf("serve: %v", o)
			}
		}
		if o := record(t, cli, fmt.Sprint("serve-", i, "-", 7)); o != hookwarden.Duplicate {
			t.Fatalf("the other process: copy of serve's claim: %v, want a duplicate", o)
		}
	}
	checkDedup(t, serve)
}

// TestNewestClaimDeletedSeqNotReused: retention in another process deletes
// every claim, the newest among them; the next claim of that process must
// still be past everything serve's index has read (the log's sequence is
// AUTOINCREMENT: a rowid would come back and serve would never read it),
// and serve's stale entries for the deleted claims must not make their
// ids duplicates.
func TestNewestClaimDeletedSeqNotReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	serve, err := Open(ctx, path, Options{Fold: true})
	if err != nil {
		t.Fatal(err)
	}
	defer serve.Close()
	for _, id := range []string{"a", "b", "c"} {
		if o := record(t, serve, id); o != hookwarden.Accepted {
			t.Fatalf("%s: %v", id, o)
		}
	}
	later := time.Now().Add(48 * time.Hour) // receipt's claims are received now
	cli, err := Open(ctx, path, Options{Now: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	res, err := cli.Prune(ctx, hookwarden.PruneOptions{Retention: hookwarden.Retention{Payloads: time.Hour, Claims: time.Hour}})
	if err != nil || res.EventsDeleted != 3 {
		t.Fatalf("prune: %+v, %v; want the 3 events gone", res, err)
	}
	if o := record(t, cli, "d"); o != hookwarden.Accepted {
		t.Fatalf("the other process: d: %v", o)
	}
	if o := record(t, serve, "d"); o != hookwarden.Duplicate {
		t.Errorf("serve: copy of d, claimed by the other process after retention deleted the newest claim: %v, want a duplicate", o)
	}
	for _, id := range []string{"a", "c"} {
		if o := record(t, serve, id); o != hookwarden.Accepted {
			t.Errorf("serve: %s again after retention forgot it: %v, want accepted", id, o)
		}
	}
	if _, err := serve.ShowEvent(ctx, "github", "b"); err == nil {
		t.Errorf("serve shows b, which retention deleted")
	}
	checkDedup(t, serve)
}

// TestFoldResumesAfterRestart: serve stopped in the middle of a
// generation's fold resumes it after the last key it folded, without
// folding a claim twice, and the generation leaves the log.
func TestFoldResumesAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	opts := Options{Fold: true, FoldMin: 64, FoldChunk: 4}
	s, err := Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	var gen int64
	var cursor string
	for ; i < 1000; i++ {
		record(t, s, uuidLike(i))
		if err := s.DB().QueryRow(`SELECT gen_max, event_id FROM claim_fold`).Scan(&gen, &cursor); err != nil {
			t.Fatal(err)
		}
		if gen > 0 && cursor != "" {
			break // folding, part way
		}
	}
	if gen == 0 || cursor == "" {
		t.Fatal("no generation being folded after 1000 claims")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := s.claims.frozen.Len(); n == 0 {
		t.Fatalf("reopened with no claim of generation %d left to fold", gen)
	}
	s.claims.frozen.Ascend(func(it claimItem) bool {
		if _, id := it.split(); id <= cursor {
			t.Errorf("reopened with %s, folded before the restart (cursor %s), to fold again", id, cursor)
		}
		return true
	})
	for j := i + 1; ; j++ {
		record(t, s, uuidLike(j))
		var now int64
		if err := s.DB().QueryRow(`SELECT gen_max FROM claim_fold`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		if now != gen {
			break // the generation is done (and maybe the next one cut)
		}
		if j > i+2000 {
			t.Fatalf("generation %d still being folded 2000 claims after the restart", gen)
		}
	}
	var left int
	if err := s.DB().QueryRow(`SELECT count(*) FROM claims_log WHERE seq <= ?`, gen).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d claims of generation %d still in the log (%v)", left, gen, err)
	}
	checkDedup(t, s)
}

// BenchmarkClaimIndex measures what the claims log's index costs a claim:
// its memory (heap bytes per claim, ids like UUIDs, one source) and the
// time of a look-up among a million claims.
func BenchmarkClaimIndex(b *testing.B) {
	const n = 1 << 20
	ids := make([]string, n)
	for i := range ids {
		id := uuidLike(i) // as long as a UUID's 36 characters
		ids[i] = id + strings.Repeat("0", 36-len(id))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := &claimIndex{filling: newClaimTree()}
	for i, id := range ids {
		x.add(int64(i+1), claimItem{key: claimKeyOf("github", id), ref: int64(i + 1)})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	var buf [3]int64
	for i := 0; b.Loop(); i++ {
		if len(x.candidates(buf[:0], "github", ids[i%n], false)) != 1 {
			b.Fatal("a claim not found")
		}
	}
	// The ids are counted: the index holds its own copy of each, as one
	// read from the log does. (After the loop: b.Loop resets the metrics.)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/claim")
	runtime.KeepAlive(x)
}

// BenchmarkReadClaimsLog measures what reading the claims log into the
// index costs serve's start per claim (a quarter of a million claims with
// ids in no order, the file in the page cache): SQLite's reading and the
// trees' inserts, which readLogRows overlaps on two goroutines.
func BenchmarkReadClaimsLog(b *testing.B) {
	const n = 1 << 18
	ctx := context.Background()
	s := storeWithLog(b, n)
	for b.Loop() {
		x := &claimIndex{filling: newClaimTree()}
		if err := x.readLogRows(ctx, s.DB(), 0, n, nil); err != nil {
			b.Fatal(err)
		}
		if x.filling.Len() != n {
			b.Fatalf("%d claims in the index, want %d", x.filling.Len(), n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/claim")
}

// storeWithLog opens a new store whose log holds n claims of source
// github, row i with event_ref i and an id like a UUID's, in no order;
// logID is row i's id.
func storeWithLog(tb testing.TB, n int) *Store {
	tb.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(tb.TempDir(), "hw.db"), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	err = s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO claims_log (source, event_id, event_ref) `+logRowsSQL, 1, n)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// logRowsSQL selects (source, event_id, event_ref) for rows ?1..?2: source
// github, logID's ids, event_ref i.
const logRowsSQL = `WITH RECURSIVE c(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM c WHERE i < ?2)
	SELECT 'github', printf('%08x-%04x-4%03x-a%03x-%012x', (i * 2654435761) % 4294967296, i % 65536, i % 4096, (i * 7) % 4096, i), i FROM c`

func logID(i int) string {
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", (i*2654435761)%4294967296, i%65536, i%4096, (i*7)%4096, i)
}

// TestReadLogRows: the log read into the trees by two goroutines holds
// every row it did not skip, a key claimed again keeps its later row (the
// rows cross several batches, the last one partial), and a read stopped
// by its context returns the error once the inserts have stopped.
func TestReadLogRows(t *testing.T) {
	const n = 3*4096 + 100
	ctx := context.Background()
	s := storeWithLog(t, n)
	// Row 7's key claimed again in the last batch, and row n's, which is
	// in that batch too.
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO claims_log (source, event_id, event_ref) VALUES ('github', ?, ?), ('github', ?, ?)`,
			logID(7), n+1, logID(n), n+2)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	x := &claimIndex{filling: newClaimTree()}
	if err := x.readLogRows(ctx, s.DB(), 0, n+2, nil); err != nil {
		t.Fatal(err)
	}
	if x.filling.Len() != n {
		t.Errorf("%d keys in the index, want %d", x.filling.Len(), n)
	}
	for _, i := range []int{1, 4096, 4097, n - 1} {
		if refs := x.candidates(nil, "github", logID(i), false); len(refs) != 1 || refs[0] != int64(i) {
			t.Errorf("row %d: the index gives %v, want [%d]", i, refs, i)
		}
	}
	for i, later := range map[int]int64{7: n + 1, n: n + 2} {
		if refs := x.candidates(nil, "github", logID(i), false); len(refs) != 1 || refs[0] != later {
			t.Errorf("row %d's key claimed again: the index gives %v, want its later row [%d]", i, refs, later)
		}
	}

	// Every other row skipped; only rows after 4096.
	x = &claimIndex{filling: newClaimTree()}
	if err := x.readLogRows(ctx, s.DB(), 4096, n, func(seq int64, _ claimItem) bool { return seq%2 == 0 }); err != nil {
		t.Fatal(err)
	}
	if want := (n - 4096) / 2; x.filling.Len() != want {
		t.Errorf("%d keys after skipping even rows past 4096, want %d", x.filling.Len(), want)
	}

	// Cancelled half-way: the error comes back, and what was read is in.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	x = &claimIndex{filling: newClaimTree()}
	err = x.readLogRows(cctx, s.DB(), 0, n, func(seq int64, _ claimItem) bool {
		if seq == 6000 {
			cancel()
		}
		return false
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("read cancelled at row 6000: %v, want context.Canceled", err)
	}
	if got := x.filling.Len(); got < 4096 || got >= n {
		t.Errorf("%d keys in the index after the cancel at row 6000", got)
	}
}
