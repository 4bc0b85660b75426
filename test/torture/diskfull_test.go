package torture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fill writes a filler file until the file system says ENOSPC, in shrinking
// chunks, so that not even a page is left. It returns the bytes written.
func fill(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for chunk := 1 << 20; chunk >= 512; chunk /= 2 {
		buf := make([]byte, chunk)
		for i := range buf {
			buf[i] = 0xA5 // not zeros: a file system may not store zero pages
		}
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill: %v", err)
				}
				break
			}
		}
	}
	_ = f.Sync()
	return n
}

// diskUsage describes the file system of dir.
func diskUsage(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err.Error()
	}
	total, free := st.Blocks*uint64(st.Bsize), st.Bavail*uint64(st.Bsize)
	return fmt.Sprintf("disk %.1f of %.1f MiB used", float64(total-free)/(1<<20), float64(total)/(1<<20))
}

// walSize describes the database file and its WAL (os.Stat only: opening
// them would be harmless here, from another process, but is not needed).
func walSize(db string) string {
	var d, w int64
	if st, err := os.Stat(db); err == nil {
		d = st.Size()
	}
	if st, err := os.Stat(db + "-wal"); err == nil {
		w = st.Size()
	}
	return fmt.Sprintf("database %.1f MiB, WAL %.1f MiB", float64(d)/(1<<20), float64(w)/(1<<20))
}

// TestDiskFull is promise 5 (honest status codes) and promise 1 on a full
// disk: the database (SQLite's file, or PostgreSQL's whole data directory,
// tables and WAL) is on a small tmpfs filled to the last byte by a filler
// file. While it is full, every answer must be 503 with Retry-After unless
// the event really was recorded (SQLite can still commit into room left in
// its WAL file, PostgreSQL into WAL and table pages it had allocated; such
// a 200 is honest, and is checked: its claim must be in the store and it
// must be delivered). Nothing acknowledged before may be damaged, and once
// the filler is deleted the same serve process, without a restart, accepts
// again. If PostgreSQL itself stops (a WAL write that fails is a PANIC:
// the server restarts its processes, and gives up if it cannot recover),
// the test starts it again, as its service manager would, and reports it.
func TestDiskFull(t *testing.T) { forEachStore(t, diskFull) }

