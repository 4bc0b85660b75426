package sqlitestore

// Events as the operator reads them (events list, events show, the admin
// API): claims with their receipts, jobs, attempts and audit entries. Reads
// use the read pool, so they work on a read-only copy and never wait for
// the writer.

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
)

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
func scanEvent(sc interface{ Scan(...any) error }, ev *hookwarden.EventSummary, extra ...any) error {
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

func statusOf(pending, dead int) hookwarden.EventStatus {
	switch {
	case dead > 0:
		return hookwarden.StatusDead
	case pending > 0:
		return hookwarden.StatusPending
	}
	return hookwarden.StatusDelivered
}

// ListEvents lists events newest first. next is the cursor of the following
// page, 0 when this page is the last.
func (s *Store) ListEvents(ctx context.Context, f hookwarden.EventFilter) (items []hookwarden.EventSummary, next int64, err error) {
	if f.Status == hookwarden.StatusQuarantined {
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
	case hookwarden.StatusDead:
		where = append(where, "e.id IN (SELECT event_ref FROM jobs WHERE state = 'dead')")
	case hookwarden.StatusPending:
		where = append(where, "e.id IN (SELECT event_ref FROM jobs WHERE state = 'pending')",
			"e.id NOT IN (SELECT event_ref FROM jobs WHERE state = 'dead')")
	case hookwarden.StatusDelivered:
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
		var ev hookwarden.EventSummary
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

func (s *Store) listQuarantined(ctx context.Context, f hookwarden.EventFilter) (items []hookwarden.EventSummary, next int64, err error) {
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
		ev := hookwarden.EventSummary{Status: hookwarden.StatusQuarantined}
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

// ShowEvent returns one event with its receipts, jobs and attempts, or an
// error wrapping hookwarden.ErrNotFound.
func (s *Store) ShowEvent(ctx context.Context, source, eventID string) (*hookwarden.EventDetail, error) {
	// One read transaction: a consistent snapshot across the queries below.
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("show event: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	d := &hookwarden.EventDetail{}
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

func loadReceipts(ctx context.Context, tx *sql.Tx, d *hookwarden.EventDetail) error {
	rows, err := tx.QueryContext(ctx, `
SELECT r.id, CASE WHEN r.origin = 'backfill' AND r.kind = 'accepted' THEN 'backfill' ELSE r.kind END,
	0, r.received_at, r.remote_addr, r.headers, r.body, r.body_sha256, r.pruned_at, COALESCE(r.origin, '')
FROM receipts r WHERE r.event_ref = ?1
UNION ALL
SELECT r.id, re.kind, 1, r.received_at, r.remote_addr, r.headers, r.body, r.body_sha256, r.pruned_at, ''
FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.event_ref = ?1
ORDER BY 1`, d.Ref)
	if err != nil {
		return fmt.Errorf("show event receipts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r hookwarden.ReceiptInfo
		var at, headers string
		var sum []byte
		var pruned sql.NullString
		if err := rows.Scan(&r.ID, &r.Kind, &r.Batch, &at, &r.RemoteAddr, &headers, &r.Body, &sum, &pruned, &r.Origin); err != nil {
			return fmt.Errorf("show event receipts: %w", err)
		}
		r.Header = decodeHeaders(headers)
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

func loadJobs(ctx context.Context, tx *sql.Tx, d *hookwarden.EventDetail) error {
	rows, err := tx.QueryContext(ctx, `
SELECT id, destination, state, attempts, dead_count, next_at, leased_until, last_error, created_at, finished_at, replayed_at
FROM jobs WHERE event_ref = ? ORDER BY id`, d.Ref)
	if err != nil {
		return fmt.Errorf("show event jobs: %w", err)
	}
	defer rows.Close()
	byID := map[int64]int{}
	for rows.Next() {
		var j hookwarden.JobInfo
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
		var a hookwarden.AttemptInfo
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
