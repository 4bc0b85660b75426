package sqlitestore

// Read-side queries of the operator commands and the admin API: events,
// their receipts, jobs and attempts, dead letters and counts. All of them use
// the read pool, so they work on a read-only copy and never wait for the
// writer.

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
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
	Receipts      int  `json:"receipts"`
	Divergent     bool `json:"divergent,omitempty"` // a duplicate carried different bytes
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

// payloadPruned is true when retention removed the bytes an event would be
// delivered with: the event was folded into its claim (schema 5), or its
// first receipt's body, or its batch's, was cleared (schema 2 to 4).
const payloadPruned = `(e.pruned_at IS NOT NULL OR EXISTS (SELECT 1 FROM receipts pr WHERE pr.event_ref = e.id AND pr.kind = 'accepted' AND pr.pruned_at IS NOT NULL)
	OR EXISTS (SELECT 1 FROM receipt_events pe JOIN receipts pr ON pr.id = pe.receipt_id
		WHERE pe.event_ref = e.id AND pe.kind = 'accepted' AND pr.pruned_at IS NOT NULL))`

const eventColumns = `e.id, e.source, e.event_id, e.event_type, e.claimed_at,
	(SELECT count(*) FROM jobs WHERE event_ref = e.id AND state = 'pending'),
	(SELECT count(*) FROM jobs WHERE event_ref = e.id AND state = 'delivered'),
	(SELECT count(*) FROM jobs WHERE event_ref = e.id AND state = 'dead'),
	COALESCE(e.receipts, 0) + (SELECT count(*) FROM receipts WHERE event_ref = e.id) + (SELECT count(*) FROM receipt_events WHERE event_ref = e.id),
	EXISTS (SELECT 1 FROM receipts WHERE event_ref = e.id AND kind = 'divergent')
		OR EXISTS (SELECT 1 FROM receipt_events WHERE event_ref = e.id AND kind = 'divergent'),
	` + payloadPruned + `,
	e.pruned_at, COALESCE(e.jobs, 0), COALESCE(e.attempts, 0), e.last_received_at, e.delivered_at`

// scanEvent reads the eventColumns (then extra) of one row.
func scanEvent(sc interface{ Scan(...any) error }, ev *EventSummary, extra ...any) error {
	var at string
	var pruned, last, delivered sql.NullString
	var foldedJobs int
	dst := append([]any{&ev.Ref, &ev.Source, &ev.EventID, &ev.Type, &at, &ev.Pending, &ev.Delivered, &ev.Dead,
		&ev.Receipts, &ev.Divergent, &ev.PayloadPruned, &pruned, &foldedJobs, &ev.Attempts, &last, &delivered}, extra...)
	if err := sc.Scan(dst...); err != nil {
		return err
	}
	var err error
	if pruned.Valid {
		// Folded by retention.payloads: every job was delivered.
		ev.SummaryOnly = true
		for _, f := range []struct {
			dst *time.Time
			v   sql.NullString
		}{{&ev.PrunedAt, pruned}, {&ev.LastReceivedAt, last}, {&ev.DeliveredAt, delivered}} {
			if *f.dst, err = parseNullTime(f.v); err != nil {
				return err
			}
		}
		ev.Delivered += foldedJobs
	}
	ev.Jobs = ev.Pending + ev.Delivered + ev.Dead
	ev.Status = statusOf(ev.Pending, ev.Dead)
	ev.ClaimedAt, err = parseTime(at)
	return err
}

func statusOf(pending, dead int) EventStatus {
	switch {
	case dead > 0:
		return StatusDead
	case pending > 0:
		return StatusPending
	}
	return StatusDelivered
}

func limitOf(n int) int {
	if n <= 0 {
		return DefaultLimit
	}
	return min(n, MaxLimit)
}

// idBefore is a scalar subquery: the id of the newest event claimed before
// the time bound (0 if none). It walks the events newest first and stops
// there, so its cost follows the window, not the history.
func idBefore(bound string) string {
	return "COALESCE((SELECT id FROM events WHERE claimed_at < " + bound + " ORDER BY id DESC LIMIT 1), 0)"
}

