package torture

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

// sample is one reading of the outbox gauges.
type sample struct {
	At      time.Duration // since the start of the scenario
	Phase   string
	Age     float64 // hookwarden_outbox_oldest_pending_age_seconds
	Pending float64
	Retries float64
}

// TestDestinationOutage is promises 1 and 2 when the user's app is down: it
// refuses connections, then answers 503 (with Retry-After: 1), then answers
// only after the attempt timeout, then recovers. A provider keeps sending
// throughout. Nothing may be lost or dead-lettered, retries must back off
// (and honour Retry-After), everything must drain after recovery, and
// hookwarden_outbox_oldest_pending_age_seconds must tell the story: growing
// through the outage, back to 0 after it.
func TestDestinationOutage(t *testing.T) { forEachStore(t, destinationOutage) }

func destinationOutage(t *testing.T, k storeKind) {
	sc := setup(t).on(k)
	r := newRow(t, scenario("destination outage", k))
	db := newDB(t, k, "")
	app := newDestApp(t)
	app.retryAfter = "1"
	app.slowFor = 3 * time.Second
	const (
		timeout = 500 * time.Millisecond
		initial = 50 * time.Millisecond
		maxWait = time.Second
	)
	srv := newServer(t, t.TempDir(), db.config(serverConfig{DestURL: app.url(), Timeout: "500ms",
		Concurrency: 4, BackoffInit: "50ms", BackoffMax: "1s", MaxAttempts: 10000}))
	srv.start()
	p := newProvider(t, srv.url(), 4)
	r.track(t, p)
	begin := time.Now()

	// The story, sampled from /metrics every 250 ms.
	var (
		mu      sync.Mutex
		phase   = "up"
		samples []sample
	)
	setPhase := func(ph string, m destMode) {
		mu.Lock()
		phase = ph
		mu.Unlock()
		app.setMode(m)
	}
	sctx, stopSampling := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	bg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-tick.C:
			}
			m, err := srv.metrics()
			if err != nil {
				continue
			}
			mu.Lock()
			samples = append(samples, sample{At: time.Since(begin), Phase: phase,
				Age: m[mOldest], Pending: m[mPending], Retries: m[mRetry]})
			mu.Unlock()
		}
	})

	lctx, stopLoad := context.WithCancel(context.Background())
	bg.Go(func() { p.run(lctx, 4, 0, 50, nil, "outage", 300) })
	time.Sleep(time.Second)
	outageStart := time.Now()
	setPhase("refused", modeRefused)
	time.Sleep(sc.outagePhase)
	setPhase("503", mode503)
	time.Sleep(sc.outagePhase)
	setPhase("slow", modeSlow)
	time.Sleep(sc.outagePhase)
	outage := time.Since(outageStart)
	setPhase("recovered", modeOK)
	time.Sleep(time.Second)
	stopLoad()

	o := settle(t, p, app, 60*time.Second+2*outage)
	drained := waitFor(30*time.Second, func() bool {
		m, err := srv.metrics()
		return err == nil && m[mPending] == 0 && m[mOldest] == 0
	})
	time.Sleep(300 * time.Millisecond) // one last sample
	stopSampling()
	bg.Wait()
	m := srv.mustMetrics()
	srv.stop()
	o.check(t, r)
	r.Faults = int(m[mRetry])
	if !drained {
		t.Errorf("outbox did not drain after recovery: pending %v, oldest age %vs", m[mPending], m[mOldest])
	}
	if m[mDead] != 0 {
		t.Errorf("%v dead letters after an outage shorter than the retry budget", m[mDead])
	}

	// The story: the oldest pending age grows with the outage and returns to 0.
	var maxAge, maxPending float64
	byPhase := map[string][2]float64{}
	for _, s := range samples {
		maxAge, maxPending = math.Max(maxAge, s.Age), math.Max(maxPending, s.Pending)
		v := byPhase[s.Phase]
		byPhase[s.Phase] = [2]float64{math.Max(v[0], s.Age), math.Max(v[1], s.Pending)}
	}
	if want := 0.7 * outage.Seconds(); maxAge < want {
		t.Errorf("oldest pending age peaked at %.1fs, want at least %.1fs for a %.1fs outage", maxAge, want, outage.Seconds())
	}
	if last := samples[len(samples)-1]; last.Age != 0 || last.Pending != 0 {
		t.Errorf("last sample: age %.1fs, pending %v, want 0 and 0", last.Age, last.Pending)
	}
	var story []string
	for _, ph := range []string{"up", "refused", "503", "slow", "recovered"} {
		v := byPhase[ph]
		story = append(story, fmt.Sprintf("%s ≤%.1fs/%.0f", ph, v[0], v[1]))
	}
	t.Logf("outbox story (%d samples): %s", len(samples), strings.Join(story, ", "))

	// Retries follow the backoff, read from the attempt log. Full jitter
	// has no lower bound per attempt, so the check is on the mean delay
	// after attempt k, which must be at least 30%% of its ceiling
	// min(max, initial·2^(k-1)) (it is 50%% plus queueing when the backoff
	// works, and near 0 when it does not).
	gaps := attemptGaps(t, db)
	var gapNotes []string
	for k := 1; k <= 8; k++ {
		g := gaps[k]
		if len(g) < 20 {
			continue
		}
		ceiling := min(maxWait, time.Duration(float64(initial)*math.Exp2(float64(k-1))))
		var sum time.Duration
		for _, d := range g {
			sum += d
		}
		mean := sum / time.Duration(len(g))
		gapNotes = append(gapNotes, fmt.Sprintf("k=%d mean %s/ceiling %s (n=%d)", k, mean.Round(time.Millisecond), ceiling, len(g)))
		if mean < ceiling*3/10 {
			t.Errorf("delay after attempt %d: mean %s over %d retries, want at least 30%% of the backoff ceiling %s", k, mean, len(g), ceiling)
		}
	}
	t.Logf("retry delays: %s", strings.Join(gapNotes, ", "))

	// Retry-After: 1 is honoured (backoff.max is 1s): after a 503 the app
	// sees the next attempt of that event no sooner than 1 s later.
	var after503, early int
	for _, reqs := range app.requestsByID() {
		for i := 1; i < len(reqs); i++ {
			if reqs[i-1].Status == 503 {
				after503++
				if reqs[i].At.Sub(reqs[i-1].End) < time.Second-20*time.Millisecond {
					early++
				}
			}
		}
	}
	if early > 0 {
		t.Errorf("%d of %d retries after a 503 with Retry-After: 1 came sooner than 1s", early, after503)
	}
	if after503 == 0 {
		t.Errorf("no retry after a 503 was seen: the 503 phase did not reach hookwarden")
	}
	r.figure("outage %.0fs; oldest pending age / pending by phase: %s; both 0 after drain; %d retries after a 503 with Retry-After: 1, none early; dead 0",
		outage.Seconds(), strings.Join(story, ", "), after503)
}

// attemptGaps reads the attempt log and returns, per attempt number k, the
// delays between the end of attempt k and the start of attempt k+1 of the
// same job.
func attemptGaps(t *testing.T, db *testDB) map[int][]time.Duration {
	t.Helper()
	gaps := map[int][]time.Duration{}
	var lastJob int64 = -1
	var lastNum int
	var lastEnd time.Time
	for _, a := range db.attempts() {
		if a.Job == lastJob {
			if a.Number != lastNum+1 {
				t.Errorf("job %d: attempt %d follows attempt %d", a.Job, a.Number, lastNum)
			}
			gaps[lastNum] = append(gaps[lastNum], a.Started.Sub(lastEnd))
		}
		lastJob, lastNum, lastEnd = a.Job, a.Number, a.Started.Add(a.Duration)
	}
	return gaps
}
