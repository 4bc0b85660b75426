package hookwarden

// Runs of serve and the gaps between them (hookwarden gaps).

import (
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
	// served (several instances on one PostgreSQL store), no events missed.
	Kind  string    `json:"kind"`
	Start time.Time `json:"start"`
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
}

// Run is one serve process's record.
type Run struct {
	ID          int64
	StartedAt   time.Time
	HeartbeatAt time.Time
	StoppedAt   time.Time // zero: no clean stop (crashed, or still running)
	Version     string
	PID         int
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
