package hookwarden

// The operator's reads of a store: events with their receipts, jobs and
// attempts, dead letters and counts, as the CLI, the admin API and the
// dashboard show them.

import (
	"fmt"
	"net/http"
	"time"
)

// EventStatus is an event's state, derived from its jobs: dead if any job is
// dead-lettered, else pending if any job is pending, else delivered (which
// includes an event that matched no destination). Quarantined receipts have
// no event id and no jobs.
type EventStatus string

const (
	StatusPending     EventStatus = "pending"
	StatusDelivered   EventStatus = "delivered"
	StatusDead        EventStatus = "dead"
	StatusQuarantined EventStatus = "quarantined"
)

// ParseStatus checks a --status value.
func ParseStatus(s string) (EventStatus, error) {
	switch st := EventStatus(s); st {
	case "", StatusPending, StatusDelivered, StatusDead, StatusQuarantined:
		return st, nil
	}
	return "", fmt.Errorf("unknown status %q: want pending, delivered, dead or quarantined", s)
}

// DefaultLimit is the page size of list queries when none is given; MaxLimit caps it.
const (
	DefaultLimit = 50
	MaxLimit     = 10000
)

// EventFilter selects events for ListEvents. Zero fields select everything.
type EventFilter struct {
	Source string
	// Type is an exact event type, or a prefix ending in "*" ("invoice.*").
	Type   string
	Status EventStatus
	// Since keeps events claimed (quarantined: last received) at or after it.
	Since time.Time
	Limit int
	// Cursor continues a listing: only rows older than it (the Next of the
	// previous page). 0 starts from the newest.
	Cursor int64
}

// EventSummary is one line of an event listing. For a quarantined receipt,
// EventID is empty and Receipt, Reason, Count and LastAt are set.
type EventSummary struct {
	Ref       int64       `json:"ref"` // row id of the claim (quarantined: of the receipt)
	Source    string      `json:"source"`
	EventID   string      `json:"event_id,omitempty"`
	Type      string      `json:"type,omitempty"`
	Status    EventStatus `json:"status"`
	ClaimedAt time.Time   `json:"claimed_at"`
	// Receipts counts every request that carried the event (1 + duplicates).
	Receipts  int  `json:"receipts"`
	Divergent bool `json:"divergent,omitempty"` // a duplicate carried different bytes
	// Derived: the platform gave no id; EventID is the SHA-256 of the
	// event's own bytes (SPEC 11).
	Derived       bool `json:"derived_id,omitempty"`
	Jobs          int  `json:"jobs"`
	Pending       int  `json:"pending"`
	Delivered     int  `json:"delivered"`
	Dead          int  `json:"dead"`
	PayloadPruned bool `json:"payload_pruned,omitempty"`
	// PrunedAt is when retention removed the payload (zero: not pruned).
	PrunedAt time.Time `json:"pruned_at,omitzero"`
	// SummaryOnly is set when retention.payloads folded the event into its
	// claim: its receipts (bodies and headers), jobs and attempt log are
	// gone, and Receipts, Jobs, Delivered and the fields below are what
	// was kept of them.
	SummaryOnly    bool      `json:"summary_only,omitempty"`
	LastReceivedAt time.Time `json:"last_received_at,omitzero"`
	DeliveredAt    time.Time `json:"delivered_at,omitzero"`
	Attempts       int       `json:"attempts,omitempty"`

	Receipt int64     `json:"receipt,omitempty"` // quarantined only
	Reason  string    `json:"reason,omitempty"`
	Count   int       `json:"count,omitempty"`
	LastAt  time.Time `json:"last_at,omitzero"`
}

// EventDetail is everything known about one event.
type EventDetail struct {
	EventSummary
	BodySHA256 string `json:"body_sha256"`
	// Body is the payload as delivered: the first receipt's raw body, or the
	// event's own element of a batch. Nil when retention pruned it.
	Body        []byte        `json:"body"`
	ContentType string        `json:"content_type,omitempty"`
	ReceiptLog  []ReceiptInfo `json:"receipt_log"`
	JobLog      []JobInfo     `json:"job_log"`
	// Audit lists the operator actions that changed the event (replays),
	// oldest first.
	Audit []AuditEntry `json:"audit,omitempty"`
}

