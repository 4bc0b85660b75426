package storetest

// The filter, result and error names of the store contract, as the suite
// uses them. They live in sqlitestore today and move to the root package
// with the same names; this file is the only one of the suite that names
// their package, so the move changes it alone.

import "github.com/hookwarden/hookwarden/sqlitestore"

type (
	EventFilter      = sqlitestore.EventFilter
	EventSummary     = sqlitestore.EventSummary
	EventDetail      = sqlitestore.EventDetail
	JobInfo          = sqlitestore.JobInfo
	EventStatus      = sqlitestore.EventStatus
	DeadFilter       = sqlitestore.DeadFilter
	DeadLetter       = sqlitestore.DeadLetter
	Stats            = sqlitestore.Stats
	ReplaySelector   = sqlitestore.ReplaySelector
	ReplayOptions    = sqlitestore.ReplayOptions
	ReplayResult     = sqlitestore.ReplayResult
	Retention        = sqlitestore.Retention
	PruneOptions     = sqlitestore.PruneOptions
	PruneResult      = sqlitestore.PruneResult
	GapOptions       = sqlitestore.GapOptions
	GapReport        = sqlitestore.GapReport
	SourcePolicy     = sqlitestore.SourcePolicy
	QuarantineFilter = sqlitestore.QuarantineFilter
	Held             = sqlitestore.Held
	HeldDetail       = sqlitestore.HeldDetail
	Release          = sqlitestore.Release
	Released         = sqlitestore.Released
	Direct           = sqlitestore.Direct
	AuditRecord      = sqlitestore.AuditRecord
)

// RunRecord is the store's Run (one serve process's record), renamed here
// only because Run is the suite's entry point.
type RunRecord = sqlitestore.Run

const (
	StatusPending     = sqlitestore.StatusPending
	StatusDelivered   = sqlitestore.StatusDelivered
	StatusDead        = sqlitestore.StatusDead
	StatusQuarantined = sqlitestore.StatusQuarantined

	SkipNeedsForce = sqlitestore.SkipNeedsForce
	SkipPruned     = sqlitestore.SkipPruned
	SkipInFlight   = sqlitestore.SkipInFlight
	SkipNotFound   = sqlitestore.SkipNotFound
	SkipNoJobs     = sqlitestore.SkipNoJobs

	// ForceAfter is the 3-strikes rule: dead-lettered this often, a job
	// needs Force to be replayed.
	ForceAfter = sqlitestore.ForceAfter
)

var (
	ErrAlreadyClaimed = sqlitestore.ErrAlreadyClaimed
	ErrReleased       = sqlitestore.ErrReleased
	ErrExists         = sqlitestore.ErrExists
)
