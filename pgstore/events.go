package pgstore

// Events as the operator reads them (events list, events show, the admin
// API), with sqlitestore's semantics: claims with their receipts, jobs,
// attempts and audit entries. Reads are plain reads (no locks): they never
// wait for a writer nor make one wait. A read of several statements runs
// in one read-only REPEATABLE READ transaction, one snapshot for all of
// them, which at that level never fails for a conflict.

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

var _ hookwarden.Inspector = (*Store)(nil)

func limitOf(n int) int {
	if n <= 0 {
		return hookwarden.DefaultLimit
	}
	return min(n, hookwarden.MaxLimit)
}

// snapshot runs fn in a read-only transaction with one snapshot.
func (s *Store) snapshot(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// utc is a nullable time column as a time (zero for NULL), in UTC.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// eventColumns are an event's summary, selected FROM eventFrom: its jobs by
// state, the requests that carried it (its own receipts and the batches it
// was an element of), whether one diverged, and whether retention removed
// the bytes it would be delivered with (folded into its claim, or its
// accepted receipt's body cleared).
const eventColumns = `e.id, e.source, e.event_id, e.event_type, e.claimed_at, j.pending, j.delivered, j.dead,
	COALESCE(e.receipts, 0) + r.n + b.n, r.divergent OR b.divergent, e.pruned_at IS NOT NULL OR r.pruned OR b.pruned,
	e.pruned_at, COALESCE(e.jobs, 0), COALESCE(e.attempts, 0), e.last_received_at, e.delivered_at, e.derived`

// eventFrom is events e with one aggregate per event over each of its
// jobs, receipts and batch links, on the jobs_event, receipts_event and
// receipt_events keys. LATERAL, not EXISTS in the select list: the
// planner may run an uncorrelated EXISTS as one hashed scan of the whole
// table, where a walk of a page must cost the page's rows only.
const eventFrom = `events e
	CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE state = 'pending') AS pending,
		count(*) FILTER (WHERE state = 'delivered') AS delivered, count(*) FILTER (WHERE state = 'dead') AS dead
		FROM jobs WHERE event_ref = e.id) j
	CROSS JOIN LATERAL (SELECT count(*) AS n, COALESCE(bool_or(kind = 'divergent'), false) AS divergent,
		COALESCE(bool_or(kind = 'accepted' AND pruned_at IS NOT NULL), false) AS pruned
		FROM receipts WHERE event_ref = e.id) r
	CROSS JOIN LATERAL (SELECT count(*) AS n, COALESCE(bool_or(re.kind = 'divergent'), false) AS divergent,
		COALESCE(bool_or(re.kind = 'accepted' AND pr.pruned_at IS NOT NULL), false) AS pruned
		FROM receipt_events re JOIN receipts pr ON pr.id = re.receipt_id WHERE re.event_ref = e.id) b`

// scanEvent reads the eventColumns (then extra) of one row.
func scanEvent(row pgx.Row, ev *hookwarden.EventSummary, extra ...any) error {
	var at time.Time
	var pruned, last, delivered *time.Time
	var foldedJobs int
	dst := append([]any{&ev.Ref, &ev.Source, &ev.EventID, &ev.Type, &at, &ev.Pending, &ev.Delivered, &ev.Dead,
		&ev.Receipts, &ev.Divergent, &ev.PayloadPruned, &pruned, &foldedJobs, &ev.Attempts, &last, &delivered, &ev.Derived}, extra...)
	if err := row.Scan(dst...); err != nil {
		return err
	}
	if pruned != nil {
		// Folded by retention.payloads: every job was delivered.
		ev.SummaryOnly = true
		ev.PrunedAt, ev.LastReceivedAt, ev.DeliveredAt = utc(pruned), utc(last), utc(delivered)
		ev.Delivered += foldedJobs
	}
	ev.Jobs = ev.Pending + ev.Delivered + ev.Dead
	ev.Status = statusOf(ev.Pending, ev.Dead)
	ev.ClaimedAt = at.UTC()
	return nil
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

// where gathers a query's conditions and their numbered parameters.
type where struct {
	conds []string
	args  []any
}

// arg adds a parameter and returns its placeholder.
func (w *where) arg(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

func (w *where) add(cond string) { w.conds = append(w.conds, cond) }

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// page cuts a listing fetched with limit+1 rows to limit and returns the
// cursor of the next page (the last row's key), 0 on the last page.
func page[T any](items []T, limit int, key func(T) int64) ([]T, int64) {
	if len(items) <= limit {
		return items, 0
	}
	items = items[:limit]
	return items, key(items[limit-1])
}

// ListEvents lists events newest first. next is the cursor of the
// following page, 0 when this page is the last.
//
// No filter reads more than its answer bounds, as on SQLite: --status dead
// or pending semi-joins those jobs' partial indexes (the backlog, not the
// history); --source and --type read events_source_type (source,
// event_type, id) backwards for each (source, type) pair the filter
// matches, found by one seek per pair, and merge the pages; --since starts
// at the first claim of its hour, which hourly.first_ref holds. Only the
// plain listing (and --status delivered, most events) walks events newest
// first on the primary key, and it stops at the page's end.
func (s *Store) ListEvents(ctx context.Context, f hookwarden.EventFilter) (items []hookwarden.EventSummary, next int64, err error) {
	if f.Status == hookwarden.StatusQuarantined {
		return s.listQuarantined(ctx, f)
	}
	q, args, limit, err := eventsQuery(f)
	if err != nil {
		return nil, 0, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err = s.snapshot(ctx, func(tx pgx.Tx) error {
		if f.Status == hookwarden.StatusDead || f.Status == hookwarden.StatusPending {
			ids, err := listByJobs(ctx, tx, f, limit)
			if err != nil {
				return err
			}
			q, args = summariesSQL, []any{ids}
		} else if byPairs(f) {
			pairs, err := typePairs(ctx, tx, f)
			if err != nil {
				return err
			}
			if pairs != nil {
				ids, err := listPairs(ctx, tx, f, pairs, limit)
				if err != nil {
					return err
				}
				q, args = summariesSQL, []any{ids}
			}
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ev hookwarden.EventSummary
			if err := scanEvent(rows, &ev); err != nil {
				return err
			}
			items = append(items, ev)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	items, next = page(items, limit, func(e hookwarden.EventSummary) int64 { return e.Ref })
	return items, next, nil
}

// byPairs: f lists by (source, type) pairs (a source or a type, no
// status that starts from the jobs).
func byPairs(f hookwarden.EventFilter) bool {
	return (f.Source != "" || f.Type != "") && f.Status != hookwarden.StatusDead && f.Status != hookwarden.StatusPending
}

// sinceRef is a scalar subquery: the lowest event id that can have been
// claimed at or after the time parameter p, the first claim of p's hour or
// a later one (hourly.first_ref, on hourly_hour). It is exact whatever the
// instances' clocks: first_ref is the least id claimed in its hour. No
// claim since: past the highest id.
func sinceRef(p string) string {
	return "COALESCE((SELECT min(first_ref) FROM hourly WHERE hour >= date_trunc('hour', " + p + "::timestamptz, 'UTC')), " +
		"(SELECT COALESCE(max(id), 0) + 1 FROM events))"
}

// filterConds adds f's conditions on events e but the source and type
// (which the pairs' walk, or typeConds, adds).
func filterConds(w *where, f hookwarden.EventFilter) error {
	if !f.Since.IsZero() {
		at := w.arg(f.Since.UTC())
		w.add("e.claimed_at >= " + at)
		w.add("e.id >= " + sinceRef(at))
	}
	if f.Cursor > 0 {
		w.add("e.id < " + w.arg(f.Cursor))
	}
	switch f.Status {
	case hookwarden.StatusDead, hookwarden.StatusPending:
		// listByJobs walks their jobs; jobsChunkSQL adds the rest.
	case hookwarden.StatusDelivered:
		w.add("NOT EXISTS (SELECT 1 FROM jobs WHERE event_ref = e.id AND state <> 'delivered')")
	case "":
	default:
		return fmt.Errorf("list events: unknown status %q", f.Status)
	}
	return nil
}

// typeConds adds f's source and type on events e.
func typeConds(w *where, f hookwarden.EventFilter) {
	if f.Source != "" {
		w.add("e.source = " + w.arg(f.Source))
	}
	if p, ok := strings.CutSuffix(f.Type, "*"); ok {
		w.add("starts_with(e.event_type, " + w.arg(p) + ")")
	} else if f.Type != "" {
		w.add("e.event_type = " + w.arg(f.Type))
	}
}

// eventsQuery is ListEvents' statement for f (not quarantined) walking the
// events newest first, which fetches one row more than the page's limit.
// For a source or a type it is the fallback when the filter matches more
// than maxTypePairs pairs.
func eventsQuery(f hookwarden.EventFilter) (q string, args []any, limit int, err error) {
	var w where
	typeConds(&w, f)
	if err := filterConds(&w, f); err != nil {
		return "", nil, 0, err
	}
	limit = limitOf(f.Limit)
	// The page's ids first, then their summaries: the planner may gather a
	// filter's matches before it orders them (the backlog, for --status
	// pending), and must not sum every match's jobs and receipts on the way.
	q = "SELECT " + eventColumns + " FROM " + eventFrom + " WHERE e.id = ANY (ARRAY(SELECT e.id FROM events e" + w.String() +
		" ORDER BY e.id DESC LIMIT " + w.arg(limit+1) + ")) ORDER BY e.id DESC"
	return q, w.args, limit, nil
}

// jobsChunkSQL reads, for --status dead or pending (status), the next
// chunk of the backlog's (or the dead letters') jobs newest event first:
// at most $3 of them with event_ref below $1 and from $2 on, on
// jobs_pending_event or jobs_dead_event (schema 11). It returns how many it
// read, the least event_ref among them (where the next chunk starts), and
// the ids of their events that the rest of the filter keeps, newest first:
// source $4, type $5 (a prefix with $6), claimed at or after $7, and, for
// pending, no job dead. The events are probed by id (= ANY of an array),
// never joined by a plan that reads the filter's matches first.
func jobsChunkSQL(status hookwarden.EventStatus) string {
	state, also := "dead", ""
	if status == hookwarden.StatusPending {
		// A count, not NOT EXISTS: a subplan probes each event's jobs; an
		// anti-join may rescan the dead letters' index for every event.
		state, also = "pending", " AND (SELECT count(*) FROM jobs d WHERE d.event_ref = e.id AND d.state = 'dead') = 0"
	}
	return `WITH c AS MATERIALIZED (SELECT event_ref FROM jobs WHERE state = '` + state + `' AND event_ref < $1 AND event_ref >= $2
	ORDER BY event_ref DESC LIMIT $3)
SELECT (SELECT count(*) FROM c), (SELECT COALESCE(min(event_ref), 0) FROM c),
	ARRAY(SELECT e.id FROM events e WHERE e.id = ANY (ARRAY(SELECT DISTINCT event_ref FROM c))
		AND ($4::text IS NULL OR e.source = $4)
		AND ($5::text IS NULL OR (CASE WHEN $6 THEN starts_with(e.event_type, $5) ELSE e.event_type = $5 END))
		AND ($7::timestamptz IS NULL OR e.claimed_at >= $7)` + also + `
		ORDER BY e.id DESC)`
}

// maxJobsChunk bounds a chunk of listByJobs' walk.
const maxJobsChunk = 4096

// jobsWalk is where listByJobs' walk is: the chunk's bounds (hi, lo) and
// the rest of the filter, as jobsChunkSQL's parameters.
type jobsWalk struct {
	hi, lo      int64
	source, typ *string
	prefix      bool
	since       *time.Time
}

// newJobsWalk starts f's walk below its cursor, from --since's first id.
func newJobsWalk(ctx context.Context, tx pgx.Tx, f hookwarden.EventFilter) (*jobsWalk, error) {
	w := &jobsWalk{hi: 1<<63 - 1}
	if f.Cursor > 0 {
		w.hi = f.Cursor
	}
	if f.Source != "" {
		w.source = &f.Source
	}
	if f.Type != "" {
		p, ok := strings.CutSuffix(f.Type, "*")
		w.typ, w.prefix = &p, ok
	}
	if !f.Since.IsZero() {
		at := f.Since.UTC()
		w.since = &at
		if err := tx.QueryRow(ctx, sinceRefSQL, at).Scan(&w.lo); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// args are jobsChunkSQL's parameters for a chunk of n jobs.
func (w *jobsWalk) args(n int) []any {
	return []any{w.hi, w.lo, n, w.source, w.typ, w.prefix, w.since}
}

// listByJobs lists the ids of f's page (limit+1 of them) for --status
// dead or pending: it walks those jobs newest event first in chunks
// (jobsChunkSQL), each twice the last up to maxJobsChunk, until the page is
// full or the jobs run out. A page reads its own jobs plus those of the
// events the filter skips: the backlog or the dead letters at most, never
// the history, whatever the statistics say.
func listByJobs(ctx context.Context, tx pgx.Tx, f hookwarden.EventFilter, limit int) ([]int64, error) {
	w, err := newJobsWalk(ctx, tx, f)
	if err != nil {
		return nil, err
	}
	q := jobsChunkSQL(f.Status)
	var ids []int64
	for chunk := limit + 1; len(ids) <= limit; chunk = min(2*chunk, maxJobsChunk) {
		var read, least int64
		var got []int64
		if err := tx.QueryRow(ctx, q, w.args(chunk)...).Scan(&read, &least, &got); err != nil {
			return nil, err
		}
		ids = append(ids, got...)
		if read < int64(chunk) {
			break
		}
		w.hi = least
	}
	return ids[:min(len(ids), limit+1)], nil
}

// pairListSQL reads the newest ids of one (source, type) pair ($1, $2)
// below $3 and from $4 on, claimed at or after $5 (with since), for
// status delivered (with delivered), at most $6: a backward range of
// events_source_type (source, event_type, id). One statement per pair,
// with the pair's own values: planned for one pair the planner knows a rare
// one from a common one, which a join over the list of pairs hides.
func pairListSQL(since, delivered bool) string {
	q := `SELECT e.id FROM events e WHERE e.source = $1 AND e.event_type = $2 AND e.id < $3 AND e.id >= $4`
	if since {
		q += ` AND e.claimed_at >= $5`
	} else {
		q += ` AND $5::timestamptz IS NULL`
	}
	if delivered {
		q += ` AND NOT EXISTS (SELECT 1 FROM jobs WHERE event_ref = e.id AND state <> 'delivered')`
	}
	return q + ` ORDER BY e.id DESC LIMIT $6`
}

// summariesSQL reads the summaries of the events whose ids are $1, newest
// first.
const summariesSQL = "SELECT " + eventColumns + " FROM " + eventFrom + " WHERE e.id = ANY ($1::bigint[]) ORDER BY e.id DESC"

// sinceRefSQL: the lowest id claimed at or after $1 can have (sinceRef).
var sinceRefSQL = "SELECT " + sinceRef("$1")

// listPairs lists the ids of f's page (limit+1 of them) over the pairs it
// matches: each pair's newest, by pairListSQL in one batch (one round
// trip), merged newest first.
func listPairs(ctx context.Context, tx pgx.Tx, f hookwarden.EventFilter, pairs [][2]string, limit int) ([]int64, error) {
	hi, lo := int64(1<<63-1), int64(0)
	if f.Cursor > 0 {
		hi = f.Cursor
	}
	var since *time.Time
	if !f.Since.IsZero() {
		at := f.Since.UTC()
		since = &at
		if err := tx.QueryRow(ctx, sinceRefSQL, at).Scan(&lo); err != nil {
			return nil, err
		}
	}
	q := pairListSQL(since != nil, f.Status == hookwarden.StatusDelivered)
	var b pgx.Batch
	for _, p := range pairs {
		b.Queue(q, p[0], p[1], hi, lo, since, limit+1)
	}
	br := tx.SendBatch(ctx, &b)
	var ids []int64
	for range pairs {
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return nil, err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			br.Close()
			return nil, err
		}
		ids = append(ids, got...)
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	slices.SortFunc(ids, func(a, b int64) int { return cmp.Compare(b, a) })
	return ids[:min(len(ids), limit+1)], nil
}

// maxTypePairs bounds the (source, type) pairs a listing merges; a filter
// matching more (ids in the type?) walks the events newest first instead.
const maxTypePairs = 2000

// typePairsSQL lists the (source, type) pairs of events, by skipping
// through events_source_type: one seek per pair, stopping after $1 pairs.
// Of one source ($2), from a type prefix on ($3) and while the pairs keep
// it: typeOfSourcePairsSQL.
const (
	typePairsSQL = `
WITH RECURSIVE pairs(source, event_type, n) AS (
	(SELECT source, event_type, 1 FROM events ORDER BY source, event_type LIMIT 1)
	UNION ALL
	SELECT nx.source, nx.event_type, p.n + 1 FROM pairs p CROSS JOIN LATERAL (
		SELECT source, event_type FROM events WHERE (source, event_type) > (p.source, p.event_type)
		ORDER BY source, event_type LIMIT 1) nx
	WHERE p.n < $1)
SELECT source, event_type FROM pairs`
	typeOfSourcePairsSQL = `
WITH RECURSIVE pairs(event_type, n) AS (
	(SELECT event_type, 1 FROM events WHERE source = $2 AND event_type >= $3 ORDER BY event_type LIMIT 1)
	UNION ALL
	SELECT nx.event_type, p.n + 1 FROM pairs p CROSS JOIN LATERAL (
		SELECT event_type FROM events WHERE source = $2 AND event_type > p.event_type
		ORDER BY event_type LIMIT 1) nx
	WHERE p.n < $1 AND starts_with(p.event_type, $3))
SELECT $2, event_type FROM pairs`
)

// sourcesSQL lists every source with events: each has a count row of
// kind accepted in counters whose sum is its events (a few rows a source;
// one of a source with none left may stay until the fold, and its pair
// then finds nothing).
const sourcesSQL = `SELECT DISTINCT name FROM counters WHERE kind = 'accepted' ORDER BY name`

// typePairs lists the (source, type) pairs of events that f's source and
// type match. An exact type pairs with f's source, or with each source of
// the counters (sourcesSQL): no walk of the pairs, which took a seek per
// pair of the whole store (6.5-9.9 ms of a CLI read at 10 M claims, a
// cold backend). A prefix, or no type, walks them (typePairsSQL). nil: more
// than maxTypePairs pairs, or more than twice as many seeks.
func typePairs(ctx context.Context, tx pgx.Tx, f hookwarden.EventFilter) ([][2]string, error) {
	prefix, isPrefix := strings.CutSuffix(f.Type, "*")
	if f.Type != "" && !isPrefix {
		if f.Source != "" {
			return [][2]string{{f.Source, f.Type}}, nil
		}
		rows, err := tx.Query(ctx, sourcesSQL)
		if err != nil {
			return nil, err
		}
		sources, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(sources) > maxTypePairs {
			return nil, err
		}
		pairs := make([][2]string, 0, len(sources))
		for _, src := range sources {
			pairs = append(pairs, [2]string{src, f.Type})
		}
		return pairs, nil
	}
	seeks := 2*maxTypePairs + 1
	q, args := typePairsSQL, []any{seeks}
	if f.Source != "" {
		q, args = typeOfSourcePairsSQL, []any{seeks, f.Source, prefix}
	}
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	pairs := [][2]string{}
	n := 0
	for rows.Next() {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			return nil, err
		}
		n++
		switch {
		case f.Type == "", isPrefix && strings.HasPrefix(p[1], prefix), !isPrefix && p[1] == f.Type:
			if pairs = append(pairs, p); len(pairs) > maxTypePairs {
				return nil, nil
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if n >= seeks {
		return nil, nil
	}
	return pairs, nil
}

// listQuarantined is ListEvents of status quarantined: the held requests
// not released (a released one is an event now), newest first.
func (s *Store) listQuarantined(ctx context.Context, f hookwarden.EventFilter) (items []hookwarden.EventSummary, next int64, err error) {
	var w where
	w.add("q.released_at IS NULL")
	if f.Source != "" {
		w.add("q.source = " + w.arg(f.Source))
	}
	if !f.Since.IsZero() {
		w.add("q.last_at >= " + w.arg(f.Since.UTC()))
	}
	if f.Cursor > 0 {
		w.add("q.receipt_id < " + w.arg(f.Cursor))
	}
	limit := limitOf(f.Limit)
	q := `SELECT q.receipt_id, q.source, q.reason, q.first_at, q.last_at, q.count FROM quarantine q` + w.String() +
		" ORDER BY q.receipt_id DESC LIMIT " + w.arg(limit+1)
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list quarantined: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		ev := hookwarden.EventSummary{Status: hookwarden.StatusQuarantined}
		var first, last time.Time
		if err := rows.Scan(&ev.Receipt, &ev.Source, &ev.Reason, &first, &last, &ev.Count); err != nil {
			return nil, 0, fmt.Errorf("list quarantined: %w", err)
		}
		ev.Ref, ev.Receipts = ev.Receipt, ev.Count
		ev.ClaimedAt, ev.LastAt = first.UTC(), last.UTC()
		items = append(items, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list quarantined: %w", err)
	}
	items, next = page(items, limit, func(e hookwarden.EventSummary) int64 { return e.Ref })
	return items, next, nil
}

// ShowEvent returns one event with its receipts, jobs, attempts and audit
// entries, read from one snapshot, or an error wrapping
// hookwarden.ErrNotFound.
func (s *Store) ShowEvent(ctx context.Context, source, eventID string) (*hookwarden.EventDetail, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	d := &hookwarden.EventDetail{}
	err := s.snapshot(ctx, func(tx pgx.Tx) error {
		var sum, element []byte
		row := tx.QueryRow(ctx, "SELECT "+eventColumns+", e.body_sha256, e.body FROM "+eventFrom+" WHERE e.source = $1 AND e.event_id = $2",
			source, eventID)
		if err := scanEvent(row, &d.EventSummary, &sum, &element); err != nil {
			return err
		}
		d.BodySHA256 = hex.EncodeToString(sum) // "" once folded: the hash went with the payload
		if err := loadReceipts(ctx, tx, d); err != nil {
			return err
		}
		d.TakeClaimBody(element)
		if err := loadJobs(ctx, tx, d); err != nil {
			return err
		}
		var err error
		d.Audit, err = eventAudit(ctx, tx, source, eventID)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("event %s/%s: %w", source, eventID, hookwarden.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("show event: %w", err)
	}
	return d, nil
}

// QuarantinedReceipt reports whether receipt id of source is a quarantined
// request: what `events show SOURCE ID` most likely meant when no event has
// that id (the quarantine list shows receipt ids).
func (s *Store) QuarantinedReceipt(ctx context.Context, source string, id int64) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM receipts WHERE id = $1 AND source = $2 AND kind = 'quarantined')`,
		id, source).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up receipt %d: %w", id, err)
	}
	return ok, nil
}

// loadReceipts reads the requests that carried the event: its own
// receipts, then the batches it was an element of, in arrival order.
func loadReceipts(ctx context.Context, tx pgx.Tx, d *hookwarden.EventDetail) error {
	rows, err := tx.Query(ctx, `
SELECT r.id, CASE WHEN r.origin = 'backfill' AND r.kind = 'accepted' THEN 'backfill' ELSE r.kind END,
	false, r.received_at, r.remote_addr, r.headers, r.body, r.body_sha256, r.pruned_at, COALESCE(r.origin, '')
FROM receipts r WHERE r.event_ref = $1
UNION ALL
SELECT r.id, re.kind, true, r.received_at, r.remote_addr, r.headers, r.body, r.body_sha256, r.pruned_at, ''
FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.event_ref = $1
ORDER BY 1`, d.Ref)
	if err != nil {
		return fmt.Errorf("show event receipts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r hookwarden.ReceiptInfo
		var at time.Time
		var headers string
		var sum []byte
		var pruned *time.Time
		if err := rows.Scan(&r.ID, &r.Kind, &r.Batch, &at, &r.RemoteAddr, &headers, &r.Body, &sum, &pruned, &r.Origin); err != nil {
			return fmt.Errorf("show event receipts: %w", err)
		}
		r.Header = decodeHeaders(headers)
		r.BodySHA256 = hex.EncodeToString(sum)
		if len(sum) == 0 && !r.Batch {
			r.BodySHA256 = d.BodySHA256 // the event's own bytes: the hash is on the claim
		}
		r.ReceivedAt, r.PrunedAt = at.UTC(), utc(pruned)
		d.ReceiptLog = append(d.ReceiptLog, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("show event receipts: %w", err)
	}
	return nil
}

// loadJobs reads the event's jobs and every attempt of each.
func loadJobs(ctx context.Context, tx pgx.Tx, d *hookwarden.EventDetail) error {
	rows, err := tx.Query(ctx, `
SELECT id, destination, state, attempts, dead_count, next_at, leased_until, last_error, created_at, finished_at, replayed_at
FROM jobs WHERE event_ref = $1 ORDER BY id`, d.Ref)
	if err != nil {
		return fmt.Errorf("show event jobs: %w", err)
	}
	defer rows.Close()
	byID := map[int64]int{}
	for rows.Next() {
		var j hookwarden.JobInfo
		var next, created time.Time
		var leased, finished, replayed *time.Time
		var lastErr *string
		if err := rows.Scan(&j.ID, &j.Destination, &j.State, &j.Attempts, &j.DeadCount, &next, &leased, &lastErr,
			&created, &finished, &replayed); err != nil {
			return fmt.Errorf("show event jobs: %w", err)
		}
		if lastErr != nil {
			j.LastError = *lastErr
		}
		j.NextAt, j.CreatedAt = next.UTC(), created.UTC()
		j.LeasedUntil, j.FinishedAt, j.ReplayedAt = utc(leased), utc(finished), utc(replayed)
		byID[j.ID] = len(d.JobLog)
		d.JobLog = append(d.JobLog, j)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("show event jobs: %w", err)
	}
	rows.Close()

	rows, err = tx.Query(ctx, `
SELECT a.job_id, a.number, a.started_at, a.duration_us, a.status_code, a.exit_code, a.error, a.response, a.verdict
FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.event_ref = $1 ORDER BY a.id`, d.Ref)
	if err != nil {
		return fmt.Errorf("show event attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a hookwarden.AttemptInfo
		var job, us int64
		var at time.Time
		var status, exit *int
		var errText *string
		var resp []byte
		if err := rows.Scan(&job, &a.Number, &at, &us, &status, &exit, &errText, &resp, &a.Verdict); err != nil {
			return fmt.Errorf("show event attempts: %w", err)
		}
		a.StartedAt = at.UTC()
		a.DurationMS = float64(us) / 1000
		if status != nil {
			a.StatusCode = *status
		}
		a.ExitCode = exit
		if errText != nil {
			a.Error = *errText
		}
		a.Response = string(resp)
		if i, ok := byID[job]; ok {
			d.JobLog[i].Log = append(d.JobLog[i].Log, a)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("show event attempts: %w", err)
	}
	return nil
}

// EventAudit lists the audit entries that changed one event, oldest first.
func (s *Store) EventAudit(ctx context.Context, source, eventID string) ([]hookwarden.AuditEntry, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return eventAudit(ctx, s.pool, source, eventID)
}

// querier is the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// eventAudit reads the entries linked to one event, on the audit_events key.
func eventAudit(ctx context.Context, q querier, source, eventID string) ([]hookwarden.AuditEntry, error) {
	rows, err := q.Query(ctx, `
SELECT a.id, a.at, a.action, a.origin, a.actor, a.args, a.result, a.receipt_id
FROM audit_events l JOIN audit a ON a.id = l.audit_id
WHERE l.source = $1 AND l.event_id = $2 ORDER BY a.id`, source, eventID)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	defer rows.Close()
	var out []hookwarden.AuditEntry
	for rows.Next() {
		var e hookwarden.AuditEntry
		var args string
		var result *string
		var receipt *int64
		if err := rows.Scan(&e.ID, &e.At, &e.Action, &e.Origin, &e.Actor, &args, &result, &receipt); err != nil {
			return nil, fmt.Errorf("read audit log: %w", err)
		}
		e.At = e.At.UTC()
		e.Args = []byte(args)
		if result != nil {
			e.Result = []byte(*result)
		}
		if receipt != nil {
			e.ReceiptID = *receipt
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}
