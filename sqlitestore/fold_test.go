package sqlitestore

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// levels reads how many rows each level of the dedup memory holds (a claim
// of a generation between its fold and its drop is in both), the distinct
// claims, and what claim_levels says of the log.
func levels(t *testing.T, s *Store) (logRows, folded, distinct, counted int) {
	t.Helper()
	if err := s.DB().QueryRow(`SELECT (SELECT count(*) FROM claims_log), (SELECT count(*) FROM claims),
		(SELECT count(*) FROM (SELECT DISTINCT source, event_id FROM claim_refs)), recent FROM claim_levels`).
		Scan(&logRows, &folded, &distinct, &counted); err != nil {
		t.Fatal(err)
	}
	return logRows, folded, distinct, counted
}

// CheckDedupMemory fails unless every event has its claim, a key is in
// the log once, a claim is in both levels only while its generation is
// folded (with the same events row), no claim is left without its event,
// and claim_levels counts the log. Exported for the conformance runs of
// package sqlitestore_test.
func CheckDedupMemory(t testing.TB, db *sql.DB) (events int) {
	t.Helper()
	var claimed, twice, again, orphans, logRows, counted int
	err := db.QueryRow(`SELECT
	(SELECT count(*) FROM events),
	(SELECT count(*) FROM events e WHERE EXISTS (SELECT 1 FROM claim_refs c WHERE c.event_ref = e.id AND c.source = e.source AND c.event_id = e.event_id)),
	(SELECT count(*) FROM claims_log l JOIN claims c USING (source, event_id)
		WHERE l.seq > (SELECT gen_max FROM claim_fold) OR l.event_ref != c.event_ref),
	(SELECT count(*) FROM (SELECT 1 FROM claims_log GROUP BY source, event_id HAVING count(*) > 1)),
	(SELECT count(*) FROM claim_refs c WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = c.event_ref)),
	(SELECT count(*) FROM claims_log), (SELECT recent FROM claim_levels)`).Scan(&events, &claimed, &twice, &again, &orphans, &logRows, &counted)
	if err != nil {
		t.Fatal(err)
	}
	if claimed != events || twice != 0 || again != 0 || orphans != 0 || logRows != counted {
		t.Errorf("dedup memory: %d events, %d claimed, %d in both levels outside the fold, %d keys twice in the log, %d without their event; claim_levels says %d in the log, %d are",
			events, claimed, twice, again, orphans, counted, logRows)
	}
	return events
}

func checkDedup(t *testing.T, s *Store) (events int) {
	t.Helper()
	return CheckDedupMemory(t, s.DB())
}

