package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/hookwarden/hookwarden/internal/pgtest"
	"github.com/hookwarden/hookwarden/storetest"
	"github.com/jackc/pgx/v5"
)

// TestConformance runs the store contract's suite over PostgreSQL, each
// subtest on a fresh database of the package's throwaway cluster.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, now func() time.Time) storetest.Store {
			return open(t, pgtest.Database(t), Options{Now: now})
		},
		RefuseJobs: refuseJobs,
		FullCount: func(t *testing.T, s storetest.Store, now time.Time) (storetest.Stats, map[string][]storetest.HourCount) {
			checkRequestHours(t, s.(*Store))
			return fullCount(t, s.(*Store), now)
		},
		FillHistory: func(t *testing.T, s storetest.Store, h hookwarden.History) error {
			return s.(*Store).FillHistory(context.Background(), h, nil)
		},
	})
}

// refuseJobs makes every job insert fail with a trigger, created through a
// connection of its own.
func refuseJobs(t *testing.T, st storetest.Store) func() {
	t.Helper()
	s := st.(*Store)
	exec := func(sql string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE FUNCTION storetest_refuse_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'jobs refused'; END $$;
		CREATE TRIGGER storetest_refuse_jobs BEFORE INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION storetest_refuse_jobs()`)
	return func() {
		exec(`DROP TRIGGER storetest_refuse_jobs ON jobs; DROP FUNCTION storetest_refuse_jobs()`)
	}
}