// ListEvents lists events newest first. next is the cursor of the following
// page, 0 when this page is the last.
func (s *Store) ListEvents(ctx context.Context, f EventFilter) (items []EventSummary, next int64, err error) {
	if f.Status == StatusQuarantined {
		return s.listQuarantined(ctx, f)
	}
	var where []string
	var args []any
	if f.Source != "" {
		// Unary +: walk events newest first and stop at the page's end,
		// rather than fetch every event of the source by index and sort them.
		where, args = append(where, "+e.source = ?"), append(args, f.Source)
	}
	if p, ok := strings.CutSuffix(f.Type, "*"); ok {
		where, args = append(where, "substr(e.event_type, 1, ?) = ?"), append(args, len(p), p)
	} else if f.Type != "" {
		where, args = append(where, "e.event_type = ?"), append(args, f.Type)
	}
	if !f.Since.IsZero() {
		// The id bound ends the newest-first walk where the window begins,
		// instead of at the oldest event: ids grow with time, so the last
		// event claimed before the window, found by a newest-first walk,
		// bounds it (exact to within one writer batch).
		at := fmtTime(f.Since)
		where = append(where, "e.claimed_at >= ?", "e.id > "+idBefore("?"))
		args = append(args, at, at)
	}
	if f.Cursor > 0 {
		where, args = append(where, "e.id < ?"), append(args, f.Cursor)
	}
	switch f.Status {
	case StatusDead:
		where = append(where, "e.id IN (SELECT event_ref FROM jobs WHERE state = 'dead')")
	case StatusPending:
		where = append(where, "e.id IN (SELECT event_ref FROM jobs WHERE state = 'pending')",
			"e.id NOT IN (SELECT event_ref FROM jobs WHERE state = 'dead')")
	case StatusDelivered:
		where = append(where, "NOT EXISTS (SELECT 1 FROM jobs WHERE event_ref = e.id AND state != 'delivered')")
	case "":
	default:
		return nil, 0, fmt.Errorf("list events: unknown status %q", f.Status)
	}
	limit := limitOf(f.Limit)
	q := "SELECT " + eventColumns + " FROM events e"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY e.id DESC LIMIT ?"
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ev EventSummary
		if err := scanEvent(rows, &ev); err != nil {
			return nil, 0, fmt.Errorf("list events: %w", err)
		}
		items = append(items, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	if len(items) > limit {
		items = items[:limit]
		next = items[limit-1].Ref
	}
	return items, next, nil
}

func (s *Store) listQuarantined(ctx context.Context, f EventFilter) (items []EventSummary, next int64, err error) {
	where := []string{"q.released_at IS NULL"} // a released request is an event now
	var args []any
	if f.Source != "" {
		where, args = append(where, "q.source = ?"), append(args, f.Source)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "q.last_at >= ?"), append(args, fmtTime(f.Since))
	}
	if f.Cursor > 0 {
		where, args = append(where, "q.receipt_id < ?"), append(args, f.Cursor)
	}
	limit := limitOf(f.Limit)
	q := `SELECT q.receipt_id, q.source, q.reason, q.first_at, q.last_at, q.count FROM quarantine q`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY q.receipt_id DESC LIMIT ?"
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list quarantined: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		ev := EventSummary{Status: StatusQuarantined}
		var first, last string
		if err := rows.Scan(&ev.Receipt, &ev.Source, &ev.Reason, &first, &last, &ev.Count); err != nil {
			return nil, 0, fmt.Errorf("list quarantined: %w", err)
		}
		ev.Ref, ev.Receipts = ev.Receipt, ev.Count
		if ev.ClaimedAt, err = parseTime(first); err != nil {
			return nil, 0, fmt.Errorf("list quarantined: %w", err)
		}
		if ev.LastAt, err = parseTime(last); err != nil {
			return nil, 0, fmt.Errorf("list quarantined: %w", err)
		}
		items = append(items, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list quarantined: %w", err)
	}
	if len(items) > limit {
		items = items[:limit]
		next = items[limit-1].Ref
	}
	return items, next, nil
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
	Audit []AuditRecord `json:"audit,omitempty"`
}

