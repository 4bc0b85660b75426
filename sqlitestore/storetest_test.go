package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/sqlitestore"
	"github.com/hookwarden/hookwarden/storetest"
)

// TestConformance runs the store contract's suite over SQLite files.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, now func() time.Time) storetest.Store {
			return open(t, filepath.Join(t.TempDir(), "hw.db"), sqlitestore.Options{Now: now})
		},
		// As the --db commands open a file.
		OpenCopy: func(t *testing.T, path string, now func() time.Time) storetest.Store {
			return open(t, path, sqlitestore.Options{Now: now, ReadOnly: true})
		},
		RefuseJobs: refuseJobs,
	})
}

func open(t *testing.T, path string, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return s
}

// refuseJobs makes every job insert fail with a trigger, written through a
// connection of its own: the store's writer sees the schema change at its
// next transaction.
func refuseJobs(t *testing.T, st storetest.Store) func() {
	t.Helper()
	path := st.(*sqlitestore.Store).Path()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TRIGGER storetest_refuse_jobs BEFORE INSERT ON jobs BEGIN SELECT RAISE(ABORT, 'jobs refused'); END`); err != nil {
		t.Fatalf("create trigger: %v", err)
	}
	return func() {
		if _, err := db.Exec(`DROP TRIGGER storetest_refuse_jobs`); err != nil {
			t.Fatalf("drop trigger: %v", err)
		}
	}
}
