package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// The PostgreSQL forms: the same promises with database.url, where several
// serve processes share one database. pgtest starts the throwaway cluster
// (it skips without PostgreSQL's binaries, and fails instead when CI is set).

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

// checkPGClaims is checkClaims for a store on PostgreSQL.
func (o *outcome) checkPGClaims(t testing.TB, p *provider, url string) {
	t.Helper()
	o.Unclaimed, o.unclaimedIDs = pgMissingIDs(t, url, p.ackedIDs())
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
	cluster := pgtest.Start(t)
	url := cluster.NewDatabase(t)
	app := newDestApp(t)
	srvs := []*server{
		newServer(t, t.TempDir(), serverConfig{DBURL: url, DestURL: app.url()}),
		newServer(t, t.TempDir(), serverConfig{DBURL: url, DestURL: app.url()}),
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
	o.checkPGClaims(t, p, url)
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

// pgDiskSize is the tmpfs under the PostgreSQL form of the disk-full test:
// initdb's files and the first WAL segments take about 60 MiB of it.
const pgDiskSize = "160m"

// TestDiskFullOnPostgres: promise 5 and promise 1 when PostgreSQL's disk is
// full. The cluster's data directory (tables and WAL) is on a small tmpfs
// filled to the last byte. While full, every answer is 503 with Retry-After
// unless the event was really recorded (PostgreSQL may still commit into
// WAL and table pages it had already allocated: such a 200 is checked, its
// claim must be in the database and it must be delivered). Once the filler
// is deleted the same serve process, never restarted, accepts again. If
// PostgreSQL itself stops (a WAL write that fails is a PANIC: the server
// restarts its processes, and gives up if it cannot recover), the test
// starts it again, as its service manager would, and reports it.
func TestDiskFullOnPostgres(t *testing.T) {
	sc := setup(t)
	requireRoot(t)
	r := newRow(t, "disk full, PostgreSQL (tmpfs "+pgDiskSize+")")
	// Not under t.TempDir(): the postgres user must reach it.
	mnt, err := os.MkdirTemp("", "pgfull-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(mnt) })
	mountTmpfs(t, mnt, pgDiskSize)
	if err := os.Chmod(mnt, 0o755); err != nil { // mounted 0700, root's
		t.Fatal(err)
	}
	data := filepath.Join(mnt, "data")
	cluster := pgtest.StartAt(t, data)
	url := cluster.NewDatabase(t)
	app := newDestApp(t)
	srv := newServer(t, t.TempDir(), serverConfig{DBURL: url, DestURL: app.url()})
	srv.start()
	pid := srv.pid()
	p := newProvider(t, srv.url(), 8)
	r.track(t, p)
	ctx := deadline(t, 10*time.Minute)

	var (
		filling200, while200, while503, noRetryAfter, other, notReady int
		resentAccepted, resentDuplicate, pgRestarts                   int
		fillBytes                                                     int64
		mu                                                            sync.Mutex
		phase                                                         atomic.Int32 // 0 normal, 1 filling, 2 full
	)
	p.observe = func(id string, a answer) {
		ph := phase.Load()
		if ph == 0 || a.Err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch a.Code {
		case 200:
			if ph == 1 {
				filling200++
			} else {
				while200++
			}
		case 503:
			while503++
			if a.RetryAfter == "" {
				noRetryAfter++
			}
		default:
			other++
			t.Errorf("while full: %s: HTTP %d %q", id, a.Code, a.Status)
		}
	}
	for cycle := 0; cycle < sc.diskCycles; cycle++ {
		p.run(ctx, 8, 300, 0, nil, fmt.Sprintf("pgbefore%d", cycle), 1000)

		bg, stopBG := context.WithCancel(ctx)
		var load sync.WaitGroup
		load.Go(func() { p.run(bg, 4, 0, 200, nil, fmt.Sprintf("pgload%d", cycle), 1000) })
		time.Sleep(300 * time.Millisecond)
		phase.Store(1)
		filler := filepath.Join(mnt, "filler")
		fillBytes += fill(t, filler)
		phase.Store(2)
		r.Faults++
		t.Logf("cycle %d: filled: %s", cycle, diskUsage(mnt))

		// Full: new events, each sent once, 4 at a time, until 200 were
		// answered 503 (or 30 s passed: PostgreSQL may go on committing
		// into WAL it had allocated before the fill).
		var refused []string
		var seen503, next atomic.Int64
		var wg sync.WaitGroup
		until := time.Now().Add(30 * time.Second)
		for w := 0; w < 4; w++ {
			wg.Go(func() {
				for seen503.Load() < 200 && time.Now().Before(until) {
					i := next.Add(1)
					id := fmt.Sprintf("evt_pgfull%d_%07d", cycle, i)
					body := eventBody(id, "torture.full", int(i), 1000)
					ev := p.register(id, body)
					a := p.attempt(ctx, id, body)
					p.observe(id, a)
					mu.Lock()
					ev.Attempts++
					switch a.Code {
					case 200:
						ev.Acked, ev.Status = true, a.Status
					case 503:
						seen503.Add(1)
						refused = append(refused, id)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if ok, _ := srv.ready(); !ok {
			notReady++
		}
		if !srv.running() || srv.pid() != pid {
			t.Fatalf("the server died while PostgreSQL's disk was full; log:\n%s", logTail(srv.logPath, 30))
		}
		if seen503.Load() == 0 {
			t.Errorf("cycle %d: the disk was full and no request was answered 503", cycle)
		}

		// Free the space: the same process accepts again.
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		phase.Store(0)
		if _, err := cluster.PID(); err != nil {
			pgRestarts++
			t.Logf("cycle %d: PostgreSQL stopped while its disk was full (%v); starting it again", cycle, err)
			if err := cluster.Restart(); err != nil {
				t.Fatalf("%v; PostgreSQL's log:\n%s", err, cluster.Log())
			}
		}
		if !waitFor(60*time.Second, func() bool { ok, _ := srv.ready(); return ok }) {
			_, why := srv.ready()
			t.Fatalf("cycle %d: not ready 60s after space was freed: %s; log:\n%s", cycle, why, logTail(srv.logPath, 20))
		}
		if n, first := pgMissingIDs(t, url, p.ackedIDs()); n > 0 {
			t.Errorf("cycle %d: after the full disk, %d acknowledged events have no claim (first %v)", cycle, n, first)
		}
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		for _, id := range refused {
			p.mu.Lock()
			body := p.events[id].Body
			p.mu.Unlock()
			switch a := p.deliver(rctx, id, body, nil); a.Status {
			case "accepted":
				resentAccepted++
			case "duplicate":
				resentDuplicate++
			}
		}
		p.run(rctx, 8, 100, 0, nil, fmt.Sprintf("pgafter%d", cycle), 1000)
		stopBG()
		load.Wait()
		if rctx.Err() != nil {
			_, why := srv.ready()
			t.Fatalf("cycle %d: 60 s after the filler was deleted, events are still refused: %s; readyz: %s; log:\n%s",
				cycle, diskUsage(mnt), why, logTail(srv.logPath, 10))
		}
		cancel()
		if srv.pid() != pid {
			t.Fatal("the server was restarted")
		}
	}
	if noRetryAfter > 0 {
		t.Errorf("%d answers 503 without Retry-After", noRetryAfter)
	}
	// A 503 whose event was in fact recorded is not a loss (the retry is a
	// duplicate, delivered once), but it is only honest when the commit's
	// outcome was unknown to serve: counted, not failed.
	o := settle(t, p, app, 60*time.Second)
	m := srv.mustMetrics()
	pgLog := cluster.Log()
	srv.stop()
	o.checkPGClaims(t, p, url)
	o.check(t, r)
	r.figure("while filling and full: %d×503 (all with Retry-After), %d×200 while filling and %d×200 once full (each one recorded), %d other, wrong 200s %d; "+
		"readyz not ready in %d/%d cycles; refused then resent: %d accepted, %d duplicate; %d commit errors; PostgreSQL started again %d times, its log has %d ENOSPC and %d PANIC lines; filler %.1f MiB",
		while503, filling200, while200, other, max(o.Lost, o.Unclaimed), notReady, sc.diskCycles, resentAccepted, resentDuplicate,
		int(m[mCommitErrs]), pgRestarts, strings.Count(pgLog, "No space left on device"), strings.Count(pgLog, "PANIC:"),
		float64(fillBytes)/(1<<20))
}
