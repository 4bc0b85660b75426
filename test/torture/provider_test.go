package torture

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden/internal/signature"
)

// sentEvent is what the provider knows of one event id.
type sentEvent struct {
	Body     []byte
	Sum      [32]byte
	Attempts int
	Acked    bool   // some attempt got a 2xx
	Status   string // body status of the first 2xx: accepted, duplicate
	Statuses map[string]int
}

// provider sends signed webhooks like a real provider: every attempt is a new
// delivery (new webhook-id, new timestamp, new signature) of the same event id
// and body, retried on anything but a 2xx until the context ends.
//
// Time is compressed: retries wait 5-50 ms, doubling to at most 200 ms, and a
// Retry-After is honoured as 1/25 of its value, capped at 200 ms.
type provider struct {
	t      testing.TB
	url    string
	client *http.Client
	seq    atomic.Int64 // delivery ids

	mu     sync.Mutex
	events map[string]*sentEvent

	attempts   atomic.Int64
	ok         atomic.Int64
	unavail    atomic.Int64 // 503
	unavailNoR atomic.Int64 // 503 without Retry-After
	netErrs    atomic.Int64
	unexpected atomic.Int64 // any other status
	lastOther  atomic.Value // string

	// observe, if set before sending starts, sees every answer.
	observe func(id string, a answer)

	// targets, if set (failover), replace url: attempts go to the current
	// one, and a network error moves every sender on to the next, as a load
	// balancer takes a receiver that refuses connections out of rotation.
	targets   []string
	target    atomic.Int64
	failovers atomic.Int64
}

// failover makes the provider send to urls in turn (see targets).
func (p *provider) failover(urls ...string) { p.targets = urls }

// current is the index in targets of where attempts go now.
func (p *provider) current() int { return int(p.target.Load()) % len(p.targets) }

func newProvider(t testing.TB, url string, conns int) *provider {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	p := &provider{t: t, url: url, events: map[string]*sentEvent{},
		client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	t.Cleanup(p.close)
	return p
}

func (p *provider) close() { p.client.CloseIdleConnections() }

// eventBody is the JSON body of event id with pad bytes of padding.
func eventBody(id, typ string, n, pad int) []byte {
	b := fmt.Appendf(nil, `{"id":%q,"type":%q,"n":%d,"data":{"pad":"`, id, typ, n)
	b = append(b, bytes.Repeat([]byte("x"), pad)...)
	return append(b, `"}}`...)
}

// register records that id is about to be sent with body (once per id).
func (p *provider) register(id string, body []byte) *sentEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := p.events[id]
	if ev == nil {
		ev = &sentEvent{Body: body, Sum: sha256.Sum256(body), Statuses: map[string]int{}}
		p.events[id] = ev
	}
	return ev
}

// answer is the outcome of one attempt.
type answer struct {
	Code       int
	Status     string
	RetryAfter string
	Err        error
	Latency    time.Duration
}

// attempt sends one delivery attempt of the event, signed anew.
func (p *provider) attempt(ctx context.Context, id string, body []byte) answer {
	p.attempts.Add(1)
	deliveryID := "msg_" + strconv.FormatInt(p.seq.Add(1), 36)
	start := time.Now()
	h, err := signature.Sign(signature.Params{Scheme: "standard", Secrets: []string{secret}}, body, start, deliveryID)
	if err != nil {
		p.t.Errorf("sign: %v", err)
		return answer{Err: err}
	}
	url, at := p.url, int64(0)
	if len(p.targets) > 0 {
		at = p.target.Load()
		url = p.targets[int(at)%len(p.targets)]
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{Err: err}
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		p.netErrs.Add(1)
		// The first sender to see the target fail moves everyone on.
		if len(p.targets) > 0 && ctx.Err() == nil && p.target.CompareAndSwap(at, at+1) {
			p.failovers.Add(1)
		}
		return answer{Err: err, Latency: time.Since(start)}
	}
	var res struct{ Status string }
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	_ = json.Unmarshal(b, &res)
	a := answer{Code: resp.StatusCode, Status: res.Status, RetryAfter: resp.Header.Get("Retry-After"), Latency: time.Since(start)}
	switch {
	case a.Code >= 200 && a.Code < 300:
		p.ok.Add(1)
	case a.Code == http.StatusServiceUnavailable:
		p.unavail.Add(1)
		if a.RetryAfter == "" {
			p.unavailNoR.Add(1)
		}
	default:
		p.unexpected.Add(1)
		p.lastOther.Store(fmt.Sprintf("HTTP %d %s", a.Code, bytes.TrimSpace(b)))
	}
	return a
}

