package torture

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// What only PostgreSQL has: several serve processes sharing one database.
// pgtest starts the throwaway cluster (it skips without PostgreSQL's
// binaries, and fails instead when CI is set); every other scenario runs on
// both stores (store_test.go).

// pgMissingIDs returns how many of ids have no claim in the database at url,
// and the first few of them.
func pgMissingIDs(t testing.TB, url string, ids []string) (int, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to read claims: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT event_id FROM events WHERE source = $1`, sourceName)
	if err != nil {
		t.Fatalf("read claims: %v", err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read claims: %v", err)
	}
	var missing []string
	for _, id := range ids {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	n := len(missing)
	if len(missing) > 10 {
		missing = missing[:10]
	}
	return n, missing
}

// TestKill9OneOfTwoOnPostgres: promises 1 and 2 with two serve processes on
// one database, the provider behind a load balancer: its senders go to one
// instance and, when that one refuses connections, fail over to the other.
// The instance they send to is killed (SIGKILL) at random moments under
// load and restarted at once, sc.kills times. Every acknowledged event must
// be in the database and delivered with its Idempotency-Key. A duplicate
// delivery happens only where a lease was given back: the killed instance's
// jobs in flight, due again when their lease ends or, since both processes
// here share the host's name (one instance, to pgstore), released at once by
// the restart, along with the survivor's; they are counted.
func TestKill9OneOfTwoOnPostgres(t *testing.T) {
	sc := setup(t)
	r := newRow(t, "kill -9 of one of two instances (PostgreSQL)")
	db := newDB(t, onPostgres, "")
	app := newDestApp(t)
	srvs := []*server{
		newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url()})),
		newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url()})),
	}
	for _, s := range srvs {
		s.start()
	}
	p := newProvider(t, srvs[0].url(), 16)
	p.failover(srvs[0].url(), srvs[1].url())
	r.track(t, p)

	ctx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	var burst atomic.Bool
	load.Go(func() { p.run(ctx, 16, 0, killRate, &burst, "pgkill", 200) })

	slot := sc.killWindow / time.Duration(sc.kills)
	begin := time.Now()
	for i := 0; i < sc.kills; i++ {
		at := begin.Add(time.Duration(i)*slot + time.Duration(rand.Int64N(int64(slot))))
		time.Sleep(time.Until(at.Add(-sc.killBurst)))
		burst.Store(true)
		time.Sleep(time.Until(at))
		// The one taking the load: its senders must fail over.
		victim := srvs[p.current()]
		victim.kill9()
		burst.Store(false)
		r.Faults++
		time.Sleep(time.Duration(rand.Int64N(int64(50 * time.Millisecond))))
		victim.start()
	}
	time.Sleep(time.Until(begin.Add(sc.killWindow)))
	stopLoad()
	load.Wait()

	o := settle(t, p, app, 120*time.Second)
	for _, s := range srvs {
		s.stop()
	}
	o.checkClaims(t, p, db)
	o.check(t, r)
	if o.Acked < 200 {
		t.Errorf("only %d events acknowledged: the load did not reach the servers", o.Acked)
	}
	if n := p.failovers.Load(); n < int64(sc.kills) {
		t.Errorf("the senders failed over %d times for %d kills: the load was not on the killed instance", n, sc.kills)
	}
	if n := p.unexpected.Load(); n > 0 {
		t.Errorf("%d answers other than 2xx/503 (last: %v)", n, p.lastOther.Load())
	}
	if n := p.unavailNoR.Load(); n > 0 {
		t.Errorf("%d answers 503 without Retry-After", n)
	}
	r.figure("%d attempts, %d network errors, %d failovers, %d 503; duplicates are leases given back by a kill",
		p.attempts.Load(), p.netErrs.Load(), p.failovers.Load(), p.unavail.Load())
}
