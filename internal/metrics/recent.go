package metrics

import (
	"sync"
	"time"
)

// recentMinutes is how far back Recent can answer: one day of minute buckets.
const recentMinutes = 24 * 60

// recent counts request outcomes per source in one-minute buckets over the
// last day, for the dashboard's "last hour / last day" of what the database
// does not keep: refused requests store nothing, by design. It lives in
// memory, so it starts empty at each start (Started says since when).
type recent struct {
	mu    sync.Mutex
	rings map[recentKey]*minuteRing
}

type recentKey struct{ source, outcome string }

// minuteRing holds one count per minute; stamp says which minute (Unix
// minutes) a slot belongs to, so stale slots read as zero without a sweeper.
type minuteRing struct {
	count [recentMinutes]uint32
	stamp [recentMinutes]int64
}

func (r *recent) add(source, outcome string, now time.Time) {
	m := now.Unix() / 60
	i := m % recentMinutes
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rings == nil {
		r.rings = map[recentKey]*minuteRing{}
	}
	ring := r.rings[recentKey{source, outcome}]
	if ring == nil {
		ring = &minuteRing{}
		r.rings[recentKey{source, outcome}] = ring
	}
	if ring.stamp[i] != m {
		ring.stamp[i], ring.count[i] = m, 0
	}
	ring.count[i]++
}

// sum counts the outcomes in the last d (whole minutes, the current one
// included), up to one day.
func (r *recent) sum(source, outcome string, now time.Time, d time.Duration) int {
	m := now.Unix() / 60
	n := min(int64(d/time.Minute), recentMinutes)
	r.mu.Lock()
	defer r.mu.Unlock()
	ring := r.rings[recentKey{source, outcome}]
	if ring == nil {
		return 0
	}
	total := 0
	for k := int64(0); k < n; k++ {
		i := (m - k) % recentMinutes
		if ring.stamp[i] == m-k {
			total += int(ring.count[i])
		}
	}
	return total
}

// Recent returns how many of a source's requests ended with each of the
// outcomes given in the last d (at most a day), counted in memory since
// Started.
func (m *Metrics) Recent(source string, d time.Duration, outcomes ...string) int {
	now := time.Now()
	n := 0
	for _, o := range outcomes {
		n += m.recent.sum(source, o, now, d)
	}
	return n
}

// Started is when this Metrics began counting: Recent knows nothing older.
func (m *Metrics) Started() time.Time { return m.started }
