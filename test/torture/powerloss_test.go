package torture

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestPowerLoss is promise 1 under a power-loss model: the database lives on
// an ext4 image attached to a loop device, and a "power cut" keeps only what
// had reached the device.
//
// The cut: SIGSTOP every thread of the server (from then on it issues no
// syscall), copy the image file (what the device holds: everything fsynced,
// nothing that was only in the page cache of the ext4 on top), SIGKILL, throw
// the mounted file system and its page cache away, and mount the copy, which
// replays the ext4 journal as after a real power loss. A canary written
// without fsync just before each cut must be gone after it and a canary
// written with fsync must be there: that proves the model drops unsynced
// writes, so a store that answered 200 before its fsync (or ran with
// synchronous=NORMAL) would lose acknowledged events here.
//
// On PostgreSQL the cluster's data directory (tables and WAL) is on the
// image, and the cut freezes every postgres process as well as serve before
// the copy; after it the cluster starts on the copy (its crash recovery
// replays the WAL) and serve on the cluster. pg_amcheck checks the tables
// and indexes at the end instead of integrity_check.
//
// device-mapper is not in this kernel (no dm-flakey, no dm-log-writes), so
// the model cuts at moments chosen by the test rather than between two
// arbitrary block writes; see docs/reliability.md.
func TestPowerLoss(t *testing.T) { forEachStore(t, powerLoss) }

func powerLoss(t *testing.T, k storeKind) {
	sc := setup(t).on(k)
	requireRoot(t, "losetup", "mkfs.ext4")
	r := newRow(t, scenario("power loss (loop ext4)", k))
	work := sharedDir(t, "torture-power-")
	ram := filepath.Join(work, "ram")
	mountTmpfs(t, ram, "1g") // the "device": image files in memory, fsync is cheap
	img := filepath.Join(ram, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// PostgreSQL's cluster takes about 40 MiB before its first WAL segments.
	size := int64(256 << 20)
	if k == onPostgres {
		size = 512 << 20
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	// No lazy init: no kernel thread writes to the device behind our back.
	run(t, "mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", img)
	mnt := filepath.Join(work, "mnt")
	lm := mountLoop(t, img, mnt)
	if err := os.Chmod(mnt, 0o755); err != nil { // for the postgres user
		t.Fatal(err)
	}

	app := newDestApp(t)
	db := newDB(t, k, mnt)
	srv := newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url()}))
	p := newProvider(t, srv.url(), 16)
	r.track(t, p)

	pgRecovered := 0
	if k == onPostgres {
		// pgtest's initdb skips its own flush (--no-sync); an installation's
		// does not: what initdb wrote is on the device before the first cut.
		syscall.Sync()
	}
	var canaryKept, canaryLost int
	for cut := 0; cut < sc.powerCuts; cut++ {
		if k == onPostgres && cut > 0 {
			// Power back for PostgreSQL: crash recovery from its WAL.
			if err := db.cluster.Restart(); err != nil {
				t.Fatalf("cut %d: PostgreSQL does not start on the copy: %v; its log:\n%s", cut, err, db.pgLog())
			}
			pgRecovered++
		}
		srv.start()
		ctx, stopLoad := context.WithCancel(context.Background())
		var load sync.WaitGroup
		var burst atomic.Bool
		load.Go(func() { p.run(ctx, 16, 0, killRate, &burst, fmt.Sprintf("power%03d", cut), 200) })
		time.Sleep(500*time.Millisecond + time.Duration(rand.Int64N(int64(2*time.Second))))
		burst.Store(true)
		time.Sleep(sc.killBurst)

		content := bytes.Repeat([]byte(fmt.Sprintf("canary %d ", cut)), 8<<10)
		synced := filepath.Join(mnt, fmt.Sprintf("canary-%d-synced", cut))
		unsynced := filepath.Join(mnt, fmt.Sprintf("canary-%d-unsynced", cut))
		if err := writeCanary(synced, content, true); err != nil {
			t.Fatal(err)
		}
		if err := writeCanary(unsynced, content, false); err != nil {
			t.Fatal(err)
		}

		// The cut: nothing of serve or PostgreSQL runs from the moment
		// the image is copied.
		srv.freeze()
		pg := 0
		if k == onPostgres {
			pg = db.freezePG()
		}
		next := img + ".next"
		if err := copySparse(img, next); err != nil {
			t.Fatal(err)
		}
		srv.kill9()
		if k == onPostgres {
			db.killPG(pg)
		}
		r.Faults++
		stopLoad()
		load.Wait()
		lm.unmount() // flushes the lost page cache into the old image: discarded
		if err := os.Rename(next, img); err != nil {
			t.Fatal(err)
		}
		lm.mount() // power back: journal replay

		if got, err := os.ReadFile(synced); err != nil || !bytes.Equal(got, content) {
			t.Fatalf("cut %d: fsynced canary damaged (%d bytes, %v): the model loses synced data", cut, len(got), err)
		}
		if got, _ := os.ReadFile(unsynced); bytes.Equal(got, content) {
			canaryKept++
		} else {
			canaryLost++
		}
	}
	if canaryKept > 0 {
		t.Errorf("%d of %d unsynced canaries survived the cut: the model does not drop unsynced writes", canaryKept, sc.powerCuts)
	}

	if k == onPostgres {
		if err := db.cluster.Restart(); err != nil {
			t.Fatalf("PostgreSQL does not start on the copy: %v; its log:\n%s", err, db.pgLog())
		}
		pgRecovered++
	}
	srv.start()
	o := settle(t, p, app, 120*time.Second)
	srv.stop()
	o.checkClaims(t, p, db)
	o.check(t, r)
	if o.Acked < 200 {
		t.Errorf("only %d events acknowledged: the load did not reach the server", o.Acked)
	}
	ic := db.integrity()
	if ic != "ok" {
		t.Errorf("%s after %d cuts: %s", db.integrityName(), sc.powerCuts, ic)
	}
	if k == onPostgres {
		// Each start on a copy must have been a crash recovery, not the
		// start of a cleanly stopped cluster: else the cut cut nothing.
		if n := strings.Count(db.cluster.Log(), "automatic recovery in progress"); n != pgRecovered {
			t.Errorf("PostgreSQL logged %d crash recoveries for %d starts on a copy", n, pgRecovered)
		}
		// Off the mount before the last unmount and e2fsck.
		if err := db.cluster.Stop(); err != nil {
			t.Error(err)
		}
	}
	fsck := "n/a"
	lm.unmount()
	if out, err := exec.Command("e2fsck", "-f", "-n", img).CombinedOutput(); err == nil {
		fsck = "clean"
	} else {
		fsck = "not clean"
		t.Logf("e2fsck -n after the last clean unmount: %v\n%s", err, out)
	}
	r.figure("unsynced canaries lost %d/%d; %s %s; e2fsck %s; %d network errors", canaryLost, sc.powerCuts, db.integrityName(), ic, fsck, p.netErrs.Load())
	if k == onPostgres {
		r.figure("PostgreSQL started on the copy %d times, each a crash recovery", pgRecovered)
	}
}
