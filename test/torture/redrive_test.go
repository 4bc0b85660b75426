package torture

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDoublesAndRedrive is promises 2 and 3: 64 concurrent copies of each of
// 100 event ids (each copy its own delivery attempt: new webhook-id, new
// signature) create one job each and are all answered 200; then a redrive of
// already-processed events creates zero new jobs and zero new deliveries,
// every answer 200 "duplicate".
func TestDoublesAndRedrive(t *testing.T) { forEachStore(t, doublesAndRedrive) }

func doublesAndRedrive(t *testing.T, k storeKind) {
	sc := setup(t).on(k)
	r := newRow(t, scenario(fmt.Sprintf("doubles 100×64 + redrive %d", sc.redrive), k))
	db := newDB(t, k, "")
	app := newDestApp(t)
	srv := newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url()}))
	srv.start()
	p := newProvider(t, srv.url(), 256)
	r.track(t, p)
	ctx := deadline(t, 10*time.Minute)

	// 64 concurrent copies of each of 100 ids, 4 ids at a time (256 requests
	// in flight), released together.
	const ids, copies = 100, 64
	type tally struct{ accepted, duplicate, other atomic.Int64 }
	var tal [ids]tally
	for base := 0; base < ids; base += 4 {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := base; i < base+4; i++ {
			id := fmt.Sprintf("evt_double_%03d", i)
			body := eventBody(id, "torture.double", i, 500)
			for c := 0; c < copies; c++ {
				wg.Go(func() {
					<-start
					a := p.deliver(ctx, id, body, nil)
					switch {
					case a.Code == 200 && a.Status == "accepted":
						tal[i].accepted.Add(1)
					case a.Code == 200 && a.Status == "duplicate":
						tal[i].duplicate.Add(1)
					default:
						tal[i].other.Add(1)
					}
				})
			}
		}
		close(start)
		wg.Wait()
	}
	r.Faults += ids * copies
	for i := range tal {
		if a, d, o := tal[i].accepted.Load(), tal[i].duplicate.Load(), tal[i].other.Load(); a != 1 || d != copies-1 || o != 0 {
			t.Errorf("evt_double_%03d: %d accepted, %d duplicate, %d other; want 1, %d, 0", i, a, d, o, copies-1)
		}
	}

	// Events processed normally, then redriven.
	p.run(ctx, 16, sc.redrive, 0, nil, "redrive", 500)
	o := settle(t, p, app, 120*time.Second)
	if o.Lost > 0 {
		o.check(t, r)
		t.FailNow()
	}
	if !waitFor(30*time.Second, func() bool { m, err := srv.metrics(); return err == nil && m[mPending] == 0 }) {
		t.Fatal("outbox not drained before the redrive")
	}
	jobs0, receipts0 := db.count("jobs"), db.count("receipts")
	if want := ids + sc.redrive; jobs0 != want {
		t.Errorf("jobs before the redrive: %d, want %d (one per event id)", jobs0, want)
	}
	dels0 := app.delivered.Load()
	m0 := srv.mustMetrics()

	var redrive []string
	for _, id := range p.ackedIDs() {
		if strings.HasPrefix(id, "evt_redrive_") {
			redrive = append(redrive, id)
		}
	}
	if len(redrive) != sc.redrive {
		t.Fatalf("%d events to redrive, want %d", len(redrive), sc.redrive)
	}
	var dup, notDup atomic.Int64
	var firstOther atomic.Value
	began := time.Now()
	p.resend(ctx, 16, redrive, func(id string, a answer) {
		if a.Code == 200 && a.Status == "duplicate" {
			dup.Add(1)
			return
		}
		notDup.Add(1)
		firstOther.CompareAndSwap(nil, fmt.Sprintf("%s: HTTP %d %q %v", id, a.Code, a.Status, a.Err))
	})
	took := time.Since(began)
	r.Faults += len(redrive)
	time.Sleep(2500 * time.Millisecond) // past the workers' poll interval: a wrong job would be leased by now

	jobs1, receipts1 := db.count("jobs"), db.count("receipts")
	dels1 := app.delivered.Load()
	m1 := srv.mustMetrics()
	if notDup.Load() > 0 {
		t.Errorf("redrive: %d of %d first answers were not 200 duplicate (first: %v)", notDup.Load(), len(redrive), firstOther.Load())
	}
	if jobs1 != jobs0 {
		t.Errorf("redrive created %d new jobs, want 0", jobs1-jobs0)
	}
	if dels1 != dels0 {
		t.Errorf("redrive caused %d new deliveries, want 0", dels1-dels0)
	}
	if d := m1[mDelivered] - m0[mDelivered]; d != 0 {
		t.Errorf("hookwarden_deliveries_total{delivered} grew by %v during the redrive, want 0", d)
	}
	if got := receipts1 - receipts0; got < len(redrive) {
		t.Errorf("redrive recorded %d receipts, want at least %d (each duplicate is recorded)", got, len(redrive))
	}
	if m1[mPending] != 0 {
		t.Errorf("outbox pending %v after the redrive, want 0", m1[mPending])
	}
	o = settle(t, p, app, 10*time.Second)
	srv.stop()
	o.check(t, r)
	if o.Dups != 0 {
		t.Errorf("%d duplicate deliveries without any fault, want 0", o.Dups)
	}
	r.figure("doubles: 100 ids × 64 copies → 100 jobs, 100 deliveries; redrive %d: %d×200 duplicate, 0 new jobs, 0 new deliveries, %d receipts recorded, %.0f req/s",
		len(redrive), dup.Load(), receipts1-receipts0, float64(len(redrive))/took.Seconds())
}
