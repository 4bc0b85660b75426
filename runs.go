package hookwarden

// Runs of serve and the gaps between them (hookwarden gaps).

import (
	"cmp"
	"slices"
	"sort"
	"time"
)

// SourcePolicy is what gaps needs to know of a configured source.
type SourcePolicy struct {
	Name string
	// RetryHorizon is how long the provider keeps retrying an undelivered
	// event; a window longer than this may have lost events for good.
	RetryHorizon time.Duration
	// ExpectWithin: silence longer than this is reported (0: not checked).
	ExpectWithin time.Duration
	// Backfill: the source's backfill: settings (zero: none).
	Backfill BackfillPolicy
	// Sequence: the source has sequence: (its holes are listed).
	Sequence bool
	// EventTime: the source has event_time: (late arrivals are counted).
	EventTime bool
	// KeepClaims is how long claims are kept (retention.claims): holes
	// older than this are no longer listed (0: no limit).
	KeepClaims time.Duration
}

// GapOptions tune Gaps.
type GapOptions struct {
	// Since drops windows that ended before it (zero: all history).
	Since time.Time
	// MinClean hides windows after a clean stop shorter than this: a restart
	// (deploy) is not an outage worth a line. Windows after a crash are
	// always listed. Default 5s.
	MinClean time.Duration
	// Stale is how old the heartbeat of the last run may be before that run
	// counts as dead: a little more than the heartbeat period (default 10s).
	Stale time.Duration
	// Sources are the configured sources; without them only outages are
	// listed and none is flagged.
	Sources []SourcePolicy
}

// Outage is a window in which no serve process was running on the file.
type Outage struct {
	// Kind is "outage", or "restart": one instance's restart while another
	// served (several instances on one PostgreSQL store), no events missed,
	// or "unavailable": most of Source's requests were answered 503 (its
	// minutes; AddUnavailable).
	Kind string `json:"kind"`
	// Source is the source an "unavailable" window is about (the others
	// were served).
	Source string    `json:"source,omitempty"`
	Start  time.Time `json:"start"`
	// End is the start of the next run; zero while the window is open (no
	// run since, or the last run died): then Length runs to now.
	End           time.Time     `json:"end,omitzero"`
	Open          bool          `json:"open,omitempty"`
	Length        time.Duration `json:"-"`
	LengthSeconds float64       `json:"length_seconds"`
	// Crash is set when the run before the window ended without a clean
	// stop: Start is its last heartbeat, up to one heartbeat period before
	// it died.
	Crash bool `json:"crash"`
	// BeyondRetryHorizon lists the sources whose retry_horizon is shorter
	// than the window: events they sent in it may be lost for good.
	BeyondRetryHorizon []string `json:"beyond_retry_horizon,omitempty"`
	RunBefore          int64    `json:"run_before,omitempty"`
	RunAfter           int64    `json:"run_after,omitempty"`
	// Sources says, per configured source, what became of its events in
	// the window (GapsWithRecovery; none for a restart).
	Sources []SourceRecovery `json:"sources,omitempty"`
}

// Silence is a window longer than a source's expect_within with no request
type Silence struct {
	Source string `json:"source"`
	// Start is the last request before the silence (or Since / the first
	// run, when there was none); End the first request after it, zero if
	// none yet (Open).
	Start         time.Time     `json:"start"`
	End           time.Time     `json:"end,omitzero"`
	Open          bool          `json:"open,omitempty"`
	Length        time.Duration `json:"-"`
	LengthSeconds float64       `json:"length_seconds"`
	ExpectWithin  time.Duration `json:"-"`
	ExpectSeconds float64       `json:"expect_within_seconds"`
	// BeyondRetryHorizon: longer than the source's retry_horizon.
	BeyondRetryHorizon bool `json:"beyond_retry_horizon"`
	// Recovery and Backfill as for an outage's source (GapsWithRecovery);
	// a silence is never backfilled automatically.
	Recovery string       `json:"recovery,omitempty"`
	Backfill *BackfillRun `json:"backfill"`
}

// GapReport is the answer of Gaps.
type GapReport struct {
	Now      time.Time `json:"now"`
	Runs     int       `json:"runs"`
	Outages  []Outage  `json:"outages"`
	Silences []Silence `json:"silences"`
	// SequenceHoles are the holes in the sequences of the sources with a
	// sequence: (sequence.go), by source, epoch and value.
	SequenceHoles []SequenceHole `json:"sequence_holes"`
}

// Run is one serve process's record.
type Run struct {
	ID          int64
	StartedAt   time.Time
	HeartbeatAt time.Time
	StoppedAt   time.Time // zero: no clean stop (crashed, or still running)
	Version     string
	PID         int
	// Instance is the receiver the run belongs to (PostgreSQL: several at
	// once); empty for an SQLite file's own runs. A restart pairs two runs
	// of one instance.
	Instance string
}

// AddSilences appends the silences of every source of opt with an
// expect_within, as find reports them per source, in start order.
func (rep *GapReport) AddSilences(opt GapOptions, find func(SourcePolicy) ([]Silence, error)) error {
	for _, p := range opt.Sources {
		if p.ExpectWithin <= 0 {
			continue
		}
		sil, err := find(p)
		if err != nil {
			return err
		}
		rep.Silences = append(rep.Silences, sil...)
	}
	sort.SliceStable(rep.Silences, func(i, j int) bool { return rep.Silences[i].Start.Before(rep.Silences[j].Start) })
	return nil
}

// withDefaults fills in GapOptions' defaults.
func (opt GapOptions) withDefaults() GapOptions {
	if opt.MinClean <= 0 {
		opt.MinClean = 5 * time.Second
	}
	if opt.Stale <= 0 {
		opt.Stale = 10 * time.Second
	}
	return opt
}

