package torture

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
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
// device-mapper is not in this kernel (no dm-flakey, no dm-log-writes), so
// the model cuts at moments chosen by the test rather than between two
// arbitrary block writes; see docs/reliability.md.
func TestPowerLoss(t *testing.T) {
	sc := setup(t)
	requireRoot(t, "losetup", "mkfs.ext4")
	r := newRow(t, "power loss (loop ext4)")
	work := t.TempDir()
	ram := filepath.Join(work, "ram")
	mountTmpfs(t, ram, "1g") // the "device": image files in memory, fsync is cheap
	img := filepath.Join(ram, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 256<<20); err != nil {
		t.Fatal(err)
	}
	// No lazy init: no kernel thread writes to the device behind our back.
	run(t, "mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", img)
	mnt := filepath.Join(work, "mnt")
	lm := mountLoop(t, img, mnt)

	app := newDestApp(t)
	db := filepath.Join(mnt, "hw.db")
	srv := newServer(t, work, serverConfig{DBPath: db, DestURL: app.url()})
	p := newProvider(t, srv.url(), 16)
	r.track(t, p)

	var canaryKept, canaryLost int
	for cut := 0; cut < sc.powerCuts; cut++ {
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

		// The cut.
		srv.freeze()
		next := img + ".next"
		if err := copySparse(img, next); err != nil {
			t.Fatal(err)
		}
		srv.kill9()
		r.Faults++
		stopLoad()
		load.Wait()
		lm.unmount() // flushes the lost page cache into the old image: discarded
		if err := os.Rename(next, img); err != nil {
			t.Fatal(err)
		}
		lm = mountLoop(t, img, mnt) // power back: journal replay

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

	srv.start()
	o := settle(t, p, app, 120*time.Second)
	srv.stop()
	o.checkClaims(t, p, db)
	o.check(t, r)
	if o.Acked < 200 {
		t.Errorf("only %d events acknowledged: the load did not reach the server", o.Acked)
	}
	if ic := integrityCheck(t, db); ic != "ok" {
		t.Errorf("integrity_check after %d cuts: %s", sc.powerCuts, ic)
	}
	fsck := "n/a"
	lm.unmount()
	if out, err := exec.Command("e2fsck", "-f", "-n", img).CombinedOutput(); err == nil {
		fsck = "clean"
	} else {
		fsck = "not clean"
		t.Logf("e2fsck -n after the last clean unmount: %v\n%s", err, out)
	}
	r.figure("unsynced canaries lost %d/%d; integrity_check ok; e2fsck %s; %d network errors", canaryLost, sc.powerCuts, fsck, p.netErrs.Load())
}