// TestFoldKeepsTheDedupMemory: once the log is above its limit serve folds
// a generation of it into claims in key order and drops it from the log,
// and keeps the log near max(FoldMin, folded/8); a copy of any claim, in
// either level or both, alone or among a batch's requests, is a
// duplicate, and a new id is claimed once however many requests carry it.
func TestFoldKeepsTheDedupMemory(t *testing.T) {
	// No idle step: the bounds below count the steps taken beside the
	// claims, and a slow machine (the race detector, a busy CI) would
	// otherwise leave quiet moments of the default 20 ms between them.
	s := MustOpen(t, Options{Fold: true, FoldMin: 16, FoldChunk: 4, FoldIdle: time.Hour})
	ctx := context.Background()
	const n = 640 // 20 batches of 32
	generations, lastGen := 0, int64(0)
	for i := range n {
		res, err := s.Record(ctx, receipt("github", uuidLike(i), fmt.Sprintf(`{"i":%d}`, i), "gh/app"))
		if err != nil || res.Outcome != hookwarden.Accepted {
			t.Fatalf("record %d: %v, %v", i, res.Outcome, err)
		}
		var gen int64
		if err := s.DB().QueryRow(`SELECT gen_max FROM claim_fold`).Scan(&gen); err != nil {
			t.Fatal(err)
		}
		if gen > 0 && gen != lastGen {
			generations++
		}
		lastGen = gen
		// Claims come one after the other, never a quiet moment of
		// FoldIdle: the fold runs beside them once the log holds twice its
		// limit L, and the log grows while a generation is folded (by 5/8
		// of it: a step a chunk of the fold, a step four chunks of the
		// drop, each paid by half a chunk of new claims), so it peaks near
		// 2L + 5/8 of a generation of some 1.45 L: under 3 L.
		if logRows, _, _, _ := levels(t, s); logRows > 3*max(16, (i+1-logRows)/foldRatio)+16 {
			t.Fatalf("after claim %d: %d claims in the log; want under three times its limit", i, logRows)
		}
	}
	logRows, folded, distinct, counted := levels(t, s)
	if distinct != n || counted != logRows {
		t.Fatalf("levels: %d distinct claims (%d in the log, claim_levels %d, %d folded), want %d", distinct, logRows, counted, folded, n)
	}
	// One claim a commit arrives, two fold or drop: a generation is folded
	// and dropped while the next one fills, so the log holds at most about
	// twice the limit.
	if limit := max(16, folded/foldRatio); folded == 0 || logRows > 2*limit+8 || generations < 3 {
		t.Errorf("levels: %d in the log, %d folded, %d generations seen; want claims folded in generations and the log near max(16, folded/8) = %d",
			logRows, folded, generations, limit)
	}
	checkDedup(t, s)

	// Copies of every claim, 32 requests at a time so that the writer
	// commits them together (recordMany), each batch with one new id
	// carried twice.
	var wg sync.WaitGroup
	outcomes := make([]hookwarden.Outcome, n+2*n/32)
	errs := make([]error, len(outcomes))
	for lo := 0; lo < n; lo += 32 {
		for i := lo; i < lo+32; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.Record(ctx, receipt("github", uuidLike(i), fmt.Sprintf(`{"i":%d}`, i), "gh/app"))
				outcomes[i], errs[i] = res.Outcome, err
			}()
		}
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				j := n + 2*(lo/32) + k
				res, err := s.Record(ctx, receipt("github", fmt.Sprint("new-", lo), `{"new":1}`, "gh/app"))
				outcomes[j], errs[j] = res.Outcome, err
			}()
		}
		wg.Wait()
	}
	for i, o := range outcomes[:n] {
		if errs[i] != nil || o != hookwarden.Duplicate {
			t.Fatalf("copy of claim %d: %v, %v; want a duplicate", i, o, errs[i])
		}
	}
	for j := n; j < len(outcomes); j += 2 {
		a, b := outcomes[j], outcomes[j+1]
		if errs[j] != nil || errs[j+1] != nil || (a == b) || (a != hookwarden.Accepted && b != hookwarden.Accepted) {
			t.Fatalf("a new id carried twice: %v and %v (%v, %v); want one accepted, one duplicate", a, b, errs[j], errs[j+1])
		}
	}
	if events, want := checkDedup(t, s), n+n/32; events != want {
		t.Errorf("%d events; want %d", events, want)
	}
	if _, _, distinct, _ := levels(t, s); distinct != n+n/32 {
		t.Errorf("%d distinct claims; want %d", distinct, n+n/32)
	}
}

