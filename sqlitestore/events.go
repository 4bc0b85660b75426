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
	"sort"
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
	e.pruned_at, COALESCE(e.jobs, 0), COALESCE(e.attempts, 0), e.last_received_at, e.delivered_at, e.derived`

// scanEvent reads the eventColumns (then extra) of one row.
func scanEvent(sc interface{ Scan(...any) error }, ev *hookwarden.EventSummary, extra ...any) error {
	var at string
	var pruned, last, delivered sql.NullString
	var foldedJobs int
	dst := append([]any{&ev.Ref, &ev.Source, &ev.EventID, &ev.Type, &at, &ev.Pending, &ev.Delivered, &ev.Dead,
		&ev.Receipts, &ev.Divergent, &ev.PayloadPruned, &pruned, &foldedJobs, &ev.Attempts, &last, &delivered, &ev.Derived}, extra...)
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
//
// No filter reads what the page needs: each one picks the walk that its
// answer bounds, never the history. --status dead or pending starts from
// those jobs (partial indexes: the backlog, not the history); --source and
// --type read events_source_type in id order for each (source, type) the
// filter matches and merge the pages; --since starts where the hourly
// counts say its hour's first event is. Only the plain listing (and
// --status delivered, most events) walks events newest first, and it stops
// at the page's end.
func (s *Store) ListEvents(ctx context.Context, f hookwarden.EventFilter) (items []hookwarden.EventSummary, next int64, err error) {
	if f.Status == hookwarden.StatusQuarantined {
		return s.listQuarantined(ctx, f)
	}
	limit := limitOf(f.Limit)
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	var where []string
	var args []any
	if !f.Since.IsZero() {
		at := fmtTime(f.Since)
		bound, err := firstRefSince(ctx, tx, at)
		if err != nil {
			return nil, 0, fmt.Errorf("list events: %w", err)
		}
		where, args = append(where, "e.claimed_at >= ?", "e.id >= ?"), append(args, at, bound)
	}
	if f.Cursor > 0 {
		where, args = append(where, "e.id < ?"), append(args, f.Cursor)
	}
	switch f.Status {
	case hookwarden.StatusDelivered:
		where = append(where, "NOT EXISTS (SELECT 1 FROM jobs WHERE event_ref = e.id AND state != 'delivered')")
	case hookwarden.StatusDead, hookwarden.StatusPending, "":
	default:
		return nil, 0, fmt.Errorf("list events: unknown status %q", f.Status)
	}
	var ids []int64
	switch {
	case f.Status == hookwarden.StatusDead || f.Status == hookwarden.StatusPending:
		ids, err = listByJobs(ctx, tx, f, where, args, limit+1)
	case f.Source != "" || f.Type != "":
		ids, err = listByType(ctx, tx, f, where, args, limit+1)
	default:
		q := "SELECT e.id FROM events e"
		if len(where) > 0 {
			q += " WHERE " + strings.Join(where, " AND ")
		}
		ids, err = selectIDs(ctx, tx, q+" ORDER BY e.id DESC LIMIT ?", append(args, limit+1)...)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	if len(ids) == 0 {
		return nil, next, nil
	}
	err = eachRow(ctx, tx, "SELECT "+eventColumns+" FROM events e WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY e.id DESC",
		func(rows *sql.Rows) error {
			var ev hookwarden.EventSummary
			if err := scanEvent(rows, &ev); err != nil {
				return err
			}
			items = append(items, ev)
			return nil
		}, idSet(ids))
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	return items, next, nil
}

// firstRefSinceSQL: see firstRefSince.
const firstRefSinceSQL = `SELECT COALESCE(
	(SELECT min(first_ref) FROM hourly WHERE hour >= substr(?1, 1, 13)),
	(SELECT COALESCE(max(id), 0) + 1 FROM events))`

// firstRefSince is the lowest event id that can have been claimed at or
// after at: the first claim of at's hour or a later one, from the hourly
// counts (ids grow with time, to within one writer batch). No claim since:
// past the highest id.
func firstRefSince(ctx context.Context, tx *sql.Tx, at string) (int64, error) {
	var ref int64
	err := tx.QueryRowContext(ctx, firstRefSinceSQL, at).Scan(&ref)
	return ref, err
}

// typeMatch is the SQL and arguments of the --source and --type filter.
func typeMatch(f hookwarden.EventFilter) (where []string, args []any) {
	if f.Source != "" {
		where, args = append(where, "e.source = ?"), append(args, f.Source)
	}
	if p, ok := strings.CutSuffix(f.Type, "*"); ok {
		where, args = append(where, "substr(e.event_type, 1, ?) = ?"), append(args, len(p), p)
	} else if f.Type != "" {
		where, args = append(where, "e.event_type = ?"), append(args, f.Type)
	}
	return where, args
}

// statusWalk is how many of the newest events listByJobs looks at before
// it starts from the jobs instead.
const statusWalk = 2000

// listByJobs lists events with a dead job (--status dead), or a pending one
// and none dead (--status pending). The backlog is usually the newest
// events, so it first looks at the newest statusWalk events (within the
// cursor and --since), checking each one's jobs on jobs_event; a page
// filled there is the answer. Otherwise it starts from those jobs: their
// partial index holds the backlog, not the history (CROSS JOIN keeps that
// order of the walk).
func listByJobs(ctx context.Context, tx *sql.Tx, f hookwarden.EventFilter, where []string, args []any, n int) ([]int64, error) {
	w, a := typeMatch(f)
	cond := "EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = e.id AND j.state = 'dead')"
	if f.Status == hookwarden.StatusPending {
		cond = "EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = e.id AND j.state = 'pending')" +
			" AND NOT EXISTS (SELECT 1 FROM jobs d WHERE d.event_ref = e.id AND d.state = 'dead')"
	}
	inner := "SELECT id FROM events e"
	if len(where) > 0 {
		inner += " WHERE " + strings.Join(where, " AND ")
	}
	q := "SELECT e.id FROM (" + inner + " ORDER BY id DESC LIMIT ?) nw CROSS JOIN events e ON e.id = nw.id WHERE " +
		strings.Join(append([]string{cond}, w...), " AND ") + " ORDER BY e.id DESC LIMIT ?"
	ids, err := selectIDs(ctx, tx, q, append(append(append(append([]any{}, args...), statusWalk), a...), n)...)
	if err != nil || len(ids) >= n {
		return ids, err
	}
	return selectIDs(ctx, tx, jobsListSQL(f.Status, append(where, w...)), append(append(args, a...), n)...)
}

// jobsListSQL is listByJobs' query, with the filter's other conditions.
func jobsListSQL(status hookwarden.EventStatus, where []string) string {
	// INDEXED BY: left alone, the planner reads DISTINCT event_ref in
	// order from jobs_event, every job of the history. The dead letters
	// are walked newest event first on jobs_dead_event (schema 13): the
	// page's events are looked up and the walk stops. Pending jobs have no
	// such index (it would cost every acknowledgement an entry): their
	// events are read from jobs_due and sorted, the backlog's size.
	if status != hookwarden.StatusPending {
		return `SELECT DISTINCT j.event_ref FROM jobs j INDEXED BY jobs_dead_event CROSS JOIN events e ON e.id = j.event_ref
	WHERE ` + strings.Join(append([]string{"j.state = 'dead'"}, where...), " AND ") + " ORDER BY j.event_ref DESC LIMIT ?"
	}
	q := `SELECT e.id FROM (SELECT DISTINCT event_ref AS ref FROM jobs INDEXED BY jobs_due WHERE state = 'pending') bk
	CROSS JOIN events e ON e.id = bk.ref`
	where = append(where, "NOT EXISTS (SELECT 1 FROM jobs d WHERE d.event_ref = e.id AND d.state = 'dead')")
	return q + " WHERE " + strings.Join(where, " AND ") + " ORDER BY e.id DESC LIMIT ?"
}

// maxTypePairs bounds the (source, type) pairs listByType merges; a file
// with more (ids in the type?) is walked newest first instead.
const maxTypePairs = 2000

// listByType lists the events of a source and/or type: for each
// (source, type) pair the filter matches (found by seeks on
// events_source_type, one per pair), the newest n ids in that pair, read
// in id order from the same index; the pages are merged.
func listByType(ctx context.Context, tx *sql.Tx, f hookwarden.EventFilter, where []string, args []any, n int) ([]int64, error) {
	pairs, err := typePairs(ctx, tx, f)
	if err != nil {
		return nil, err
	}
	if pairs == nil {
		w, a := typeMatch(f)
		q := "SELECT e.id FROM events e WHERE " + strings.Join(append(where, w...), " AND ")
		return selectIDs(ctx, tx, q+" ORDER BY e.id DESC LIMIT ?", append(append(args, a...), n)...)
	}
	q := pairListSQL(where)
	var ids []int64
	for _, p := range pairs {
		got, err := selectIDs(ctx, tx, q, append(append([]any{p[0], p[1]}, args...), n)...)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] > ids[j] })
	return ids[:min(len(ids), n)], nil
}

// The seeks of typePairs on events_source_type: the first pair of a source
// (from a type on), the pair after one within its source.
const (
	firstPairOfSourceSQL = `SELECT event_type FROM events WHERE source = ? AND event_type >= ?
	ORDER BY source, event_type LIMIT 1`
	nextPairOfSourceSQL = `SELECT event_type FROM events WHERE source = ? AND event_type > ? ORDER BY source, event_type LIMIT 1`
	// sourcesSQL lists every source that ever claimed an event: the
	// counters keep a row for each (schema 12), a few rows in all.
	sourcesSQL = `SELECT name FROM counters WHERE kind = 'accepted' ORDER BY name`
)

// pairListSQL reads the newest ids of one (source, type) pair, in id order
// on events_source_type, with the filter's other conditions.
func pairListSQL(where []string) string {
	return "SELECT e.id FROM events e WHERE " + strings.Join(append([]string{"e.source = ?", "e.event_type = ?"}, where...), " AND ") +
		" ORDER BY e.id DESC LIMIT ?"
}

// typePairs lists the (source, type) pairs of events that f's source and
// type match. Without --source the sources come from the counters; an
// exact --type is then one pair per source, read with no seek (a source
// without that type lists nothing), and a prefix or no --type skips
// through each source's types on events_source_type, one seek per pair it
// keeps and one more to leave the prefix's range. nil: more than
// maxTypePairs.
func typePairs(ctx context.Context, tx *sql.Tx, f hookwarden.EventFilter) ([][2]string, error) {
	sources := []string{f.Source}
	if f.Source == "" {
		var err error
		if sources, err = selectStrings(ctx, tx, sourcesSQL); err != nil {
			return nil, err
		}
	}
	prefix, isPrefix := strings.CutSuffix(f.Type, "*")
	pairs := [][2]string{}
	for _, src := range sources {
		if f.Type != "" && !isPrefix {
			pairs = append(pairs, [2]string{src, f.Type})
		} else {
			typ, err := seekType(ctx, tx, firstPairOfSourceSQL, src, prefix)
			for ; err == nil && strings.HasPrefix(typ, prefix); typ, err = seekType(ctx, tx, nextPairOfSourceSQL, src, typ) {
				if pairs = append(pairs, [2]string{src, typ}); len(pairs) > maxTypePairs {
					return nil, nil
				}
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
		}
		if len(pairs) > maxTypePairs {
			return nil, nil
		}
	}
	return pairs, nil
}

// seekType is one of typePairs' seeks: the type q finds, sql.ErrNoRows
// past the source's last.
func seekType(ctx context.Context, tx *sql.Tx, q, source, from string) (string, error) {
	var typ string
	err := tx.QueryRowContext(ctx, q, source, from).Scan(&typ)
	return typ, err
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
	// The claim first, outside the snapshot below: the look-up reads the
	// index, the log and claims one after the other (claimindex.go).
	ref, ok, err := s.findClaim(ctx, source, eventID)
	if err != nil {
		return nil, fmt.Errorf("show event: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("event %s/%s: %w", source, eventID, hookwarden.ErrNotFound)
	}
	// One read transaction: a consistent snapshot across the queries below.
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("show event: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	d := &hookwarden.EventDetail{}
	var sum, element []byte
	row := tx.QueryRowContext(ctx, "SELECT "+eventColumns+", e.body_sha256, e.body FROM events e WHERE e.id = ? AND e.source = ? AND e.event_id = ?",
		ref, source, eventID)
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
	d.TakeClaimBody(element)
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
