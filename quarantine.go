package hookwarden

// The quarantine as the operator sees it: held requests, their release.

import (
	"errors"
	"net/http"
	"time"
)

// Held is one quarantined request, as `quarantine list` and
// GET /api/quarantine show it.
type Held struct {
	ReceiptID  int64     `json:"receipt_id"`
	Source     string    `json:"source"`
	ReceivedAt time.Time `json:"received_at"`
	// Reason is no_event_id or body_replayed; Detail is the free text.
	Reason           string `json:"reason"`
	Detail           string `json:"detail,omitempty"`
	CandidateEventID string `json:"candidate_event_id"`
	OriginalEventID  string `json:"original_event_id"`
	// Repeats counts the copies of the same body that came after the first.
	Repeats int       `json:"repeats"`
	LastAt  time.Time `json:"last_at"`
	// ReleasedAt is when an operator released it; nil (null) while held.
	ReleasedAt *time.Time `json:"released_at"`
	// ReleasedEventID is the id it was released under.
	ReleasedEventID string `json:"released_event_id,omitempty"`
}

// HeldDetail is a held request with its raw headers and body.
type HeldDetail struct {
	Held
	Header     http.Header `json:"headers"`
	Body       []byte      `json:"body"`
	BodySHA256 string      `json:"body_sha256"`
	RemoteAddr string      `json:"remote_addr"`
}

// QuarantineFilter selects held requests. Zero fields select everything.
type QuarantineFilter struct {
	Source string
	Limit  int
	// Cursor continues a listing: only receipts older than it.
	Cursor int64
}

// Errors of ReleaseQuarantined besides ErrNotFound.
var (
	// ErrAlreadyClaimed: the event id is claimed already; the request stays held.
	ErrAlreadyClaimed = errors.New("event id already claimed")
	// ErrReleased: the request was released before.
	ErrReleased = errors.New("already released")
)

// Release says how to release a held request.
type Release struct {
	ReceiptID int64
	// EventID is the id to claim: the request's candidate id when empty.
	EventID   string
	EventType string
	// Destinations get one job each ("source/name"), as the receiver would
	// have given them: the caller matches them against EventType.
	Destinations []string
	// Audit, when set, is recorded in the release's own transaction, with
	// the released event and the result filled in.
	Audit *AuditEntry
}

// Released is what ReleaseQuarantined did.
type Released struct {
	Source  string `json:"source"`
	EventID string `json:"event_id"`
	Jobs    int    `json:"jobs"`
}