// deliver sends the event until a 2xx or until ctx ends, and returns the last
// answer. onAnswer, if set, sees every attempt's answer.
func (p *provider) deliver(ctx context.Context, id string, body []byte, onAnswer func(answer)) answer {
	ev := p.register(id, body)
	backoff := 5 * time.Millisecond
	for {
		if ctx.Err() != nil {
			return answer{Err: ctx.Err()}
		}
		a := p.attempt(ctx, id, body)
		if onAnswer != nil {
			onAnswer(a)
		}
		if p.observe != nil {
			p.observe(id, a)
		}
		p.mu.Lock()
		ev.Attempts++
		if a.Err == nil {
			ev.Statuses[strconv.Itoa(a.Code)+" "+a.Status]++
		}
		if a.Code >= 200 && a.Code < 300 && !ev.Acked {
			ev.Acked, ev.Status = true, a.Status
		}
		p.mu.Unlock()
		if a.Code >= 200 && a.Code < 300 {
			return a
		}
		wait := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
		if ra, err := strconv.Atoi(a.RetryAfter); err == nil && ra > 0 {
			wait = max(wait, time.Duration(ra)*time.Second/25)
		}
		wait = min(wait, 200*time.Millisecond)
		backoff = min(2*backoff, 200*time.Millisecond)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return answer{Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// run sends events with conc senders: ids evt_TAG_0000000 upwards, until n
// events were sent (n > 0) or ctx ends. With rate > 0 each sender waits
// conc/rate between new events (rate per second in total; retries are not
// paced), except while burst (if not nil) is set: then all senders go flat
// out.
func (p *provider) run(ctx context.Context, conc, n int, rate float64, burst *atomic.Bool, tag string, pad int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Go(func() {
			var pause *time.Timer
			if rate > 0 {
				pause = time.NewTimer(0)
				defer pause.Stop()
			}
			for ctx.Err() == nil {
				if rate > 0 && (burst == nil || !burst.Load()) {
					// Spread the senders over the first interval.
					d := time.Duration(float64(conc) / rate * float64(time.Second) * (0.5 + rand.Float64()))
					pause.Reset(d)
					select {
					case <-ctx.Done():
						return
					case <-pause.C:
					}
				}
				i := int(next.Add(1)) - 1
				if n > 0 && i >= n {
					return
				}
				id := fmt.Sprintf("evt_%s_%07d", tag, i)
				p.deliver(ctx, id, eventBody(id, "torture."+tag, i, pad), nil)
			}
		})
	}
	wg.Wait()
}

// resend sends every id again (a redrive), with conc senders, and calls
// onAnswer with each first answer.
func (p *provider) resend(ctx context.Context, conc int, ids []string, onAnswer func(id string, a answer)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				id := ids[i]
				p.mu.Lock()
				body := p.events[id].Body
				p.mu.Unlock()
				first := true
				p.deliver(ctx, id, body, func(a answer) {
					if first {
						onAnswer(id, a)
						first = false
					}
				})
			}
		})
	}
	wg.Wait()
}

// ackedIDs returns the ids that got a 2xx, sorted.
func (p *provider) ackedIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for id, ev := range p.events {
		if ev.Acked {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (p *provider) counts() (events, acked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range p.events {
		events++
		if ev.Acked {
			acked++
		}
	}
	return events, acked
}

// outcome is the verdict of the promises over one run.
type outcome struct {
	Events, Acked int
	Lost          int // acked, never delivered
	Unclaimed     int // acked, no claim in the database (checkClaims)
	Dups          int // deliveries beyond the first per id
	Phantom       int // deliveries of ids never sent
	BadKey        int // deliveries whose Idempotency-Key is not SOURCE:EVENT_ID
	BadBody       int // deliveries whose body differs from what was sent
	lostIDs       []string
	unclaimedIDs  []string
}

// settle waits up to d for every acknowledged event to be delivered, then
// checks every promise about deliveries.
func settle(t testing.TB, p *provider, app *destApp, d time.Duration) outcome {
	t.Helper()
	acked := p.ackedIDs()
	waitFor(d, func() bool {
		for _, id := range acked {
			if !app.hasDelivery(id) {
				return false
			}
		}
		return true
	})
	var o outcome
	o.Events, o.Acked = p.counts()
	dels := app.deliveries()
	for _, id := range acked {
		if len(dels[id]) == 0 {
			o.Lost++
			if len(o.lostIDs) < 10 {
				o.lostIDs = append(o.lostIDs, id)
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, ds := range dels {
		ev := p.events[id]
		if ev == nil {
			o.Phantom += len(ds)
			continue
		}
		o.Dups += len(ds) - 1
		for _, d := range ds {
			if d.Key != sourceName+":"+id {
				o.BadKey++
			}
			if d.Sum != ev.Sum {
				o.BadBody++
			}
		}
	}
	return o
}

// check fails the test for every broken promise and fills the row.
func (o outcome) check(t testing.TB, r *row) {
	t.Helper()
	lost := max(o.Lost, o.Unclaimed) // a lower bound of the union; both are 0 when it matters
	r.Events, r.Acked, r.Lost, r.Dups = o.Events, o.Acked, lost, o.Dups
	if o.Lost > 0 {
		t.Errorf("LOST: %d acknowledged events never delivered (first: %v)", o.Lost, o.lostIDs)
	}
	if o.Unclaimed > 0 {
		t.Errorf("LOST: %d acknowledged events have no claim in the store (first: %v)", o.Unclaimed, o.unclaimedIDs)
	}
	if o.Phantom > 0 {
		t.Errorf("%d deliveries of event ids never sent", o.Phantom)
	}
	if o.BadKey > 0 {
		t.Errorf("%d deliveries with an Idempotency-Key other than SOURCE:EVENT_ID", o.BadKey)
	}
	if o.BadBody > 0 {
		t.Errorf("%d deliveries whose body differs from the bytes sent", o.BadBody)
	}
}

// percentile returns the p-th percentile (0..100) of ds (nearest rank).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
