package torture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/pgtest"
)

// TestSmallDiskSustainedLoad is the other side of promise 5: a disk with room
// must not be refused. The database lives on a small tmpfs (24 MiB short, 64
// MiB long) and its data stays a fraction of it, while a provider sends
// without pause and the workers deliver: sustained writes with concurrent
// readers. The WAL must stay under half the disk. If it grows until the disk
// is full, the server answers 503 for lack of space only its own WAL took;
// the test then probes whether it recovers once the load stops, and restarts
// it if not, so that the verdict on lost events stays separate.
//
// On PostgreSQL the cluster's data directory is on the tmpfs (160 MiB short,
// 256 MiB long: initdb's files and the first WAL segments take about 60 MiB),
// and the WAL is pg_wal. PostgreSQL's defaults keep up to max_wal_size (1 GB)
// of WAL between checkpoints, more than such a disk: pgSmallDiskSettings
// bound it, as an operator of a small disk must.
func TestSmallDiskSustainedLoad(t *testing.T) { forEachStore(t, smallDiskSustainedLoad) }

// pgSmallDiskSettings bound PostgreSQL's WAL on the small disk: a
// checkpoint is due once 48 MB of WAL were written (or 30 s passed), and at
// most 32 MB of old segments are kept for reuse.
var pgSmallDiskSettings = pgtest.Settings{
	"max_wal_size":       "'48MB'",
	"min_wal_size":       "'32MB'",
	"checkpoint_timeout": "'30s'",
}

func smallDiskSustainedLoad(t *testing.T, k storeKind) {
	sc := setup(t).on(k)
	requireRoot(t)
	r := newRow(t, scenario("sustained load, small disk (tmpfs "+sc.smallDiskSize+")", k))
	data := filepath.Join(sharedDir(t, "torture-small-"), "data")
	mountTmpfs(t, data, sc.smallDiskSize)
	if err := os.Chmod(data, 0o755); err != nil { // for the postgres user
		t.Fatal(err)
	}
	disk := usedBytes(data) + freeBytes(data)
	db := newDB(t, k, data, pgSmallDiskSettings)
	app := newDestApp(t)
	srv := newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url()}))
	srv.start()
	p := newProvider(t, srv.url(), 8)
	r.track(t, p)

	var refused, firstRefusal atomic.Int64
	began := time.Now()
	p.observe = func(_ string, a answer) {
		if a.Code == 503 && refused.Add(1) == 1 {
			firstRefusal.Store(int64(time.Since(began)))
		}
	}
	var maxWAL, maxUsed atomic.Int64
	ctx, stop := context.WithTimeout(context.Background(), sc.smallDiskFor)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { p.run(ctx, 8, 0, 300, nil, "small", 100) })
	wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if w := db.walBytes(); w > maxWAL.Load() {
				maxWAL.Store(w)
			}
			if u := usedBytes(data); u > maxUsed.Load() {
				maxUsed.Store(u)
			}
		}
	})
	wg.Wait()
	atEnd := fmt.Sprintf("%s, %s", db.sizes(), diskUsage(data))

	// Does it accept again once the load has stopped, without a restart?
	time.Sleep(3 * time.Second)
	probes, probeOK := 20, 0
	for i := 0; i < probes; i++ {
		id := fmt.Sprintf("evt_probe_%03d", i)
		body := eventBody(id, "torture.probe", i, 100)
		ev := p.register(id, body)
		a := p.attempt(context.Background(), id, body)
		p.mu.Lock()
		ev.Attempts++
		if a.Code == 200 {
			probeOK++
			ev.Acked, ev.Status = true, a.Status
		}
		p.mu.Unlock()
	}
	restarted := false
	if probeOK < probes {
		_, why := srv.ready()
		t.Errorf("%d of %d events refused 3 s after the load stopped (%s; readyz: %s): it does not recover without a restart",
			probes-probeOK, probes, atEnd, why)
		srv.stop()
		srv.start()
		restarted = true
	}

	o := settle(t, p, app, 60*time.Second)
	final := db.sizes()
	srv.stop()
	o.checkClaims(t, p, db)
	o.check(t, r)
	r.Faults = int(refused.Load())
	if n := refused.Load(); n > 0 {
		t.Errorf("%d requests answered 503 on a disk the data does not fill (first after %s); peak WAL %.1f MiB, peak disk use %.1f of %.0f MiB; at the end of the load: %s",
			n, time.Duration(firstRefusal.Load()).Round(100*time.Millisecond), mib(maxWAL.Load()), mib(maxUsed.Load()), mib(disk), atEnd)
	}
	if maxWAL.Load() > disk/2 {
		t.Errorf("the WAL reached %.1f MiB on a %.0f MiB disk, want at most half", mib(maxWAL.Load()), mib(disk))
	}
	r.figure("%s at 300 events/s: peak WAL %.1f MiB, peak disk use %.1f of %.0f MiB, %d answers 503; after: %s",
		sc.smallDiskFor, mib(maxWAL.Load()), mib(maxUsed.Load()), mib(disk), refused.Load(), final)
	if k == onPostgres {
		r.figure("max_wal_size 48MB, min_wal_size 32MB, checkpoint_timeout 30s")
	}
	if restarted {
		r.figure("a restart was needed to accept again")
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// freeBytes is how much of dir's file system is free.
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// usedBytes is how much of dir's file system is in use.
func usedBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks-st.Bavail) * int64(st.Bsize)
}
