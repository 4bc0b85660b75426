// Package hookwarden holds the types shared by the receiver, the store and the
// workers. It imports nothing of the project's own, so every other package can
// depend on it.
//
// The pipeline: the receiver verifies a provider's request and hands a Receipt
// to a Recorder; the Recorder commits the receipt, the claim of the event id and
// one Job per matching destination in one durable transaction; workers lease due
// jobs from a Queue, deliver them and record each Attempt.
//
// Store (store.go) is the whole store contract, of which Recorder and Queue
// are roles; its filter and result types are in the files named for their
// topic (ops.go, replay.go, retention.go, quarantine.go, runs.go).
package hookwarden

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Outcome is what recording a receipt did.
type Outcome string

const (
	// Accepted: a new event id was claimed and its jobs created.
	Accepted Outcome = "accepted"
	// Duplicate: the event id was already claimed; the receipt is kept, no job.
	Duplicate Outcome = "duplicate"
	// Quarantined: authenticated, but held for a human: no event id could be
	// found, or the signed body was already claimed under another id.
	Quarantined Outcome = "quarantined"
	// Replayed: the request's one-time token (Mailgun) was recorded before
	// with another body. Nothing was recorded; the receiver answers 401.
	Replayed Outcome = "replayed"
)

// Why a request was quarantined (RecordResult.QuarantineKind), the values of
// the reason label of hookwarden_quarantined_total.
const (
	// QuarantineNoEventID: no event id was found in the request.
	QuarantineNoEventID = "no_event_id"
	// QuarantineBodyReplayed: the signature does not cover the event id, and
	// the signed body was already claimed under another id.
	QuarantineBodyReplayed = "body_replayed"
)

// Receipt is one authenticated request from a provider, as received.
// BodySHA256 is the hash of the body, or of the canonical data the signature
// covers where that differs from the bytes (Twilio form bodies: the URL and
// the sorted parameters), so that re-encoded copies of one signed request
// are one body to every check.
type Receipt struct {
	Source     string
	Header     http.Header // raw request headers (credentials redacted by the receiver)
	Body       []byte      // raw body bytes, exactly as received
	BodySHA256 [32]byte
	RemoteAddr string
	ReceivedAt time.Time
	// Events are the events the request carries: one for most providers, one per
	// element for batch providers (SendGrid), none when no event id was found.
	Events []Event
	// QuarantineReason says why no event id was found (when Events is empty).
	QuarantineReason string
	// BodyReplayCheck is set when the source's signature does not cover the
	// event id (github, shopify, twilio, hmac with a header id): a signed body
	// already claimed under another id is quarantined, not accepted, so a
	// captured request sent again under a fresh id is never delivered.
	BodyReplayCheck bool
	// Token is the request's one-time token (Mailgun), nil for other schemes.
	Token *Token
	// Backfill: recovered from the provider's API by a backfill run, not
	// received. It takes the same claim; a duplicate of it (or it of a live
	// copy) is never flagged divergent, since the API's JSON may differ from
	// the webhook's bytes. Shown as a receipt of kind "backfill".
	Backfill bool
}

// Token is a one-time token a verified request carries. The store keeps it
// until Expires: the same token with another body is refused (Replayed),
// with the same body it is an exact resend, left to the claim to dedupe.
type Token struct {
	SHA256  [32]byte // of the token's value
	Expires time.Time
}

// Event is one provider event inside a receipt.
type Event struct {
	ID   string
	Type string
	// Body is the event's own bytes when it is one element of a batch; nil means
	// the receipt's whole body is the event.
	Body []byte
	// BodySHA256 is the hash of the event's bytes (Body), or the receipt's
	// BodySHA256.
	BodySHA256 [32]byte
	// Destinations are the full names ("source/name") of the destinations whose
	// filters match this event; one job is created for each when the id is new.
	Destinations []string
	// OrderKeys, when set, is parallel to Destinations: the event's
	// order_by key at each ("" or absent: none, so not ordered there).
	OrderKeys []string
	// Derived: the platform gives the event no id, and ID is the SHA-256
	// (hex) of the event's own bytes (SPEC 11); the claim keeps the mark.
	Derived bool
	// Seq is the event's value in its source's sequence (nil: none); the
	// store keeps it with the claim, in the same transaction (sequence.go).
	Seq *Seq
	// EventTime is when the platform says the event happened (zero:
	// unknown), from the source's event_time.
	EventTime time.Time
}

// OrderKey is the event's order_by key at Destinations[i], "" if none.
func (e *Event) OrderKey(i int) string {
	if i < len(e.OrderKeys) {
		return e.OrderKeys[i]
	}
	return ""
}

// RecordResult is the answer of a Recorder.
type RecordResult struct {
	// Outcome of the request as a whole: Accepted if any event was new,
	// Duplicate if all were claimed before, Quarantined if it carried none.
	Outcome Outcome
	// Events holds one result per Receipt.Events entry, in order.
	Events []EventResult
	// ReceiptID is the row of this receipt, for logs that tie it to attempts.
	ReceiptID int64
	// QuarantineKind is QuarantineNoEventID or QuarantineBodyReplayed when
	// Outcome is Quarantined.
	QuarantineKind string
}

// EventResult is what recording did with one event of a receipt.
type EventResult struct {
	Outcome Outcome // Accepted or Duplicate
	// Divergent is set on a duplicate whose bytes differ from the first copy's.
	Divergent bool
	// Jobs is the number of delivery jobs created (Accepted only).
	Jobs int
}

