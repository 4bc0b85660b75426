package torture

import (
	"fmt"
	"testing"
	"time"
)

// TestBurstLeaks is the leak check of the whole process: after a burst of
// events (100,000 in the long form), delivered and drained, the child's
// goroutines and open files return to their baseline and its RSS stays near
// it. The harness's own goroutines are checked by goleak in TestMain. On
// PostgreSQL the fds include the pool's connections: the warm-up grows the
// pool to its working size before the baseline.
func TestBurstLeaks(t *testing.T) { forEachStore(t, burstLeaks) }

func burstLeaks(t *testing.T, k storeKind) {
	sc := setup(t).on(k)
	r := newRow(t, scenario(fmt.Sprintf("burst %d: leaks", sc.burst), k))
	db := newDB(t, k, "")
	app := newDestApp(t)
	srv := newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url()}))
	srv.start()
	p := newProvider(t, srv.url(), 32)
	r.track(t, p)
	ctx := deadline(t, 20*time.Minute)

	// Warm-up: caches, pools and the runtime reach their working size.
	p.run(ctx, 32, min(2000, sc.burst), 0, nil, "warmup", 500)
	settleIdle(t, srv, p)
	base := srv.baseline()

	began := time.Now()
	p.run(ctx, 32, sc.burst, 0, nil, "burst", 500)
	ingest := time.Since(began)
	peak := srv.resources()
	o := settle(t, p, app, 10*time.Minute)
	drain := time.Since(began)
	settleIdle(t, srv, p)
	after, back := srv.settleResources(base, 30*time.Second, 5, 4)
	m := srv.mustMetrics()
	srv.stop()
	o.check(t, r)

	t.Logf("base %s; end of ingest %s; after %s", base, peak, after)
	if !back {
		t.Errorf("goroutines or fds did not return to the baseline: base %s, after %s", base, after)
	}
	// RSS: the Go heap gives memory back to the OS lazily and SQLite keeps
	// its page caches, so "near" is: at most 64 MiB above the baseline.
	if grow := after.RSSKiB - base.RSSKiB; grow > 64<<10 {
		t.Errorf("RSS grew by %d MiB over the burst (base %s, after %s)", grow>>10, base, after)
	}
	if m[mPending] != 0 || m[mDead] != 0 {
		t.Errorf("after the burst: pending %v, dead %v; want 0 and 0", m[mPending], m[mDead])
	}
	r.figure("ingest %.0f events/s, delivered all in %s (%.0f/s); goroutines %d→%d→%d, fds %d→%d→%d, threads %d→%d→%d, RSS %.0f→%.0f→%.0f MiB",
		float64(sc.burst)/ingest.Seconds(), drain.Round(100*time.Millisecond), float64(sc.burst)/drain.Seconds(),
		base.Goroutines, peak.Goroutines, after.Goroutines, base.FDs, peak.FDs, after.FDs,
		base.Threads, peak.Threads, after.Threads,
		float64(base.RSSKiB)/1024, float64(peak.RSSKiB)/1024, float64(after.RSSKiB)/1024)
}
