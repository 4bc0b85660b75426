package storecopy

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

func mustDB(t *testing.T, schema string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	return db
}

// copyDBs copies src into dst in one transaction each side.
func copyDBs(t *testing.T, src, dst *sql.DB, opt Options) ([]Count, error) {
	t.Helper()
	ctx := context.Background()
	stx, err := src.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	// Both handles allow one connection: the source's snapshot and the
	// destination's writes are on different files.
	dtx, err := dst.Begin()
	if err != nil {
		t.Fatal(err)
	}
	counts, err := Copy(ctx, SQLiteSource(stx), SQLiteDestination(dtx), opt)
	if err != nil {
		dtx.Rollback()
		return counts, err
	}
	return counts, dtx.Commit()
}

const childParent = `
CREATE TABLE parent (id INTEGER PRIMARY KEY, at TEXT NOT NULL, extra TEXT) STRICT;
CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent (id), b BLOB NOT NULL) STRICT;`

// TestCopy: parents before children whatever the names' order, empty blobs
// stay empty (not NULL), counts per table, seeded rows of the destination
// replaced; a source column with values and no place in the destination
// fails the copy naming it, unless dropped; a required column the source
// lacks needs a fill.
func TestCopy(t *testing.T) {
	src := mustDB(t, childParent+`
INSERT INTO parent VALUES (1, '2025-01-01T00:00:00.000000Z', NULL), (2, '2025-02-01T00:00:00.000000Z', NULL);
INSERT INTO child VALUES (10, 2, x''), (11, 1, x'00ff');`)
	dst := mustDB(t, strings.Replace(childParent, ", extra TEXT", ", kind TEXT NOT NULL", 1)+
		`INSERT INTO parent VALUES (7, 'seeded', 'x');`)

	if _, err := copyDBs(t, src, dst, Options{}); err == nil || !strings.Contains(err.Error(), "column kind is required") {
		t.Fatalf("copy without a fill for a required column: %v", err)
	}
	counts, err := copyDBs(t, src, dst, Options{Fill: map[string]map[string]any{"parent": {"kind": "old"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 2 || counts[0] != (Count{"parent", 2}) || counts[1] != (Count{"child", 2}) {
		t.Fatalf("counts %v, want parent 2 then child 2", counts)
	}
	var n int
	if err := dst.QueryRow(`SELECT count(*) FROM child WHERE b = x'' AND id = 10`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("empty blob copied as %d rows equal to x'' (%v), want 1", n, err)
	}
	if err := dst.QueryRow(`SELECT count(*) FROM parent WHERE kind = 'old' AND id IN (1, 2)`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("filled rows %d (%v), want 2 (the seeded row replaced)", n, err)
	}

	if _, err := src.Exec(`UPDATE parent SET extra = 'kept' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	fill := map[string]map[string]any{"parent": {"kind": "old"}}
	if _, err := copyDBs(t, src, dst, Options{Fill: fill}); err == nil || !strings.Contains(err.Error(), "column extra holds values in 1 rows") {
		t.Fatalf("copy losing a column's values: %v, want a refusal naming it", err)
	}
	if _, err := copyDBs(t, src, dst, Options{Fill: fill, Drop: map[string][]string{"parent": {"extra"}}}); err != nil {
		t.Fatalf("copy with the column dropped: %v", err)
	}
}

// TestCopyMissingTable: a source table with rows and no counterpart fails
// the copy; an empty one, or one skipped, does not.
func TestCopyMissingTable(t *testing.T) {
	src := mustDB(t, childParent+`CREATE TABLE lone (x INTEGER) STRICT;`)
	dst := mustDB(t, childParent)
	if _, err := copyDBs(t, src, dst, Options{}); err != nil {
		t.Fatalf("empty extra table: %v", err)
	}
	if _, err := src.Exec(`INSERT INTO lone VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := copyDBs(t, src, dst, Options{}); err == nil || !strings.Contains(err.Error(), "table lone (1 rows) has no counterpart") {
		t.Fatalf("copy losing a table: %v", err)
	}
	if _, err := copyDBs(t, src, dst, Options{Skip: []string{"lone"}}); err != nil {
		t.Fatalf("copy skipping it: %v", err)
	}
}