// ReceiptInfo is one request from the provider that carried the event.
type ReceiptInfo struct {
	ID         int64       `json:"id"`
	Kind       string      `json:"kind"` // accepted, duplicate, divergent (per event, also inside a batch)
	Batch      bool        `json:"batch,omitempty"`
	ReceivedAt time.Time   `json:"received_at"`
	RemoteAddr string      `json:"remote_addr"`
	Header     http.Header `json:"headers"`
	BodySHA256 string      `json:"body_sha256"`
	// Body is the raw request body; nil for a byte-identical duplicate (the
	// first receipt has it) and after pruning.
	Body     []byte    `json:"body"`
	PrunedAt time.Time `json:"pruned_at,omitzero"`
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

// ShowEvent returns one event with its receipts, jobs and attempts, or an
// error wrapping hookwarden.ErrNotFound.
func (s *Store) ShowEvent(ctx context.Context, source, eventID string) (*EventDetail, error) {
	// One read transaction: a consistent snapshot across the queries below.
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("show event: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	d := &EventDetail{}
	var sum, element []byte
	row := tx.QueryRowContext(ctx, "SELECT "+eventColumns+", e.body_sha256, e.body FROM events e WHERE e.source = ? AND e.event_id = ?",
		source, eventID)
	err = scanEvent(row, &d.EventSummary, &sum, &element)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("event %s/%s: %w", source, eventID, hookwarden.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("show event: %w", err)
	}
	d.BodySHA256 = hex.EncodeToString(sum) // "" once folded: the hash went with the payload
	if err := loadReceipts(ctx, tx, d); err != nil {
		return nil, err
	}
	if element != nil {
		d.Body, d.ContentType = element, "application/json"
	}
	for _, r := range d.ReceiptLog {
		if r.Kind != "accepted" {
			continue
		}
		if !r.PrunedAt.IsZero() && !d.SummaryOnly {
			d.PrunedAt = r.PrunedAt
		}
		if !r.Batch {
			d.Body, d.ContentType = r.Body, r.Header.Get("Content-Type")
		}
	}
	if err := loadJobs(ctx, tx, d); err != nil {
		return nil, err
	}
	if d.Audit, err = eventAudit(ctx, tx, source, eventID); err != nil {
		return nil, err
	}
	return d, nil
}

// QuarantinedReceipt reports whether receipt id of source is a quarantined
// request: what `events show SOURCE ID` most likely meant when no event has
// that id (the quarantine list shows receipt ids).
func (s *Store) QuarantinedReceipt(ctx context.Context, source string, id int64) (bool, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM receipts WHERE id = ? AND source = ? AND kind = 'quarantined'`,
		id, source).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up receipt %d: %w", id, err)
	}
	return n > 0, nil
}

func loadReceipts(ctx context.Context, tx *sql.Tx, d *EventDetail) error {
	rows, err := tx.QueryContext(ctx, `
SELECT r.id, r.kind, 0, r.received_at, r.remote_addr, r.headers, r.body, r.body_sha256, r.pruned_at
FROM receipts r WHERE r.event_ref = ?1
UNION ALL
SELECT r.id, re.kind, 1, r.received_at, r.remote_addr, r.headers, r.body, r.body_sha256, r.pruned_at
FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.event_ref = ?1
ORDER BY 1`, d.Ref)
	if err != nil {
		return fmt.Errorf("show event receipts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r ReceiptInfo
		var at, headers string
		var sum []byte
		var pruned sql.NullString
		if err := rows.Scan(&r.ID, &r.Kind, &r.Batch, &at, &r.RemoteAddr, &headers, &r.Body, &sum, &pruned); err != nil {
			return fmt.Errorf("show event receipts: %w", err)
		}
		r.Header = DecodeHeaders(headers)
		r.BodySHA256 = hex.EncodeToString(sum)
		if len(sum) == 0 && !r.Batch {
			r.BodySHA256 = d.BodySHA256 // the event's own bytes: the hash is on the claim
		}
		if r.ReceivedAt, err = parseTime(at); err != nil {
			return fmt.Errorf("show event receipts: %w", err)
		}
		if r.PrunedAt, err = parseNullTime(pruned); err != nil {
			return fmt.Errorf("show event receipts: %w", err)
		}
		d.ReceiptLog = append(d.ReceiptLog, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("show event receipts: %w", err)
	}
	return nil
}

func loadJobs(ctx context.Context, tx *sql.Tx, d *EventDetail) error {
	rows, err := tx.QueryContext(ctx, `
SELECT id, destination, state, attempts, dead_count, next_at, leased_until, last_error, created_at, finished_at, replayed_at
FROM jobs WHERE event_ref = ? ORDER BY id`, d.Ref)
	if err != nil {
		return fmt.Errorf("show event jobs: %w", err)
	}
	defer rows.Close()
	byID := map[int64]int{}
	for rows.Next() {
		var j JobInfo
		var next, created string
		var leased, lastErr, finished, replayed sql.NullString
		if err := rows.Scan(&j.ID, &j.Destination, &j.State, &j.Attempts, &j.DeadCount, &next, &leased, &lastErr,
			&created, &finished, &replayed); err != nil {
			return fmt.Errorf("show event jobs: %w", err)
		}
		j.LastError = lastErr.String
		err := errors.Join(parseInto(&j.NextAt, next), parseInto(&j.CreatedAt, created),
			parseNullInto(&j.LeasedUntil, leased), parseNullInto(&j.FinishedAt, finished), parseNullInto(&j.ReplayedAt, replayed))
		if err != nil {
			return fmt.Errorf("show event jobs: %w", err)
		}
		byID[j.ID] = len(d.JobLog)
		d.JobLog = append(d.JobLog, j)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("show event jobs: %w", err)
	}
	rows.Close()

	rows, err = tx.QueryContext(ctx, `
SELECT a.job_id, a.number, a.started_at, a.duration_us, a.status_code, a.exit_code, a.error, a.response, a.verdict
FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.event_ref = ? ORDER BY a.id`, d.Ref)
	if err != nil {
		return fmt.Errorf("show event attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a AttemptInfo
		var job, us int64
		var at string
		var status, exit sql.NullInt64
		var errText sql.NullString
		var resp []byte
		if err := rows.Scan(&job, &a.Number, &at, &us, &status, &exit, &errText, &resp, &a.Verdict); err != nil {
			return fmt.Errorf("show event attempts: %w", err)
		}
		if a.StartedAt, err = parseTime(at); err != nil {
			return fmt.Errorf("show event attempts: %w", err)
		}
		a.DurationMS = float64(us) / 1000
		a.StatusCode = int(status.Int64)
		if exit.Valid {
			c := int(exit.Int64)
			a.ExitCode = &c
		}
		a.Error, a.Response = errText.String, string(resp)
		if i, ok := byID[job]; ok {
			d.JobLog[i].Log = append(d.JobLog[i].Log, a)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("show event attempts: %w", err)
	}
	return nil
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

func deadWhere(f DeadFilter) ([]string, []any) {
	where := []string{"j.state = 'dead'"}
	var args []any
	if f.Destination != "" {
		where, args = append(where, "j.destination = ?"), append(args, f.Destination)
	}
	if f.Source != "" {
		where, args = append(where, "e.source = ?"), append(args, f.Source)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "j.finished_at >= ?"), append(args, fmtTime(f.Since))
	}
	return where, args
}

// ListDead lists dead letters, most recently created job first.
func (s *Store) ListDead(ctx context.Context, f DeadFilter) (items []DeadLetter, next int64, err error) {
	where, args := deadWhere(f)
	if f.Cursor > 0 {
		where, args = append(where, "j.id < ?"), append(args, f.Cursor)
	}
	limit := limitOf(f.Limit)
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, `
SELECT j.id, e.source, e.event_id, e.event_type, j.destination, j.attempts, j.dead_count, COALESCE(j.last_error, ''),
	j.finished_at, e.claimed_at
FROM jobs j JOIN events e ON e.id = j.event_ref
WHERE `+strings.Join(where, " AND ")+` ORDER BY j.id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d DeadLetter
		var deadAt sql.NullString
		var claimed string
		if err := rows.Scan(&d.JobID, &d.Source, &d.EventID, &d.Type, &d.Destination, &d.Attempts, &d.DeadCount,
			&d.LastError, &deadAt, &claimed); err != nil {
			return nil, 0, fmt.Errorf("list dead letters: %w", err)
		}
		if err := errors.Join(parseNullInto(&d.DeadAt, deadAt), parseInto(&d.ClaimedAt, claimed)); err != nil {
			return nil, 0, fmt.Errorf("list dead letters: %w", err)
		}
		items = append(items, d)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	if len(items) > limit {
		items = items[:limit]
		next = items[limit-1].JobID
	}
	return items, next, nil
}

// SourceStats counts what a source sent.
type SourceStats struct {
	Source      string `json:"source"`
	Accepted    int    `json:"accepted"`   // distinct events claimed
	Duplicates  int    `json:"duplicates"` // repeats of claimed events (divergent ones included)
	Divergent   int    `json:"divergent"`  // repeats with different bytes
	Quarantined int    `json:"quarantined"`
	// LastReceivedAt is the last request of any kind; zero if none.
	LastReceivedAt time.Time `json:"last_received_at,omitzero"`
}

// DestinationStats is the state of one destination's outbox.
type DestinationStats struct {
	Destination string `json:"destination"`
	Pending     int    `json:"pending"`
	Delivered   int    `json:"delivered"`
	Dead        int    `json:"dead"`
	// OldestPending is the age of the oldest pending job, counted from its
	// creation or its last replay.
	OldestPending        time.Duration `json:"-"`
	OldestPendingSeconds float64       `json:"oldest_pending_age_seconds"`
}

// Stats are the counts of `hookwarden stats` and /api/stats.
type Stats struct {
	At           time.Time          `json:"at"`
	Sources      []SourceStats      `json:"sources"`
	Destinations []DestinationStats `json:"destinations"`
}

// Stats counts per source and per destination over the whole file. What
// retention deleted still counts (pruned_totals keeps its totals), so the
// numbers do not drop when receipts and jobs are pruned. The
// names given come first, with zeros, then any other name found in the file.
func (s *Store) Stats(ctx context.Context, sources, destinations []string) (Stats, error) {
	st := Stats{At: s.now().UTC()}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	srcIdx := map[string]int{}
	src := func(name string) *SourceStats {
		i, ok := srcIdx[name]
		if !ok {
			i = len(st.Sources)
			srcIdx[name] = i
			st.Sources = append(st.Sources, SourceStats{Source: name})
		}
		return &st.Sources[i]
	}
	for _, n := range sources {
		src(n)
	}
	err = eachRow(ctx, tx, `
SELECT source, 'events', count(*), NULL FROM events GROUP BY source
UNION ALL SELECT source, kind, count(*), max(received_at) FROM receipts GROUP BY source, kind
UNION ALL SELECT r.source, 'batch-' || re.kind, count(*), NULL
	FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.kind != 'accepted' GROUP BY r.source, re.kind
UNION ALL SELECT source, 'quarantine', sum(count), max(last_at) FROM quarantine GROUP BY source
UNION ALL SELECT name, 'pruned-' || kind, n, CASE WHEN kind = 'last_received' THEN at END FROM pruned_totals WHERE kind != 'delivered'
ORDER BY 1`,
		func(rows *sql.Rows) error {
			var name, kind string
			var n int
			var last sql.NullString
			if err := rows.Scan(&name, &kind, &n, &last); err != nil {
				return err
			}
			ss := src(name)
			switch kind {
			case "events", "pruned-accepted":
				ss.Accepted += n
			case "duplicate", "batch-duplicate", "pruned-duplicate":
				ss.Duplicates += n
			case "divergent", "batch-divergent", "pruned-divergent":
				ss.Duplicates += n
				ss.Divergent += n
			case "quarantine", "pruned-quarantined":
				ss.Quarantined += n
			}
			if t, err := parseNullTime(last); err == nil && t.After(ss.LastReceivedAt) {
				ss.LastReceivedAt = t
			}
			return nil
		})
	if err != nil {
		return st, fmt.Errorf("stats per source: %w", err)
	}

	dstIdx := map[string]int{}
	dst := func(name string) *DestinationStats {
		i, ok := dstIdx[name]
		if !ok {
			i = len(st.Destinations)
			dstIdx[name] = i
			st.Destinations = append(st.Destinations, DestinationStats{Destination: name})
		}
		return &st.Destinations[i]
	}
	for _, n := range destinations {
		dst(n)
	}
	err = eachRow(ctx, tx, `
SELECT destination, state, count(*), min(CASE WHEN state = 'pending' THEN COALESCE(replayed_at, created_at) END)
FROM jobs GROUP BY destination, state
UNION ALL SELECT name, kind, n, NULL FROM pruned_totals WHERE kind = 'delivered'
ORDER BY 1`,
		func(rows *sql.Rows) error {
			var name, state string
			var n int
			var oldest sql.NullString
			if err := rows.Scan(&name, &state, &n, &oldest); err != nil {
				return err
			}
			ds := dst(name)
			switch state {
			case "pending":
				ds.Pending = n
				if t, err := parseNullTime(oldest); err == nil && !t.IsZero() {
					ds.OldestPending = max(st.At.Sub(t), 0)
					ds.OldestPendingSeconds = ds.OldestPending.Seconds()
				}
			case "delivered": // live jobs, and those retention folded away
				ds.Delivered += n
			case "dead":
				ds.Dead = n
			}
			return nil
		})
	if err != nil {
		return st, fmt.Errorf("stats per destination: %w", err)
	}
	return st, nil
}

// eachRow runs q and calls fn for every row, closing the rows in every case.
func eachRow(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, fn func(*sql.Rows) error, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func parseNullTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return parseTime(s.String)
}

func parseInto(dst *time.Time, s string) error {
	t, err := parseTime(s)
	*dst = t
	return err
}

func parseNullInto(dst *time.Time, s sql.NullString) error {
	t, err := parseNullTime(s)
	*dst = t
	return err
}