// TakeClaimBody sets the detail's body from what the store read: element,
// the event's own element of a batch (nil for a single event), else the
// raw body of the receipt that made the claim; and the pruning time of
// that receipt. Call it after ReceiptLog is filled.
func (d *EventDetail) TakeClaimBody(element []byte) {
	if element != nil {
		d.Body, d.ContentType = element, "application/json"
	}
	for _, r := range d.ReceiptLog {
		if r.Kind != "accepted" && r.Kind != "backfill" { // the claim's receipt
			continue
		}
		if !r.PrunedAt.IsZero() && !d.SummaryOnly {
			d.PrunedAt = r.PrunedAt
		}
		if !r.Batch {
			d.Body, d.ContentType = r.Body, r.Header.Get("Content-Type")
		}
	}
}

// ReceiptInfo is one request from the provider that carried the event.
type ReceiptInfo struct {
	ID         int64       `json:"id"`
	Kind       string      `json:"kind"` // accepted, duplicate, divergent (per event, also inside a batch), backfill
	Batch      bool        `json:"batch,omitempty"`
	ReceivedAt time.Time   `json:"received_at"`
	RemoteAddr string      `json:"remote_addr"`
	Header     http.Header `json:"headers"`
	BodySHA256 string      `json:"body_sha256"`
	// Body is the raw request body; nil for a byte-identical duplicate (the
	// first receipt has it) and after pruning.
	Body     []byte    `json:"body"`
	PrunedAt time.Time `json:"pruned_at,omitzero"`
	// Origin is "backfill" for a receipt a backfill run recovered from the
	// provider's API (Kind "backfill" when it made the claim, "duplicate"
	// when a live copy had); empty for one received over HTTP.
	Origin string `json:"origin,omitempty"`
}

// JobInfo is one destination's job for the event, with every attempt.
type JobInfo struct {
	ID          int64         `json:"id"`
	Destination string        `json:"destination"`
	State       string        `json:"state"`
	Attempts    int           `json:"attempts"` // since creation or the last replay
	DeadCount   int           `json:"dead_count"`
	NextAt      time.Time     `json:"next_at"`
	LeasedUntil time.Time     `json:"leased_until,omitzero"`
	LastError   string        `json:"last_error,omitempty"`
	CreatedAt   time.Time     `json:"created_at"`
	FinishedAt  time.Time     `json:"finished_at,omitzero"`
	ReplayedAt  time.Time     `json:"replayed_at,omitzero"`
	Log         []AttemptInfo `json:"attempt_log"`
}

// AttemptInfo is one delivery attempt.
type AttemptInfo struct {
	Number     int       `json:"number"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS float64   `json:"duration_ms"`
	StatusCode int       `json:"status_code,omitempty"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	Error      string    `json:"error,omitempty"`
	Response   string    `json:"response,omitempty"`
	Verdict    string    `json:"verdict"`
}

// DeadFilter selects dead letters. Zero fields select everything.
type DeadFilter struct {
	Source      string
	Destination string // full name, "source/name"
	Since       time.Time
	Limit       int
	Cursor      int64 // only jobs with a smaller id (the Next of the previous page)
}

// DeadLetter is one dead-lettered job.
type DeadLetter struct {
	JobID       int64     `json:"job_id"`
	Source      string    `json:"source"`
	EventID     string    `json:"event_id"`
	Type        string    `json:"type"`
	Destination string    `json:"destination"`
	Attempts    int       `json:"attempts"`
	DeadCount   int       `json:"dead_count"` // times dead-lettered; 3 or more needs --force to replay
	LastError   string    `json:"last_error"`
	DeadAt      time.Time `json:"dead_at"`
	ClaimedAt   time.Time `json:"claimed_at"`
}

// SourceStats counts what a source sent.
type SourceStats struct {
	Source      string `json:"source"`
	Accepted    int    `json:"accepted"`   // distinct events claimed
	Duplicates  int    `json:"duplicates"` // repeats of claimed events (divergent ones included)
	Divergent   int    `json:"divergent"`  // repeats with different bytes
	Quarantined int    `json:"quarantined"`
	// Refused are the requests refused at the door (401 by reason, 413,
	// 408, 403, 503) in the current hour and the 23 before it, from the
	// store's counts (serve adds them every few seconds and at stop).
	Refused Refusals `json:"refused_24h,omitzero"`
	// LastReceivedAt is the last request of any kind; zero if none.
	LastReceivedAt time.Time `json:"last_received_at,omitzero"`
}

// OutboxStat is the state of one destination's outbox, as Stats (the
// stats command, /api/stats) and OutboxStats (the metrics, the dashboard)
// read it. OutboxStats, read on every metrics refresh, leaves Delivered
// zero: counting the history is Stats' job.
type OutboxStat struct {
	Destination string `json:"destination"`
	Pending     int    `json:"pending"`
	Delivered   int    `json:"delivered"`
	Dead        int    `json:"dead"`
	// OldestPendingAge is the age of the oldest pending job, counted from
	// its creation or its last replay (zero when none is pending).
	OldestPendingAge     time.Duration `json:"-"`
	OldestPendingSeconds float64       `json:"oldest_pending_age_seconds"`
}

