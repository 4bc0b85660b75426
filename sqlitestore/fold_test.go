package sqlitestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

// levels reads how many claims each level of the dedup memory holds, and
// what claim_levels says of the recent one.
func levels(t *testing.T, s *Store) (recent, folded, counted int) {
	t.Helper()
	if err := s.DB().QueryRow(`SELECT (SELECT count(*) FROM claims_recent), (SELECT count(*) FROM claims), recent FROM claim_levels`).
		Scan(&recent, &folded, &counted); err != nil {
		t.Fatal(err)
	}
	return recent, folded, counted
}

// TestFoldKeepsTheDedupMemory: once claims_recent is above its limit the
// writer moves its claims into claims a key range at a time, wrapping
// around, and keeps it near max(FoldMin, folded/8); a copy of any claim,
// in either level, alone or among a batch's requests, is a duplicate, and
// a new id is claimed once however many requests carry it.
func TestFoldKeepsTheDedupMemory(t *testing.T) {
	s := MustOpen(t, Options{FoldMin: 16, FoldChunk: 4})
	ctx := context.Background()
	const n = 640 // 20 batches of 32
	for i := range n {
		res, err := s.Record(ctx, receipt("github", uuidLike(i), fmt.Sprintf(`{"i":%d}`, i), "gh/app"))
		if err != nil || res.Outcome != hookwarden.Accepted {
			t.Fatalf("record %d: %v, %v", i, res.Outcome, err)
		}
	}
	recent, folded, counted := levels(t, s)
	if recent+folded != n || counted != recent {
		t.Fatalf("levels: %d recent (claim_levels %d) + %d folded, want %d claims", recent, counted, folded, n)
	}
	// Two claims a commit arrive, four leave per chunk: the recent level
	// stays within a chunk or two of its limit.
	if limit := max(16, folded/foldRatio); folded == 0 || recent > limit+8 {
		t.Errorf("levels: %d recent, %d folded; want recent near max(16, folded/8) = %d", recent, folded, limit)
	}

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
	var events, claims int
	if err := s.DB().QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM claim_refs)`).Scan(&events, &claims); err != nil {
		t.Fatal(err)
	}
	if want := n + n/32; events != want || claims != want {
		t.Errorf("%d events, %d claims; want %d of each", events, claims, want)
	}
	recent, folded, counted = levels(t, s)
	if counted != recent || recent+folded != claims {
		t.Errorf("levels: %d recent (claim_levels %d) + %d folded, want %d claims", recent, counted, folded, claims)
	}
	if n, err := s.WarmClaims(ctx); err != nil || int(n) != claims {
		t.Errorf("WarmClaims = %d, %v; want both levels' %d claims", n, err, claims)
	}
}

// TestFoldSurvivesKill9: a process recording claims while its writer folds
// them (a fold transaction after nearly every commit) is killed with
// SIGKILL; reopened, the file holds every claim it acknowledged in exactly
// one level, counted right, and a copy of each is a duplicate.
func TestFoldSurvivesKill9(t *testing.T) {
	if path := os.Getenv("HOOKWARDEN_FOLD_CHILD"); path != "" {
		foldChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "hw.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFoldSurvivesKill9$")
	cmd.Env = append(os.Environ(), "HOOKWARDEN_FOLD_CHILD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child prints each id once its Record returned: acknowledged.
	var acked []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < 3000 {
		acked = append(acked, sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < 3000 {
		t.Fatalf("the child acknowledged %d claims before it stopped, want 3000", len(acked))
	}

	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recent, folded, counted := levels(t, s)
	if folded == 0 || counted != recent {
		t.Errorf("levels after the kill: %d recent (claim_levels %d), %d folded; want claims folded and counted", recent, counted, folded)
	}
	var events, claimed, twice int
	if err := s.DB().QueryRow(`SELECT (SELECT count(*) FROM events),
	(SELECT count(*) FROM events e JOIN claim_refs c ON c.event_ref = e.id AND c.event_id = e.event_id),
	(SELECT count(*) FROM claims_recent JOIN claims USING (source, event_id))`).Scan(&events, &claimed, &twice); err != nil {
		t.Fatal(err)
	}
	if claimed != events || twice != 0 || events != recent+folded || events < len(acked) {
		t.Errorf("%d events, %d claimed, %d in both levels, %d+%d in the levels; %d acknowledged", events, claimed, twice, recent, folded, len(acked))
	}
	for _, id := range acked {
		res, err := s.Record(context.Background(), receipt("github", id, `{}`, "gh/app"))
		if err != nil || res.Outcome != hookwarden.Duplicate {
			t.Fatalf("copy of acknowledged %s: %v, %v; want a duplicate", id, res.Outcome, err)
		}
	}
}

// foldChild records claims with ids in no order, 16 at a time, until it is
// killed, printing each acknowledged id.
func foldChild(path string) {
	s, err := Open(context.Background(), path, Options{FoldMin: 64, FoldChunk: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i += 16 {
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
		if i > 1_000_000 {
			time.Sleep(time.Second) // the parent has stopped reading
		}
	}
}
