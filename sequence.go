package hookwarden

// What the receipts say about what is missing (SPEC 12): holes in a
// source's sequence of event numbers.

import (
	"context"
	"time"
)

// DefaultSequenceReset is how far forward a sequence may jump before the
// jump is taken as a new epoch rather than a hole (sources' sequence_reset).
const DefaultSequenceReset = 1_000_000

// Seq is an event's value in its source's sequence (sequence: json:PATH),
// with what the store needs to place it.
type Seq struct {
	Value int64
	// Reset: a jump forward by more than this starts a new epoch.
	Reset int64
	// Horizon is the source's retry horizon: a value below the epoch's first
	// one, arriving within this of the epoch's start, is a late retry of
	// the epoch (out of order at its start), not a jump backwards.
	Horizon time.Duration
}

// SeqPlace is where a new value v goes among an epoch's values [lo, hi]
// first received at start: true when it belongs to that epoch (inside it,
// within Reset after it, or a late arrival just below it), false when it
// starts a new epoch (a jump backwards, or forwards beyond Reset). Both
// stores apply it in the receipt's transaction.
func (q Seq) SeqPlace(lo, hi int64, start, at time.Time) bool {
	v := q.Value
	switch {
	case v >= lo && v <= hi:
		return true
	case v > hi:
		return v-hi <= q.Reset
	default:
		return lo-v <= q.Reset && at.Sub(start) <= q.Horizon
	}
}

// Hole states (SequenceHole.State).
const (
	// HoleMayStillArrive: younger than the source's retry horizon; the
	// platform's retries may still fill it.
	HoleMayStillArrive = "may_still_arrive"
	// HoleLost: older than the retry horizon: those events will not come.
	HoleLost = "lost"
)

// SequenceHole is a range of sequence values never received between two
// values that were, in one epoch of a source.
type SequenceHole struct {
	Kind    string    `json:"kind"` // "sequence_hole"
	Source  string    `json:"source"`
	Epoch   int64     `json:"epoch"`
	FromSeq int64     `json:"from_seq"`
	ToSeq   int64     `json:"to_seq"`
	Missing int64     `json:"missing"`
	Between TimeRange `json:"between"`
	State   string    `json:"state"`
}

// TimeRange is a from-to pair of times.
type TimeRange struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// SeqRange is one stored run of consecutive values received, with the
// receipt times of its two ends: the stores keep a source's values as
// these, merged as values arrive, so holes are the spaces between them.
type SeqRange struct {
	Epoch        int64
	Lo, Hi       int64
	LoAt, HiAt   time.Time
	EpochStarted time.Time
}

// HolesOf lists the holes between consecutive ranges (sorted by epoch, then
// Lo) of one source, as the state at now makes them: may_still_arrive while
// the later side's receipt is younger than horizon, else lost. Holes whose
// later side is older than keep (claims retention; 0: no limit) are left
// out: their ids may have been forgotten.
func HolesOf(source string, ranges []SeqRange, horizon, keep time.Duration, now time.Time) []SequenceHole {
	var out []SequenceHole
	for i := 1; i < len(ranges); i++ {
		a, b := ranges[i-1], ranges[i]
		if a.Epoch != b.Epoch || b.Lo <= a.Hi+1 {
			continue
		}
		if keep > 0 && now.Sub(b.LoAt) > keep {
			continue
		}
		h := SequenceHole{Kind: "sequence_hole", Source: source, Epoch: a.Epoch, FromSeq: a.Hi + 1, ToSeq: b.Lo - 1,
			Missing: b.Lo - a.Hi - 1, Between: TimeRange{From: a.HiAt, To: b.LoAt}, State: HoleLost}
		// A missing event was sent no later than its successor arrived; the
		// platform retries it for its horizon from then.
		later := h.Between.To
		if h.Between.From.After(later) {
			later = h.Between.From
		}
		if now.Sub(later) < horizon {
			h.State = HoleMayStillArrive
		}
		out = append(out, h)
	}
	return out
}

// SequenceLog is implemented by stores that keep sequence values
// (sequence: on a source): both of the project's.
type SequenceLog interface {
	// SequenceRanges returns the source's stored ranges, sorted by epoch
	// then Lo: as many rows as holes plus epochs, never a scan of history.
	SequenceRanges(ctx context.Context, source string) ([]SeqRange, error)
}

// AddSequenceHoles fills rep.SequenceHoles for every source of opt with a
// sequence, when s keeps them.
func AddSequenceHoles(ctx context.Context, s any, rep *GapReport, opt GapOptions) error {
	sl, ok := s.(SequenceLog)
	if !ok {
		return nil
	}
	for _, p := range opt.Sources {
		if !p.Sequence {
			continue
		}
		rs, err := sl.SequenceRanges(ctx, p.Name)
		if err != nil {
			return err
		}
		rep.SequenceHoles = append(rep.SequenceHoles, HolesOf(p.Name, rs, p.RetryHorizon, p.KeepClaims, rep.Now)...)
	}
	return nil
}