// Stats are the counts of `hookwarden stats` and /api/stats.
type Stats struct {
	At           time.Time     `json:"at"`
	Sources      []SourceStats `json:"sources"`
	Destinations []OutboxStat  `json:"destinations"`
}

// HourCount is one source's traffic in one UTC hour: new events claimed in
// it and repeats received in it, as Stats counts them. Hourly keeps them
// as they were recorded: retention removing the rows later does not take
// them off.
type HourCount struct {
	Hour       time.Time `json:"hour"` // the hour's start, UTC
	Accepted   int       `json:"accepted"`
	Duplicates int       `json:"duplicates"`
}

// WindowCounts are a source's events in a recent window: new events claimed
// and repeats of claimed ones (divergent repeats and batch elements
// included), counted as Stats counts them.
type WindowCounts struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// MinuteCountsKeep is how long the stores keep their counts per minute
// (minutely): the day window's first hour, 24 to 25 hours old, and an
// hour's slack for retention's hourly pass.
const MinuteCountsKeep = 26 * time.Hour

// WindowStart is where a window since since, read at now, starts counting
// and the first whole hour in it: the start of since's minute, counted by
// minutes up to whole and by hours from there, so that a window costs at
// most 60 minute rows and its hours, never the traffic in them. A bound
// older than the minutes kept (MinuteCountsKeep less an hour) starts at
// its hour instead.
func WindowStart(now, since time.Time) (start, whole time.Time) {
	since = since.UTC()
	start = since.Truncate(time.Minute)
	if now.Sub(start) > MinuteCountsKeep-time.Hour {
		start = since.Truncate(time.Hour)
	}
	whole = start.Truncate(time.Hour)
	if whole.Before(start) {
		whole = whole.Add(time.Hour)
	}
	return start, whole
}

// StatsCounter folds a store's counter rows into a Stats: the names given
// first, with zeros, then any other in the order met. Both stores keep the
// same kinds of count, so one fold reads them.
type StatsCounter struct {
	Stats
	src, dst map[string]int
	given    int // the sources named at the start
}

// NewStatsCounter starts a Stats read at at.
func NewStatsCounter(at time.Time, sources, destinations []string) *StatsCounter {
	c := &StatsCounter{Stats: Stats{At: at}, src: map[string]int{}, dst: map[string]int{}}
	for _, n := range sources {
		c.Source(n)
	}
	c.given = len(c.Sources)
	for _, n := range destinations {
		c.Destination(n)
	}
	return c
}

// Source is name's entry, added when new. The pointer is good until the
// next call adds one.
func (c *StatsCounter) Source(name string) *SourceStats {
	i, ok := c.src[name]
	if !ok {
		i = len(c.Sources)
		c.src[name] = i
		c.Sources = append(c.Sources, SourceStats{Source: name})
	}
	return &c.Sources[i]
}

// Destination is name's entry, added when new; as Source.
func (c *StatsCounter) Destination(name string) *OutboxStat {
	i, ok := c.dst[name]
	if !ok {
		i = len(c.Destinations)
		c.dst[name] = i
		c.Destinations = append(c.Destinations, OutboxStat{Destination: name})
	}
	return &c.Destinations[i]
}

// Add folds one counter row: n rows of kind at name, a live count
// (accepted, duplicate, divergent, quarantined per source; pending,
// delivered, dead per destination) or, prefixed "pruned-", what retention
// removed and the totals keep; "pruned-last_received" carries a time, at.
func (c *StatsCounter) Add(name, kind string, n int, at time.Time) {
	switch kind {
	case "pending":
		c.Destination(name).Pending += n
		return
	case "delivered", "pruned-delivered": // live jobs, and those retention folded away
		c.Destination(name).Delivered += n
		return
	case "dead":
		c.Destination(name).Dead += n
		return
	}
	ss := c.Source(name)
	switch kind {
	case "accepted", "pruned-accepted":
		ss.Accepted += n
	case "duplicate", "pruned-duplicate":
		ss.Duplicates += n
	case "divergent", "pruned-divergent":
		ss.Duplicates += n
		ss.Divergent += n
	case "quarantined", "pruned-quarantined":
		ss.Quarantined += n
	case "pruned-last_received":
		if at.After(ss.LastReceivedAt) {
			ss.LastReceivedAt = at.UTC()
		}
	}
}