func diskFull(t *testing.T, k storeKind) {
	sc := setup(t).on(k)
	requireRoot(t)
	fullFor, readyWithin := 10*time.Second, 15*time.Second
	if k == onPostgres {
		// PostgreSQL may go on committing into WAL it had allocated
		// before the fill, and a PANIC restarts it.
		fullFor, readyWithin = 30*time.Second, 60*time.Second
	}
	r := newRow(t, scenario("disk full (tmpfs "+sc.diskSize+")", k))
	data := filepath.Join(sharedDir(t, "torture-full-"), "data")
	mountTmpfs(t, data, sc.diskSize)
	if err := os.Chmod(data, 0o755); err != nil { // mounted 0700, root's: for the postgres user
		t.Fatal(err)
	}
	db := newDB(t, k, data)
	app := newDestApp(t)
	srv := newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url()}))
	srv.start()
	pid := srv.pid()
	p := newProvider(t, srv.url(), 8)
	r.track(t, p)
	ctx := deadline(t, 10*time.Minute)

	var (
		while200, filling200, while503, noRetryAfter, other, notReady int
		resentAccepted, resentDuplicate, pgRestarts                   int
		fillBytes                                                     int64
		mu                                                            sync.Mutex
		phase                                                         atomic.Int32 // 0 normal, 1 filling, 2 full
	)
	// Every answer while the disk is (being) filled is counted; 200s must
	// be recorded, which settle and checkClaims check at the end.
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
		// Normal traffic first: these acknowledgements must survive.
		p.run(ctx, 8, 300, 0, nil, fmt.Sprintf("before%d", cycle), 1000)

		// The disk fills up under load: a provider keeps sending (and
		// retrying) from before the fill until after the space is freed.
		bg, stopBG := context.WithCancel(ctx)
		var load sync.WaitGroup
		load.Go(func() { p.run(bg, 4, 0, 200, nil, fmt.Sprintf("load%d", cycle), 1000) })
		time.Sleep(300 * time.Millisecond)
		t.Logf("cycle %d: before the fill: %s, %s", cycle, db.sizes(), diskUsage(data))
		phase.Store(1)
		filler := filepath.Join(data, "filler")
		fillBytes += fill(t, filler)
		phase.Store(2)
		r.Faults++
		t.Logf("cycle %d: filled: %s, %s", cycle, db.sizes(), diskUsage(data))

		// Full: new events, each sent once, 4 at a time, until 200 answers
		// of 503 were seen (or fullFor passed). The provider retries them
		// later.
		var refused []string
		var seen503 atomic.Int64
		var next atomic.Int64
		var wg sync.WaitGroup
		until := time.Now().Add(fullFor)
		for w := 0; w < 4; w++ {
			wg.Go(func() {
				for seen503.Load() < 200 && time.Now().Before(until) {
					i := next.Add(1)
					id := fmt.Sprintf("evt_full%d_%07d", cycle, i)
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
			t.Fatalf("the server died while the disk was full; log:\n%s", logTail(srv.logPath, 30))
		}
		if seen503.Load() == 0 {
			t.Errorf("cycle %d: the disk was full and no request was answered 503", cycle)
		}
		if k == onSQLite {
			// Nothing acknowledged is damaged, even now (PostgreSQL's
			// checks come once it has room: it may be restarting).
			if ic := db.integrity(); ic != "ok" {
				t.Errorf("cycle %d: integrity_check while full: %s", cycle, ic)
			}
			if n, first := db.missing(p.ackedIDs()); n > 0 {
				t.Errorf("cycle %d: while full, %d acknowledged events have no claim (first %v)", cycle, n, first)
			}
		}

		// Free the space: the same process accepts again.
		t.Logf("cycle %d: after the 503 phase: %s, %s", cycle, db.sizes(), diskUsage(data))
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		phase.Store(0)
		t.Logf("cycle %d: filler deleted: %s, %s", cycle, db.sizes(), diskUsage(data))
		if k == onPostgres {
			if _, err := db.cluster.PID(); err != nil {
				pgRestarts++
				t.Logf("cycle %d: PostgreSQL stopped while its disk was full (%v); starting it again", cycle, err)
				if err := db.cluster.Restart(); err != nil {
					t.Fatalf("%v; PostgreSQL's log:\n%s", err, db.pgLog())
				}
			}
		}
		if !waitFor(readyWithin, func() bool { ok, _ := srv.ready(); return ok }) {
			_, why := srv.ready()
			t.Fatalf("cycle %d: not ready %s after space was freed: %s; log:\n%s", cycle, readyWithin, why, logTail(srv.logPath, 20))
		}
		if n, first := db.missing(p.ackedIDs()); n > 0 {
			t.Errorf("cycle %d: after the full disk, %d acknowledged events have no claim (first %v)", cycle, n, first)
		}
		// The provider retries what was refused: it must now be recorded,
		// as new (a 503 that had in fact recorded the event would come back
		// as a duplicate: not a lost event, but a dishonest answer).
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
		p.run(rctx, 8, 100, 0, nil, fmt.Sprintf("after%d", cycle), 1000)
		stopBG()
		load.Wait()
		if rctx.Err() != nil {
			_, why := srv.ready()
			t.Fatalf("cycle %d: 60 s after the filler was deleted, events are still refused: %s; %s; readyz: %s; log:\n%s",
				cycle, diskUsage(data), db.sizes(), why, logTail(srv.logPath, 10))
		}
		cancel()
		t.Logf("cycle %d: accepting again: %s, %s", cycle, db.sizes(), diskUsage(data))
		if srv.pid() != pid {
			t.Fatal("the server was restarted")
		}
	}
	if noRetryAfter > 0 {
		t.Errorf("%d answers 503 without Retry-After", noRetryAfter)
	}
	// On SQLite serve knows every commit's outcome: a 503 for an event it
	// recorded is dishonest. On PostgreSQL a commit whose answer was lost
	// has an unknown outcome, and 503 is then the honest answer (the retry
	// is a duplicate, delivered once): counted, not failed.
	if k == onSQLite && resentDuplicate > 0 {
		t.Errorf("%d events answered 503 while full were in fact recorded (their retry was a duplicate)", resentDuplicate)
	}
	o := settle(t, p, app, 60*time.Second)
	m := srv.mustMetrics()
	srv.stop()
	o.checkClaims(t, p, db)
	o.check(t, r)
	ic := db.integrity()
	if ic != "ok" {
		t.Errorf("%s at the end: %s", db.integrityName(), ic)
	}
	// A 200 while full is honest only if recorded: every one is checked by
	// checkClaims and settle above, so the wrong 200s are the lost ones.
	r.figure("while filling and full: %d×503 (all with Retry-After), %d×200 while filling and %d×200 once full (each one recorded), %d other, wrong 200s %d; "+
		"readyz not ready in %d/%d cycles; refused then resent: %d accepted, %d duplicate; %d commit errors; %s %s; filler %.1f MiB",
		while503, filling200, while200, other, max(o.Lost, o.Unclaimed), notReady, sc.diskCycles, resentAccepted, resentDuplicate,
		int(m[mCommitErrs]), db.integrityName(), ic, float64(fillBytes)/(1<<20))
	if k == onPostgres {
		pgLog := db.cluster.Log()
		r.figure("PostgreSQL started again %d times, its log has %d ENOSPC and %d PANIC lines",
			pgRestarts, strings.Count(pgLog, "No space left on device"), strings.Count(pgLog, "PANIC:"))
	}
}
