package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// TestBenchHistoryBothStores: bench-history writes the same history into a
// new SQLite file (--db) and into an empty PostgreSQL database (--url),
// refuses a second run on either, and wants exactly one of them.
func TestBenchHistoryBothStores(t *testing.T) {
	t.Parallel()
	args := []string{"--claims", "3000", "--payloads", "500", "--body", "64"}
	db := filepath.Join(t.TempDir(), "h.db")
	if code, out, errs := runMain(t, append([]string{"bench-history", "--db", db}, args...)...); code != 0 {
		t.Fatalf("bench-history --db: exit %d\n%s%s", code, out, errs)
	}
	url := pgtest.Database(t)
	if code, out, errs := runMain(t, append([]string{"bench-history", "--url", url}, args...)...); code != 0 {
		t.Fatalf("bench-history --url: exit %d\n%s%s", code, out, errs)
	}
	for q, want := range map[string]int64{
		`SELECT count(*) FROM events`:                                                 3000,
		`SELECT count(*) FROM events WHERE pruned_at IS NULL`:                         500,
		`SELECT count(*) FROM receipts WHERE kind = 'duplicate'`:                      100,
		`SELECT sum(n) FROM counters WHERE kind = 'accepted'`:                         3000,
		`SELECT n FROM pruned_totals WHERE name = 'bench/app' AND kind = 'delivered'`: 1873, // the folded 2,500 less other's 625 and rare's 2
	} {
		if got := pgCount(t, url, q); got != want {
			t.Errorf("%s: %d, want %d", q, got, want)
		}
	}
	if code, _, errs := runMain(t, append([]string{"bench-history", "--url", url}, args...)...); code == 0 || !strings.Contains(errs, "already holds events") {
		t.Errorf("a second bench-history on the database: exit %d, %s", code, errs)
	}
	if code, _, errs := runMain(t, append([]string{"bench-history", "--db", db}, args...)...); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("a second bench-history on the file: exit %d, %s", code, errs)
	}
	if code, _, _ := runMain(t, append([]string{"bench-history", "--db", db + "2", "--url", url}, args...)...); code != 2 {
		t.Errorf("bench-history with --db and --url: exit %d, want 2", code)
	}
}