// ErrUnavailable wraps every reason a receipt could not be recorded durably
// (disk full, I/O error, queue full, shutting down). The receiver answers 503.
var ErrUnavailable = errors.New("store unavailable")

// ErrNotFound is returned by lookups of events, jobs or sources that do not exist.
var ErrNotFound = errors.New("not found")

// JobState is the state of one delivery job.
type JobState string

const (
	JobPending   JobState = "pending"
	JobDelivered JobState = "delivered"
	JobDead      JobState = "dead"
)

// Job is one event to be delivered to one destination, as leased by a worker.
type Job struct {
	ID          int64
	Source      string
	EventID     string
	EventType   string
	Destination string // "source/name"
	Attempt     int    // number of this attempt, 1-based (counts every lease)
	DeadCount   int    // how many times this job was dead-lettered before
	ContentType string
	Body        []byte
	// Header is the request's headers as the receipt keeps them
	// (credentials redacted): for a batch element, the batch request's.
	// A destination with sign_as reads the provider's own headers from it
	// (X-GitHub-Event, X-Shopify-Topic, ...). Nil for a job whose receipt
	// kept no headers.
	Header     http.Header
	ReceivedAt time.Time
	// Probe: the destination is paused automatically and this is its
	// probe; a failure does not count toward max_attempts (Attempt.Probe).
	Probe bool
}

// IdempotencyKey is the key sent with every attempt and replay of the job's event.
func (j *Job) IdempotencyKey() string { return IdempotencyKey(j.Source, j.EventID) }

// IdempotencyKey is "SOURCE:EVENT_ID", stable across attempts and replays.
func IdempotencyKey(source, eventID string) string { return source + ":" + eventID }

// Verdict says what an attempt means for its job.
type Verdict string

const (
	// Delivered: the destination took the event.
	Delivered Verdict = "delivered"
	// Retry: a transient failure; try again at Attempt.RetryAt.
	Retry Verdict = "retry"
	// Dead: poison or attempts exhausted; dead-lettered.
	Dead Verdict = "dead"
)

// Attempt is the record of one delivery attempt.
type Attempt struct {
	JobID      int64
	Number     int
	StartedAt  time.Time
	Duration   time.Duration
	StatusCode int // HTTP status, 0 if none
	ExitCode   int // command exit code, -1 if none
	Error      string
	Response   []byte // capped response body or command output
	Verdict    Verdict
	// RetryAt is when the job is due again (Verdict == Retry).
	RetryAt time.Time
	// Failed: a retryable failure of the destination (whatever the
	// verdict), which counts toward its pause_after; a success resets the
	// count, and an attempt cut short by shutdown or refused as poison
	// leaves it.
	Failed bool
	// Probe is Job.Probe: a failed probe gives its attempt back, so the
	// job keeps its attempts while the destination is paused.
	Probe bool
	// Destination is the job's ("source/name"), when the caller knows it:
	// the store then need not read it to apply flow control.
	Destination string
}

// Slot is a delivery slot of a destination, reserved for a job the store is
// about to create. The store creates the job already leased for LeaseFor and,
// once that is committed, hands it over with Hand; if the job is not
// committed, it gives the slot back with Release. Exactly one of Hand and
// Release is called, and neither may block.
type Slot interface {
	LeaseFor() time.Duration
	Hand(job Job)
	Release()
}

// Origins of an AuditEntry: where an operator action came from.
const (
	AuditCLI       = "cli"       // a hookwarden command; Actor is the OS user
	AuditAPI       = "api"       // the admin JSON API; Actor is the client address
	AuditDashboard = "dashboard" // the admin dashboard; Actor is the client address
)

// AuditEntry is one operator action that changed state (replay, prune,
// quarantine release and drop, pause, resume, backfill), as kept in the
// store's audit log (docs/reference.md, "The audit log").
type AuditEntry struct {
	ID     int64     `json:"id,omitempty"`
	At     time.Time `json:"at"`     // the store's clock when zero
	Action string    `json:"action"` // "replay", "prune", "release", "drop", "pause", "resume", "backfill"
	Origin string    `json:"origin"` // AuditCLI, AuditAPI or AuditDashboard
	Actor  string    `json:"actor"`  // the OS user (cli) or the client address (api, dashboard)
	// Args are the action's arguments as given, as a JSON object; Result
	// what it did (counts), set by the store for the actions it runs.
	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// ReceiptID is the receipt the action concerns (quarantine), if any.
	ReceiptID int64 `json:"receipt_id,omitempty"`
	// Events are the events the action changed; `events show` lists the
	// entry under each of them.
	Events []EventKey `json:"-"`
}

// Check refuses an entry that would be useless to a human later: every
// store runs it before writing one.
func (e *AuditEntry) Check() error {
	switch {
	case e.Action == "":
		return errors.New("audit entry: no action")
	case e.Origin != AuditCLI && e.Origin != AuditAPI && e.Origin != AuditDashboard:
		return fmt.Errorf("audit entry: origin %q: want cli, api or dashboard", e.Origin)
	case len(e.Args) > 0 && !json.Valid(e.Args):
		return errors.New("audit entry: args are not JSON")
	case len(e.Result) > 0 && !json.Valid(e.Result):
		return errors.New("audit entry: result is not JSON")
	}
	return nil
}

// EventKey names one event: its source and the provider's event id.
type EventKey struct {
	Source  string `json:"source"`
	EventID string `json:"event_id"`
}