// TestFoldSurvivesKill9: a process recording claims while its writer folds
// them (a fold, drop or cut after nearly every commit) is killed with
// SIGKILL, three times at different points; reopened as serve opens it, the
// file holds every claim it acknowledged, each once (in both levels only
// within a generation being folded), counted right, and a copy of each is
// a duplicate. The next child resumes the fold where the killed one left it.
func TestFoldSurvivesKill9(t *testing.T) {
	if path := os.Getenv("HOOKWARDEN_FOLD_CHILD"); path != "" {
		from, _ := strconv.Atoi(os.Getenv("HOOKWARDEN_FOLD_FROM"))
		foldChild(path, from)
		return
	}
	path := filepath.Join(t.TempDir(), "hw.db")
	var acked []string
	for round, stopAt := range []int{1500, 2300, 3100} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFoldSurvivesKill9$")
		cmd.Env = append(os.Environ(), "HOOKWARDEN_FOLD_CHILD="+path, fmt.Sprint("HOOKWARDEN_FOLD_FROM=", round*1_000_000))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The child prints each id once its Record returned: acknowledged.
		var these []string
		sc := bufio.NewScanner(out)
		for sc.Scan() && len(these) < stopAt {
			these = append(these, sc.Text())
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if len(these) < stopAt {
			t.Fatalf("round %d: the child acknowledged %d claims before it stopped, want %d", round, len(these), stopAt)
		}
		acked = append(acked, these...)

		s, err := Open(context.Background(), path, Options{Fold: true, FoldMin: 64, FoldChunk: 16})
		if err != nil {
			t.Fatal(err)
		}
		_, folded, distinct, _ := levels(t, s)
		var gen int64
		if err := s.DB().QueryRow(`SELECT gen_max FROM claim_fold`).Scan(&gen); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed with %d claims, %d folded, generation up to %d", round, distinct, folded, gen)
		events := checkDedup(t, s)
		if folded == 0 || events != distinct || events < len(acked) {
			t.Errorf("round %d: %d events, %d distinct claims, %d folded; %d acknowledged", round, events, distinct, folded, len(acked))
		}
		for _, id := range acked {
			res, err := s.Record(context.Background(), receipt("github", id, `{}`, "gh/app"))
			if err != nil || res.Outcome != hookwarden.Duplicate {
				t.Fatalf("round %d: copy of acknowledged %s: %v, %v; want a duplicate", round, id, res.Outcome, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// foldChild records claims with ids in no order, 16 at a time, from
// uuidLike(from) on, until it is killed, printing each acknowledged id.
func foldChild(path string, from int) {
	s, err := Open(context.Background(), path, Options{Fold: true, FoldMin: 64, FoldChunk: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for i := from; ; i += 16 {
		var wg sync.WaitGroup
		ok := make([]bool, 16)
		for k := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := s.Record(context.Background(), receipt("github", uuidLike(i+k), `{}`, "gh/app"))
				ok[k] = err == nil && res.Outcome == hookwarden.Accepted
			}()
		}
		wg.Wait()
		for k := range 16 {
			if ok[k] {
				fmt.Fprintln(w, uuidLike(i+k))
			}
		}
		w.Flush()
		if i > from+1_000_000 {
			time.Sleep(time.Second) // the parent has stopped reading
		}
	}
}

// TestFoldWhileIdle: below twice its limit the log is folded only while
// the writer has nothing to write; once the claims stop, the generation
// cut when the log passed its limit is folded and leaves the log, and
// every claim is still a duplicate.
func TestFoldWhileIdle(t *testing.T) {
	s := MustOpen(t, Options{Fold: true, FoldMin: 64, FoldChunk: 8, FoldIdle: 50 * time.Millisecond})
	for i := range 100 {
		if o := record(t, s, uuidLike(i)); o != hookwarden.Accepted {
			t.Fatalf("%d: %v", i, o)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var gen int64
		if err := s.DB().QueryRow(`SELECT gen_max FROM claim_fold`).Scan(&gen); err != nil {
			t.Fatal(err)
		}
		logRows, folded, distinct, _ := levels(t, s)
		if gen == 0 && folded > 64 {
			if logRows+folded != 100 || distinct != 100 {
				t.Errorf("after the idle fold: %d in the log, %d folded, %d distinct; want 100 claims, each once", logRows, folded, distinct)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle for 10 s and the generation is not folded: generation %d, %d in the log, %d folded", gen, logRows, folded)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkDedup(t, s)
	for i := range 100 {
		if o := record(t, s, uuidLike(i)); o != hookwarden.Duplicate {
			t.Fatalf("copy of %d: %v, want a duplicate", i, o)
		}
	}
	if logRows, _, _, _ := levels(t, s); s.claims.size() != logRows {
		t.Errorf("the index holds %d claims after the fold, want the %d left in the log", s.claims.size(), logRows)
	}
}

// TestIdleFoldLetsOtherWritersIn: while serve folds a generation on its
// own, the file's write lock is free between its steps, so another
// process's write (a prune pass, a replay from the command line) gets in
// at its next try rather than after the fold. The steps used to follow
// each other at once: the lock was free at 2-4 % of the tries, and SQLite's
// busy handler, which retries at growing intervals, kept a prune pass with
// nothing to do waiting 185-233 ms beside a fold.
func TestIdleFoldLetsOtherWritersIn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hw.db")
	ctx := context.Background()
	// The generation is cut past 6,000 claims; none is folded beside the
	// load (that starts at twice the limit), so all of it is left to the
	// idle fold: some 190 steps of 32 claims. A FoldIdle of a second
	// keeps the pause between steps at the step's length.
	s, err := Open(ctx, path, Options{Fold: true, FoldMin: 6000, FoldChunk: 32, FoldIdle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 7000; i += 16 {
				if _, err := s.Record(ctx, receipt("github", uuidLike(i), "{}")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	folding := func() (gen int64, folded int) {
		t.Helper()
		if err := s.DB().QueryRow(`SELECT gen_max, (SELECT count(*) FROM claims) FROM claim_fold`).Scan(&gen, &folded); err != nil {
			t.Fatal(err)
		}
		return gen, folded
	}
	if gen, _ := folding(); gen == 0 {
		t.Fatal("no generation was cut at 7,000 claims (limit 6,000)")
	}
	other, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetMaxOpenConns(1)
	if _, err := other.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, folded := folding(); folded > 0 {
			break // the idle steps have begun
		}
		if time.Now().After(deadline) {
			t.Fatal("quiet for 10 s and no fold step")
		}
	}
	// Try to take the write lock, without waiting, while the fold goes on
	// (400 tries at most).
	var free, busy int
	for free+busy < 400 {
		var gen int64
		if err := s.DB().QueryRow(`SELECT gen_max FROM claim_fold`).Scan(&gen); err != nil {
			t.Fatal(err)
		}
		if gen == 0 {
			break
		}
		tx, err := other.BeginTx(ctx, nil) // BEGIN IMMEDIATE
		if err == nil {
			free++
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		} else {
			busy++
		}
		time.Sleep(300 * time.Microsecond)
	}
	if free+busy < 50 {
		t.Fatalf("the fold was over after %d tries; want a longer fold", free+busy)
	}
	share := float64(free) / float64(free+busy)
	t.Logf("the write lock was free at %d of %d tries while serve folded", free, free+busy)
	if share < 0.15 {
		t.Errorf("the write lock was free at %d of %d tries (%.0f%%) while serve folded; want at least 15%%", free, free+busy, 100*share)
	}
}

// BenchmarkFold: serve folds a generation of 16,384 claims (ids in no
// order) into a claims table of 262,144 while its writer is quiet. Timed
// from the store's open to the generation out of the log, the idle steps'
// pauses included as serve takes them; µs/claim is that time per claim of
// the generation.
func BenchmarkFold(b *testing.B) {
	const folded, gen = 1 << 18, 1 << 14
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "hw.db")
	// setup writes rows lo..hi (logID's ids) on a connection of its own,
	// the same whatever the store's pragmas: only the fold is compared.
	setup := func(table string, lo, hi int) {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`INSERT INTO `+table+` (source, event_id, event_ref) `+logRowsSQL, lo, hi); err != nil {
			b.Fatal(err)
		}
		if table == "claims_log" {
			if _, err := db.Exec(`UPDATE claim_levels SET recent = recent + ?`, hi-lo+1); err != nil {
				b.Fatal(err)
			}
		}
	}
	if s, err := Open(ctx, path, Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		b.Fatal(err)
	} else {
		s.Close()
	}
	setup("claims", 1, folded)
	// foldOnce folds generation i, the timer running from the store's
	// open to the generation's end.
	foldOnce := func(i int) {
		b.StopTimer()
		lo := folded + i*gen + 1
		setup("claims_log", lo, lo+gen-1)
		s, err := Open(ctx, path, Options{Fold: true, FoldMin: gen / 2, FoldIdle: time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		levels, err := s.DB().Prepare(`SELECT gen_max, (SELECT recent FROM claim_levels) FROM claim_fold`)
		if err != nil {
			b.Fatal(err)
		}
		defer levels.Close()
		b.StartTimer()
		for {
			var genMax, recent int
			if err := levels.QueryRow().Scan(&genMax, &recent); err != nil {
				b.Fatal(err)
			}
			if genMax == 0 && recent == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
	}
	// Untimed: the first start after the setup's inserts into claims
	// builds the claims filter beside the fold; the next ones take the
	// filter its clean stop kept, as serve's restarts do.
	foldOnce(b.N)
	b.ResetTimer()
	for i := range b.N {
		foldOnce(i)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*gen), "µs/claim")
}
