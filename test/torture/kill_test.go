package torture

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// killRate paces the senders of the kill and power-loss scenarios between
// bursts: flat out, 16 senders are acknowledged about 5,000 events/s here,
// six times what is delivered, and the backlog would take minutes to check.
// The bursts before each fault put all 16 senders in flight at the moment
// it strikes, which is what catches a 200 written before its commit.
const killRate = 500

// TestKill9UnderLoad: promise 1 (no acknowledged event is lost) and promise 2
// (same Idempotency-Key on every delivery) across SIGKILLs at random moments
// under 16 concurrent senders. Duplicate deliveries are allowed
// (at-least-once) and counted. On PostgreSQL the database stays up: the one
// serve process is killed and restarted on it.
func TestKill9UnderLoad(t *testing.T) { forEachStore(t, kill9UnderLoad) }

func kill9UnderLoad(t *testing.T, k storeKind) {
	sc := setup(t).on(k)
	r := newRow(t, scenario("kill -9 under load", k))
	app := newDestApp(t)
	db := newDB(t, k, "")
	srv := newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url()}))
	srv.start()
	p := newProvider(t, srv.url(), 16)
	r.track(t, p)

	ctx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	var burst atomic.Bool
	load.Go(func() { p.run(ctx, 16, 0, killRate, &burst, "kill", 200) })

	// One kill at a random moment in each of sc.kills equal slots of the
	// window, after a burst; the restart follows at once.
	slot := sc.killWindow / time.Duration(sc.kills)
	var downtime time.Duration
	begin := time.Now()
	for i := 0; i < sc.kills; i++ {
		at := begin.Add(time.Duration(i)*slot + time.Duration(rand.Int64N(int64(slot))))
		time.Sleep(time.Until(at.Add(-sc.killBurst)))
		burst.Store(true)
		time.Sleep(time.Until(at))
		srv.kill9()
		burst.Store(false)
		r.Faults++
		down := time.Now()
		time.Sleep(time.Duration(rand.Int64N(int64(50 * time.Millisecond))))
		srv.start()
		downtime += time.Since(down)
	}
	time.Sleep(time.Until(begin.Add(sc.killWindow)))
	stopLoad()
	load.Wait()

	o := settle(t, p, app, 120*time.Second)
	srv.stop()
	o.checkClaims(t, p, db)
	o.check(t, r)
	if o.Acked < 200 {
		t.Errorf("only %d events acknowledged: the load did not reach the server", o.Acked)
	}
	if n := p.unexpected.Load(); n > 0 {
		t.Errorf("%d answers other than 2xx/503 (last: %v)", n, p.lastOther.Load())
	}
	if n := p.unavailNoR.Load(); n > 0 {
		t.Errorf("%d answers 503 without Retry-After", n)
	}
	r.figure("%d attempts, %d network errors, %d 503; mean downtime per kill %s",
		p.attempts.Load(), p.netErrs.Load(), p.unavail.Load(), (downtime / time.Duration(sc.kills)).Round(time.Millisecond))
}