// GapsOf is the report of the outages and restarts in runs at now (see
// Outages), with no silences yet: a store adds those (AddSilences).
func GapsOf(runs []Run, now time.Time, opt GapOptions) GapReport {
	return GapReport{Now: now, Runs: len(runs), Outages: Outages(runs, now, opt), Silences: []Silence{}, SequenceHoles: []SequenceHole{}}
}

// Outages lists, in start order, the windows when no run was up (kind
// "outage") and the restarts of one instance while other runs served (kind
// "restart", never beyond a retry horizon: the others received meanwhile),
// as the runs show them at now. The same for every store: an SQLite file's
// runs are one instance's (or an export's of several).
//
// A run is up from its start to its end: its clean stop, else its last
// heartbeat; a live run (no stop, a heartbeat at most Stale old) is up until
// now, so another instance's run starting between two of its heartbeats is
// no window. A later run of the same instance proves the one before it
// died (an SQLite file has one owner; on PostgreSQL two processes of one
// name count as one): it ends at its last heartbeat however fresh, so a
// kill -9 and a quick restart show their crash window at once.
// Runs may overlap (several instances, or two processes by mistake): an
// outage is a hole in the union of the runs, from the latest end before it
// to the next start. Windows after a clean stop shorter than MinClean are
// left out, and so are windows that ended before Since (an open one never).
func Outages(runs []Run, now time.Time, opt GapOptions) []Outage {
	opt = opt.withDefaults()
	runs = slices.Clone(runs)
	slices.SortStableFunc(runs, func(a, b Run) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	latest := map[string]int{} // per instance, its last run
	for i, r := range runs {
		latest[r.Instance] = i
	}
	ends := make([]time.Time, len(runs))
	for i, r := range runs {
		switch {
		case r.StoppedAt.IsZero() && now.Sub(r.HeartbeatAt) <= opt.Stale && latest[r.Instance] == i:
			ends[i] = now // alive
		case !r.StoppedAt.IsZero() && r.StoppedAt.After(r.HeartbeatAt):
			ends[i] = r.StoppedAt
		default:
			ends[i] = r.HeartbeatAt
		}
	}
	listed := func(o Outage) bool {
		return (o.Crash || o.Length >= opt.MinClean) && (o.Open || !o.End.Before(opt.Since))
	}
	out := []Outage{}
	// The holes in the union of [start, end], swept in start order; reach
	// is the latest end so far, last the run it belongs to. Every hole is
	// kept (holes) for restarts, listed or not.
	var holes []Outage
	var reach time.Time
	last := -1
	for i, r := range runs {
		if last >= 0 && r.StartedAt.After(reach) {
			holes = append(holes, Outage{Kind: "outage", Start: reach, End: r.StartedAt, Length: r.StartedAt.Sub(reach),
				Crash: runs[last].StoppedAt.IsZero(), RunBefore: runs[last].ID, RunAfter: r.ID})
		}
		if last < 0 || ends[i].After(reach) {
			reach, last = ends[i], i
		}
	}
	// A live run reaches now: only a dead or stopped last run leaves the
	// window since open.
	if last >= 0 && now.After(reach) {
		holes = append(holes, Outage{Kind: "outage", Start: reach, Open: true, Length: now.Sub(reach),
			Crash: runs[last].StoppedAt.IsZero(), RunBefore: runs[last].ID})
	}
	for _, o := range holes {
		if listed(o) {
			for _, p := range opt.Sources {
				if o.Length > p.RetryHorizon {
					o.BeyondRetryHorizon = append(o.BeyondRetryHorizon, p.Name)
				}
			}
			out = append(out, o)
		}
	}
	for _, o := range restarts(runs, ends, holes) {
		if listed(o) {
			out = append(out, o)
		}
	}
	slices.SortStableFunc(out, func(a, b Outage) int { return a.Start.Compare(b.Start) })
	for i := range out {
		out[i].LengthSeconds = out[i].Length.Seconds()
	}
	return out
}

// restarts pairs each run (in start order; ends[i] is runs[i]'s end) with
// the run of its instance that ended last at or before its start and is not
// paired yet (two processes may share a host's name), and lists the pair as
// a restart when other runs were up all the time between: when no hole of
// the union (holes, in order) lies between the one's end and the other's
// start. A restart with any moment of no run up holds an outage, listed as
// such instead.
func restarts(runs []Run, ends []time.Time, holes []Outage) []Outage {
	var out []Outage
	// unpaired holds, per instance, the runs not paired yet: in the usual
	// case one process at a time, at most one or two.
	unpaired := map[string][]int{}
	for i, r := range runs {
		cand := unpaired[r.Instance]
		best := -1
		for k, j := range cand {
			if !ends[j].After(r.StartedAt) && (best < 0 || ends[j].After(ends[cand[best]])) {
				best = k
			}
		}
		unpaired[r.Instance] = append(cand, i)
		if best < 0 {
			continue
		}
		prev := cand[best]
		unpaired[r.Instance] = slices.Delete(unpaired[r.Instance], best, best+1)
		p, stop := &runs[prev], ends[prev]
		if !r.StartedAt.After(stop) {
			continue // no time between: nothing to list
		}
		// The first hole ending after stop: covered unless it starts before r.
		h, _ := slices.BinarySearchFunc(holes, stop, func(o Outage, t time.Time) int {
			if o.Open || o.End.After(t) {
				return 1
			}
			return -1
		})
		if h < len(holes) && holes[h].Start.Before(r.StartedAt) {
			continue
		}
		out = append(out, Outage{Kind: "restart", Start: stop, End: r.StartedAt, Length: r.StartedAt.Sub(stop),
			Crash: p.StoppedAt.IsZero(), RunBefore: p.ID, RunAfter: r.ID})
	}
	return out
}
