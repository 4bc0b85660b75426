package hookwarden

// The store contract: what the rest of the program needs from a store, as
// small role interfaces composed into one Store. Packages sqlitestore and
// pgstore implement it; cmd/hookwarden picks the implementation in one place
// (openStore) and every other package takes an interface. A store must pass
// the conformance suite in storetest: the suite, not shared SQL, keeps stores
// equal. Errors callers test with errors.Is are declared here too.

import (
	"context"
	"errors"
	"time"
)

// Store is everything a store implementation provides.
type Store interface {
	Recorder
	Queue
	RunLog
	Inspector
	Operator
	FlowOperator
	FlowInspector
	Health
	BackfillLog
	AvailabilityLog
	RefusalLog

	// Backup writes a consistent snapshot of the store to dest, a new file
	// that the --db commands can open. It fails with an error wrapping
	// ErrExists when dest exists, and leaves dest complete or absent.
	// progress, if set, is called now and then with bytes written and total.
	// A store whose server backs it up with its own tools (PostgreSQL)
	// fails with an error wrapping ErrNotSupported that says what to use.
	Backup(ctx context.Context, dest string, progress func(written, total int64)) error
	// Path names the store's file (or, for a server store, its address),
	// as logs and the CLI's messages show it.
	Path() string
	// Close stops accepting writes, commits what is queued and releases the
	// store. Nothing may be called after it.
	Close() error
}

// Recorder commits a receipt, the claims of its events and one job per
// matching destination in one durable transaction, before the receiver
// answers 200. Every failure to record durably wraps ErrUnavailable.
type Recorder interface {
	Record(ctx context.Context, r *Receipt) (RecordResult, error)
}

// Queue is the outbox as the workers see it.
type Queue interface {
	// Lease marks up to max due pending jobs of the destination as in flight
	// until now+leaseFor, counts the attempt and returns them ready to
	// deliver. An expired lease makes the job due again.
	Lease(ctx context.Context, destination string, max int, leaseFor time.Duration) ([]Job, error)
	// FinishAndLease is Finish then Lease, in one transaction: both happen
	// or neither does.
	FinishAndLease(ctx context.Context, a Attempt, destination string, max int, leaseFor time.Duration) ([]Job, error)
	// Finish records the attempt and applies its Verdict. The verdict of a
	// stale attempt (the job was leased again since, or finished) is kept
	// in the attempt log but does not change the job.
	Finish(ctx context.Context, a Attempt) error
	// Unlease gives back the lease of a job handed to a slot that did not
	// run it: the attempt is not counted and the job is due now.
	Unlease(ctx context.Context, job Job) error
	// NextDue is the earliest time a Lease of the destination could return
	// a job (ok=false: none, or paused manually): the earliest due job's
	// time, or later when its flow control holds it back (the next probe
	// of an auto pause, the next token of its rate).
	NextDue(ctx context.Context, destination string) (t time.Time, ok bool, err error)
	// ReleaseLeases makes every job leased by a previous process due now.
	// Called once at start, before the workers run. On a store several
	// instances share, a previous process is one that is gone: another
	// live instance's jobs in flight keep their lease.
	ReleaseLeases(ctx context.Context) (int64, error)
	// SetDirect makes the store hand new jobs straight to d while it has
	// free slots (nil: off). Called before the first Record.
	SetDirect(d Direct)
	// SetFlow gives the store the flow policy of every configured
	// destination (FlowPolicy), at start and on every reload. Lease,
	// Finish, NextDue and the direct hand-over apply it from then on; a
	// destination no longer ordered has its waiting jobs made due. The
	// state the policies act on is in the store, shared by every serve.
	SetFlow(ctx context.Context, policies []FlowPolicy) error
	// OutboxStats reads pending depth, oldest pending age and dead letters
	// per destination: one entry per name given (zeros included), then any
	// other destination that still has jobs. Cheap: read on every metrics
	// refresh. Delivered is left zero (Stats counts it).
	OutboxStats(ctx context.Context, destinations []string) ([]OutboxStat, error)
}

// Direct is a worker pool that takes new jobs straight from the writer. A job
// created with a reserved slot is committed already leased (its first
// attempt counted, due again only when the lease expires) and handed over
// in memory after the commit, so the common delivery needs no lease write
// and no read of the event: only the attempt's Finish.
//
// The store stays the truth: a handed job whose process dies is due again
// when its lease expires (or at the next start, which releases leases), like
// any leased job.
type Direct interface {
	// Reserve takes a free delivery slot of the destination for a job about
	// to be created; ok=false when none is free (the job then waits in the
	// store for a lease). It must not block.
	Reserve(destination string) (slot Slot, ok bool)
}

// Waiter is implemented by a Direct pool that wants to know when a job was
// created without asking it for a slot (flow control keeps rated, ordered
// and paused destinations out of the hand-over): the job waits in the
// store, and the pool leases it when the receiver reports the commit.
type Waiter interface {
	Waiting(destination string)
}

