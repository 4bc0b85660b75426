package storetest

// Short names for the contract's filter, result and error types, as the
// suite uses them (they live in the root package, beside hookwarden.Store).

import "github.com/hookwarden/hookwarden"

type (
	EventFilter      = hookwarden.EventFilter
	EventSummary     = hookwarden.EventSummary
	EventDetail      = hookwarden.EventDetail
	JobInfo          = hookwarden.JobInfo
	EventStatus      = hookwarden.EventStatus
	DeadFilter       = hookwarden.DeadFilter
	DeadLetter       = hookwarden.DeadLetter
	Stats            = hookwarden.Stats
	ReplaySelector   = hookwarden.ReplaySelector
	ReplayOptions    = hookwarden.ReplayOptions
	ReplayResult     = hookwarden.ReplayResult
	Retention        = hookwarden.Retention
	PruneOptions     = hookwarden.PruneOptions
	PruneResult      = hookwarden.PruneResult
	GapOptions       = hookwarden.GapOptions
	GapReport        = hookwarden.GapReport
	SourcePolicy     = hookwarden.SourcePolicy
	QuarantineFilter = hookwarden.QuarantineFilter
	Held             = hookwarden.Held
	HeldDetail       = hookwarden.HeldDetail
	Release          = hookwarden.Release
	Released         = hookwarden.Released
	Direct           = hookwarden.Direct
	AuditRecord      = hookwarden.AuditEntry
)

// RunRecord is the store's Run (one serve process's record), renamed here
// only because Run is the suite's entry point.
type RunRecord = hookwarden.Run

const (
	StatusPending     = hookwarden.StatusPending
	StatusDelivered   = hookwarden.StatusDelivered
	StatusDead        = hookwarden.StatusDead
	StatusQuarantined = hookwarden.StatusQuarantined

	SkipNeedsForce = hookwarden.SkipNeedsForce
	SkipPruned     = hookwarden.SkipPruned
	SkipInFlight   = hookwarden.SkipInFlight
	SkipNotFound   = hookwarden.SkipNotFound
	SkipNoJobs     = hookwarden.SkipNoJobs

	// ForceAfter is the 3-strikes rule: dead-lettered this often, a job
	// needs Force to be replayed.
	ForceAfter = hookwarden.ForceAfter
)

var (
	ErrAlreadyClaimed = hookwarden.ErrAlreadyClaimed
	ErrReleased       = hookwarden.ErrReleased
	ErrExists         = hookwarden.ErrExists
)