// Waker is implemented by a Direct pool that can be woken when jobs of a
// destination became due in the store by another process's commit (a
// shared store's notification: pgstore's LISTEN/NOTIFY), so that it
// leases them now rather than at its next poll. No name wakes every
// destination; unknown names are ignored. It must not block.
type Waker interface {
	Notify(destinations ...string)
}

// RunLog records serve's runs, so outages can be told from the store alone.
type RunLog interface {
	// StartRun records the start of a serve process and returns its id.
	StartRun(ctx context.Context, version string) (int64, error)
	// Heartbeat records that the run is alive now; it goes through the
	// writer, so success also proves the writes work.
	Heartbeat(ctx context.Context, run int64) error
	// StopRun records a clean stop.
	StopRun(ctx context.Context, run int64) error
	// Runs lists every recorded run in start order.
	Runs(ctx context.Context) ([]Run, error)
	// Gaps lists the outage windows and the silences of sources with an
	// expect_within, by the store's clock.
	Gaps(ctx context.Context, opt GapOptions) (GapReport, error)
}

// Inspector is the operator's reads: the CLI, the admin API, the dashboard.
// They never wait for the writer. Lists are newest first; next is the
// cursor of the following page, 0 on the last.
type Inspector interface {
	ListEvents(ctx context.Context, f EventFilter) (items []EventSummary, next int64, err error)
	// ShowEvent returns one event with its receipts, jobs, attempts and audit
	// entries, or an error wrapping ErrNotFound.
	ShowEvent(ctx context.Context, source, eventID string) (*EventDetail, error)
	// EventAudit lists the audit entries that changed one event, oldest first.
	EventAudit(ctx context.Context, source, eventID string) ([]AuditEntry, error)
	ListDead(ctx context.Context, f DeadFilter) (items []DeadLetter, next int64, err error)
	// Stats counts per source and per destination over the whole history
	// (what retention removed still counts); the names given come first,
	// then the others in name order. Its cost does not grow with the
	// history: stores keep the counts as the rows are written.
	Stats(ctx context.Context, sources, destinations []string) (Stats, error)
	// RecentCounts counts each source's accepted events and duplicates since
	// hour ([0]) and since day ([1]), each from the start of its minute
	// (WindowStart): the stores keep counts per minute for the last
	// MinuteCountsKeep, and per hour before.
	RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]WindowCounts, error)
	// Hourly lists, per source named, its hours from since's hour on that
	// have any traffic, oldest first (hours without any are left out).
	Hourly(ctx context.Context, sources []string, since time.Time) (map[string][]HourCount, error)
	// LastAccepted is when each source last claimed a new event (absent:
	// never).
	LastAccepted(ctx context.Context, sources []string) (map[string]time.Time, error)
	ListQuarantine(ctx context.Context, f QuarantineFilter) (items []Held, next int64, err error)
	// ShowQuarantined returns one held request with its headers and body,
	// or an error wrapping ErrNotFound.
	ShowQuarantined(ctx context.Context, receiptID int64) (*HeldDetail, error)
	// QuarantinedReceipt reports whether receipt id of source is held.
	QuarantinedReceipt(ctx context.Context, source string, id int64) (bool, error)
}

// Operator is the operator's writes. Each that changes events records its
// audit entry (when given) in the same transaction as the change.
type Operator interface {
	// Replay resets the selected jobs to pending, due now, in batches;
	// every rule (ForceAfter, pruned payloads, jobs in flight) is checked
	// again in each batch's transaction.
	Replay(ctx context.Context, sel ReplaySelector, opt ReplayOptions) (ReplayResult, error)
	// Prune applies the retention tiers in short batches; safe to interrupt.
	Prune(ctx context.Context, opt PruneOptions) (PruneResult, error)
	// Audit records one operator action in a transaction of its own.
	Audit(ctx context.Context, e AuditEntry) (int64, error)
	// ReleaseQuarantined claims a held request's event id and creates its
	// jobs in one transaction; ErrAlreadyClaimed, ErrReleased or ErrNotFound
	// change nothing.
	ReleaseQuarantined(ctx context.Context, rel Release) (Released, error)
	// DropQuarantined deletes a held request (ErrNotFound if none).
	DropQuarantined(ctx context.Context, receiptID int64, audit *AuditEntry) error
}

// Health is the store's half of /readyz and of the systemd watchdog.
type Health interface {
	// Healthy reports whether the last write succeeded.
	Healthy() error
	// Ping proves the writer is alive and the store writable.
	Ping(ctx context.Context) error
}

// ErrExists is returned by Backup when the destination file already exists.
var ErrExists = errors.New("file exists")

// ErrNotSupported is returned by a store for an operation it leaves to
// other tools (Backup on PostgreSQL); the error's text names them.
var ErrNotSupported = errors.New("not supported by this store")
