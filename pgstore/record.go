package pgstore

// Record: the receipt, the claims of its events and their jobs in one
// transaction, with the semantics of sqlitestore's Record. Where SQLite's
// single writer serializes requests, concurrent transactions here meet on
// the unique keys: INSERT ... ON CONFLICT DO NOTHING waits for a concurrent
// insert of the same key to commit and then returns no row, which is the
// duplicate signal (never SELECT then INSERT: that races). Nothing is checked before it is inserted.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// retries is how many times a transaction that lost a deadlock (two
// batches claiming the same ids in other orders) is run again.
const retries = 3

// Record commits the receipt, the claims of its events and their jobs in
// one durable transaction. Every failure wraps hookwarden.ErrUnavailable
// (the receiver's 503), a commit whose outcome is unknown included: the
// provider's retry is then a duplicate or a new claim, never a loss.
//
// With SetDirect, a new job that gets a free slot is committed leased to it
// and handed over after COMMIT returns; a failed try gives its slots back.
func (s *Store) Record(ctx context.Context, r *hookwarden.Receipt) (hookwarden.RecordResult, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	r = storable(r)
	rec := &recording{s: s, r: r, headers: encodeHeaders(r.Header), at: r.ReceivedAt.UTC(), now: s.now(), direct: true}
	if s.batch != nil && rec.batchable() {
		// A new single event shares a statement with the calls waiting
		// (batch.go); what the batch did not claim is recorded below.
		done, err := s.batch.record(ctx, rec)
		if err != nil {
			return hookwarden.RecordResult{}, fmt.Errorf("%w: record receipt: %w", hookwarden.ErrUnavailable, err)
		}
		if done {
			return rec.res, nil
		}
	}
	res, err := rec.alone(ctx)
	if err != nil {
		return hookwarden.RecordResult{}, fmt.Errorf("%w: record receipt: %w", hookwarden.ErrUnavailable, err)
	}
	return res, nil
}

// alone runs the call on a transaction of its own, run again per runAgain.
func (rc *recording) alone(ctx context.Context) (res hookwarden.RecordResult, err error) {
	err = runAgain(ctx, func() (err error) {
		res, err = rc.run(ctx)
		return err
	})
	return res, err
}

// runAgain runs fn, a whole transaction, and runs it again (up to retries
// times) when the server rolled it back to break a deadlock or a
// serialization conflict, or when a row it referenced was deleted by a
// concurrent prune (a foreign key violation: run again, the claim is new).
// A failed COMMIT is never run again.
func runAgain(ctx context.Context, fn func() error) error {
	for try := 0; ; try++ {
		err := fn()
		if err == nil || try >= retries || !retryable(err) || errors.Is(err, errCommit) || ctx.Err() != nil {
			return err
		}
	}
}

func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001" || pe.Code == "23503")
}

// errCommit marks a failed COMMIT: its outcome is unknown (the connection
// may have gone after the server committed), so it is never run again
// here; the provider's retry meets the claim if it was committed.
var errCommit = errors.New("commit outcome unknown")

// testBeforeCommit, set by a test, runs just before COMMIT.
var testBeforeCommit func(ctx context.Context, tx pgx.Tx)

// recording is one Record call.
type recording struct {
	s       *Store
	r       *hookwarden.Receipt
	headers string
	at      time.Time // the receipt's time, as SQLite stores it
	now     any       // the database's clock (nil) or the test clock: jobs' due times
	tx      pgx.Tx
	res     hookwarden.RecordResult
	release *releasing // set: the transaction is ReleaseQuarantined's
	// direct: new jobs may go to Direct slots. Only run hands them over or
	// gives them back, so only Record sets it: a caller of jobs outside
	// run gets pending jobs and holds no slot.
	direct bool
	handed []handed // jobs of this try created leased to a Direct slot
	// batched: a batch's statement tried to claim it as new and did not,
	// so the general path need not try the one-statement form again.
	batched bool
	due     []string // destinations of this try's jobs not handed over: announced once committed
}

func (rc *recording) run(ctx context.Context) (_ hookwarden.RecordResult, err error) {
	defer func() {
		// After the rollback below (deferred later, run first): a slot is
		// handed its job only once COMMIT returned, and given back otherwise.
		handOver(rc.handed, err == nil)
		clear(rc.handed) // drop the bodies
		rc.handed = rc.handed[:0]
	}()
	tx, err := rc.s.pool.Begin(ctx)
	if err != nil {
		return hookwarden.RecordResult{}, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		// After Commit this is a no-op; on a dead connection it returns at once.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	rc.tx, rc.due = tx, rc.due[:0]
	rc.res = hookwarden.RecordResult{Events: make([]hookwarden.EventResult, len(rc.r.Events))}
	if err := rc.record(ctx); err != nil {
		return hookwarden.RecordResult{}, err
	}
	if testBeforeCommit != nil {
		testBeforeCommit(ctx, tx)
	}
	if err := tx.Commit(ctx); err != nil {
		return hookwarden.RecordResult{}, fmt.Errorf("%w: %w", errCommit, err)
	}
	rc.s.announceCommitted(rc.due) // after COMMIT, off the ack path (notify.go)
	return rc.res, nil
}

func (rc *recording) record(ctx context.Context) error {
	if rc.release != nil {
		return rc.releaseHeld(ctx)
	}
	r := rc.r
	if r.Token != nil {
		ok, err := rc.token(ctx)
		if err != nil {
			return err
		}
		if !ok {
			// Nothing is written: the token's row is the first request's.
			rc.res = hookwarden.RecordResult{Outcome: hookwarden.Replayed}
			return nil
		}
	}
	switch {
	case len(r.Events) == 0:
		return rc.quarantine(ctx, held{kind: hookwarden.QuarantineNoEventID, reason: r.QuarantineReason})
	case len(r.Events) == 1 && r.Events[0].Body == nil:
		return rc.single(ctx)
	default:
		return rc.batch(ctx)
	}
}

// claim inserts the claim of ev. It returns the event's row and whether
// this call claimed it; for a duplicate, whether the bytes differ, or
// cannot be told (retention emptied the claim's hash: keep the body).
func (rc *recording) claim(ctx context.Context, ev *hookwarden.Event) (ref int64, isNew, divergent, unknown bool, err error) {
	err = rc.tx.QueryRow(ctx, `INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256, body, derived)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (source, event_id) DO NOTHING RETURNING id`,
		rc.r.Source, ev.ID, ev.Type, rc.at, ev.BodySHA256[:], ev.Body, ev.Derived).Scan(&ref)
	if err == nil {
		if ev.Seq != nil {
			if err := rc.seq(ctx, ev.Seq); err != nil {
				return 0, false, false, false, err
			}
		}
		if err := rc.late(ctx, ev); err != nil {
			return 0, false, false, false, err
		}
		return ref, true, false, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, false, false, fmt.Errorf("claim event: %w", err)
	}
	// The conflicting row is committed (the insert waited for it), so this
	// statement's snapshot sees it.
	var sum []byte
	if err := rc.tx.QueryRow(ctx, `SELECT id, body_sha256 FROM events WHERE source = $1 AND event_id = $2`,
		rc.r.Source, ev.ID).Scan(&ref, &sum); err != nil {
		return 0, false, false, false, fmt.Errorf("look up claimed event: %w", err)
	}
	divergent, unknown = len(sum) > 0 && !bytes.Equal(sum, ev.BodySHA256[:]), len(sum) == 0
	if divergent {
		if divergent, unknown, err = rc.backfillCopy(ctx, ref); err != nil {
			return 0, false, false, false, err
		}
	}
	return ref, false, divergent, unknown, nil
}

// backfillCopy applies the backfill rule to a duplicate whose bytes differ
// from its claim's: when either copy came from a backfill (the API's JSON
// may differ from the webhook's bytes) it is not divergent, but its body is
// kept (unknown), as for a claim whose hash retention removed.
func (rc *recording) backfillCopy(ctx context.Context, ref int64) (divergent, unknown bool, err error) {
	backfilled := rc.r.Backfill
	if !backfilled {
		if err := rc.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM receipts WHERE event_ref = $1 AND kind = 'accepted' AND origin = 'backfill')`,
			ref).Scan(&backfilled); err != nil {
			return false, false, fmt.Errorf("look up backfilled claim: %w", err)
		}
	}
	return !backfilled, backfilled, nil
}

// receiptKind is what a single-event receipt is stored as, and the body it
// keeps: all of it but a byte-identical duplicate's (the accepted receipt
// has it). A kept empty body is stored as such, not as NULL (pruned).
func receiptKind(isNew, divergent, unknown bool, body []byte) (string, []byte) {
	kind := "accepted"
	switch {
	case isNew:
	case divergent:
		kind = "divergent"
	case unknown:
		kind = "duplicate"
	default:
		return "duplicate", nil
	}
	if body == nil {
		body = []byte{}
	}
	return kind, body
}

// receiptHash is a receipt's body_sha256: empty when the bytes are its
// event's own (events.body_sha256 has the hash), the request's otherwise.
func receiptHash(r *hookwarden.Receipt, kind string, body []byte) []byte {
	if kind == "accepted" || (kind == "duplicate" && body == nil) {
		return []byte{}
	}
	return r.BodySHA256[:]
}

func (rc *recording) insertReceipt(ctx context.Context, ref any, kind string, body []byte, reason any) (int64, error) {
	var id int64
	var origin any
	if rc.r.Backfill {
		origin = "backfill"
	}
	err := rc.tx.QueryRow(ctx, `INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256, quarantine_reason, origin)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
		rc.r.Source, ref, kind, rc.at, rc.r.RemoteAddr, rc.headers, body, receiptHash(rc.r, kind, body), reason, origin).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert receipt: %w", err)
	}
	return id, nil
}

// jobsSQL creates an event's jobs ($1), one per destination ($2), due now
// by the store's clock ($4). A destination with a lease ($3, microseconds;
// 0: none) got a Direct slot: its job starts leased to this process's run
// ($5) with its first attempt counted, and is due again only if the lease
// ends (next_at stays the creation time: see the schema's comment on jobs).
const jobsSQL = `INSERT INTO jobs (event_ref, destination, state, attempts, next_at, leased_until, leased_by, created_at)
	SELECT $1, d.dest, 'pending', CASE WHEN d.lease > 0 THEN 1 ELSE 0 END, t,
		CASE WHEN d.lease > 0 THEN t + d.lease * interval '1 microsecond' END,
		CASE WHEN d.lease > 0 THEN $5::bigint END, t
	FROM unnest($2::text[], $3::bigint[]) AS d(dest, lease), COALESCE($4::timestamptz, now()) AS t`

// jobs creates ev's jobs, each leased to a Direct slot when one is free,
// else pending and due now.
func (rc *recording) jobs(ctx context.Context, ref int64, ev *hookwarden.Event) (int, error) {
	n := len(ev.Destinations)
	if n == 0 {
		return 0, nil
	}
	plain := ev.Destinations
	if len(ev.OrderKeys) > 0 {
		plain = nil
		for i, d := range ev.Destinations {
			if key := ev.OrderKey(i); key != "" && rc.s.policy(d).Ordered {
				if err := rc.keyedJobTx(ctx, ref, d, key); err != nil {
					return 0, err
				}
				rc.s.waiting(d)
				rc.due = append(rc.due, d)
				continue
			}
			plain = append(plain, d)
		}
	}
	if len(plain) == 0 {
		return n, nil
	}
	first := len(rc.handed)
	leases := make([]int64, len(plain))
	for i, d := range plain {
		if !rc.direct || !rc.s.hasDirect() {
			break
		}
		allowed, err := rc.directAllowed(ctx, d)
		if err != nil {
			return 0, err
		}
		if !allowed {
			rc.s.waiting(d)
			continue
		}
		slot, ok := rc.s.reserve(d)
		if !ok {
			continue
		}
		// Listed before the insert, so that any failure from here on gives
		// the slot back.
		rc.handed = append(rc.handed, handed{slot: slot, dest: d})
		leases[i] = max(slot.LeaseFor().Microseconds(), 1)
	}
	for i, d := range plain {
		if leases[i] == 0 { // not handed over: any instance's workers may lease it
			rc.due = append(rc.due, d)
		}
	}
	args := []any{ref, plain, leases, rc.now, rc.s.holder()}
	if len(rc.handed) == first {
		if _, err := rc.tx.Exec(ctx, jobsSQL, args...); err != nil {
			return 0, fmt.Errorf("insert jobs: %w", err)
		}
		return n, nil
	}
	rows, err := rc.tx.Query(ctx, jobsSQL+` RETURNING id, destination, attempts`, args...)
	if err != nil {
		return 0, fmt.Errorf("insert jobs: %w", err)
	}
	defer rows.Close()
	mine := rc.handed[first:]
	for rows.Next() {
		var id int64
		var dest string
		var attempts int
		if err := rows.Scan(&id, &dest, &attempts); err != nil {
			return 0, fmt.Errorf("insert jobs: %w", err)
		}
		if attempts == 0 {
			continue // no slot: it waits for a lease
		}
		// Rows of one destination are alike but for their id: any pairing
		// with its slots is right.
		for k := range mine {
			if h := &mine[k]; !h.set && h.dest == dest {
				h.job, h.set = directJob(rc.r, ev, id, dest), true
				break
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("insert jobs: %w", err)
	}
	return n, nil
}

func (rc *recording) single(ctx context.Context) error {
	r, ev := rc.r, &rc.r.Events[0]
	if rc.freshable(ev) && !rc.batched {
		// The common case, a new event, in one statement (fresh.go).
		if done, err := rc.fresh(ctx, ev); err != nil || done {
			return err
		}
	}
	if r.BodyReplayCheck {
		orig, conflict, err := rc.bodyKey(ctx, ev)
		if err != nil {
			return err
		}
		if conflict {
			claimed, err := rc.claimed(ctx, ev.ID)
			if err != nil {
				return err
			}
			if !claimed {
				return rc.quarantine(ctx, replayedHeld(ev.ID, orig))
			}
		}
	}
	ref, isNew, divergent, unknown, err := rc.claim(ctx, ev)
	if err != nil {
		return err
	}
	kind, body := receiptKind(isNew, divergent, unknown, r.Body)
	if rc.res.ReceiptID, err = rc.insertReceipt(ctx, ref, kind, body, nil); err != nil {
		return err
	}
	if !isNew {
		rc.res.Outcome = hookwarden.Duplicate
		rc.res.Events[0] = hookwarden.EventResult{Outcome: hookwarden.Duplicate, Divergent: divergent}
		return nil
	}
	n, err := rc.jobs(ctx, ref, ev)
	if err != nil {
		return err
	}
	rc.res.Outcome = hookwarden.Accepted
	rc.res.Events[0] = hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: n}
	return nil
}

// The statements of a many-event request (batch): one per table rather
// than one per event and table, the rows in the arrays' order.
const (
	batchClaimSQL = `INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256, body, derived)
	SELECT $1, e.id, e.type, $2::timestamptz, e.sum, e.body, e.derived
	FROM unnest($3::text[], $4::text[], $5::bytea[], $6::bytea[], $7::boolean[]) WITH ORDINALITY AS e(id, type, sum, body, derived, n)
	ORDER BY e.n
	ON CONFLICT (source, event_id) DO NOTHING RETURNING id, event_id`
	batchLookupSQL = `SELECT id, event_id, body_sha256 FROM events WHERE source = $1 AND event_id = ANY($2::text[])`
	batchJobsSQL   = `INSERT INTO jobs (event_ref, destination, state, attempts, next_at, created_at)
	SELECT j.ref, j.dest, 'pending', 0, t, t
	FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS j(ref, dest, n), COALESCE($3::timestamptz, now()) AS t
	ORDER BY j.n`
	batchLinkSQL = `INSERT INTO receipt_events (event_ref, receipt_id, kind)
	SELECT l.ref, $1, l.kind FROM unnest($2::bigint[], $3::text[]) AS l(ref, kind)
	ON CONFLICT DO NOTHING`
)

// batch records a request of several events (SPEC 11): one receipt, each
// event claimed on its own id, with one statement per table (claims, the
// duplicates' look-up, jobs, links) rather than three round trips per event.
func (rc *recording) batch(ctx context.Context) error {
	id, err := rc.insertReceipt(ctx, nil, "batch", rc.r.Body, nil)
	if err != nil {
		return err
	}
	rc.res.ReceiptID = id
	rc.res.Outcome = hookwarden.Duplicate
	evs := rc.r.Events
	// The claims go in id order: batches sharing ids then take their keys'
	// locks in one order and cannot deadlock. In batch order, two batches
	// carrying x and y the other way round each wait for the other until
	// the server's deadlock_timeout (1 s) aborts one, which then runs again:
	// under load, past the call's deadline. A repeated id is claimed by its
	// first copy (the others are its duplicates). Jobs and links follow in
	// batch order, the order the elements are delivered in.
	first := make([]int, len(evs))
	byID := make(map[string]int, len(evs))
	var order []int // the first copy of each id
	for i := range evs {
		if f, ok := byID[evs[i].ID]; ok {
			first[i] = f
			continue
		}
		byID[evs[i].ID], first[i] = i, i
		order = append(order, i)
	}
	sort.Slice(order, func(a, b int) bool { return evs[order[a]].ID < evs[order[b]].ID })
	ids, types := make([]string, len(order)), make([]string, len(order))
	sums, bodies := make([][]byte, len(order)), make([][]byte, len(order))
	derived := make([]bool, len(order))
	for k, i := range order {
		ev := &evs[i]
		ids[k], types[k], sums[k], bodies[k], derived[k] = ev.ID, ev.Type, ev.BodySHA256[:], ev.Body, ev.Derived
	}
	refs := make([]int64, len(evs))
	isNew := make([]bool, len(evs))
	claimSum := make([][]byte, len(evs)) // a first copy's claim hash
	rows, err := rc.tx.Query(ctx, batchClaimSQL, rc.r.Source, rc.at, ids, types, sums, bodies, derived)
	if err != nil {
		return fmt.Errorf("claim events: %w", err)
	}
	claimed := 0
	for rows.Next() {
		var ref int64
		var eid string
		if err := rows.Scan(&ref, &eid); err != nil {
			rows.Close()
			return fmt.Errorf("claim events: %w", err)
		}
		i := byID[eid]
		refs[i], isNew[i], claimSum[i] = ref, true, evs[i].BodySHA256[:]
		claimed++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("claim events: %w", err)
	}
	if claimed < len(order) {
		// The conflicting rows are committed (the insert waited for them),
		// so this statement's snapshot sees them.
		old := make([]string, 0, len(order)-claimed)
		for _, i := range order {
			if !isNew[i] {
				old = append(old, evs[i].ID)
			}
		}
		rows, err := rc.tx.Query(ctx, batchLookupSQL, rc.r.Source, old)
		if err != nil {
			return fmt.Errorf("look up claimed event: %w", err)
		}
		found := 0
		for rows.Next() {
			var ref int64
			var eid string
			var sum []byte
			if err := rows.Scan(&ref, &eid, &sum); err != nil {
				rows.Close()
				return fmt.Errorf("look up claimed event: %w", err)
			}
			i := byID[eid]
			refs[i], claimSum[i] = ref, sum
			found++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("look up claimed event: %w", err)
		}
		if found != len(old) {
			return fmt.Errorf("look up claimed event: %d of %d claims not found", len(old)-found, len(old))
		}
	}
	// Jobs: of the events with an order key or a Direct slot to ask for,
	// by the general path; of the others, one statement.
	var jobRefs []int64
	var jobDests []string
	linkRefs := make([]int64, 0, len(order))
	linkKinds := make([]string, 0, len(order))
	for i := range evs {
		ev := &evs[i]
		f := first[i]
		kind := "accepted"
		er := hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: len(ev.Destinations)}
		if f == i && isNew[i] {
			// What claim keeps beside a new claim (sequence.go).
			if ev.Seq != nil {
				if err := rc.seq(ctx, ev.Seq); err != nil {
					return err
				}
			}
			if err := rc.late(ctx, ev); err != nil {
				return err
			}
			if len(ev.OrderKeys) > 0 || (rc.direct && rc.s.hasDirect()) {
				if _, err := rc.jobs(ctx, refs[i], ev); err != nil {
					return err
				}
			} else {
				for _, d := range ev.Destinations {
					jobRefs, jobDests = append(jobRefs, refs[i]), append(jobDests, d)
					rc.due = append(rc.due, d)
				}
			}
			rc.res.Outcome = hookwarden.Accepted
		} else {
			sum := claimSum[f]
			divergent := len(sum) > 0 && !bytes.Equal(sum, ev.BodySHA256[:])
			if divergent {
				if divergent, _, err = rc.backfillCopy(ctx, refs[f]); err != nil {
					return err
				}
			}
			kind = "duplicate"
			if divergent {
				kind = "divergent"
			}
			er = hookwarden.EventResult{Outcome: hookwarden.Duplicate, Divergent: divergent}
		}
		// A batch may repeat an id within itself; the first link wins.
		if f == i {
			linkRefs, linkKinds = append(linkRefs, refs[i]), append(linkKinds, kind)
		}
		rc.res.Events[i] = er
	}
	if len(jobRefs) > 0 {
		if _, err := rc.tx.Exec(ctx, batchJobsSQL, jobRefs, jobDests, rc.now); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
	}
	if _, err := rc.tx.Exec(ctx, batchLinkSQL, id, linkRefs, linkKinds); err != nil {
		return fmt.Errorf("link receipt to event: %w", err)
	}
	return nil
}

// encodeHeaders renders headers in HTTP wire format, sorted by name, one
// "Name: value" per line, as sqlitestore stores them. A header value may
// carry bytes that are not UTF-8 (obs-text), which a text column refuses:
// they become U+FFFD rather than fail the request.
func encodeHeaders(h http.Header) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range h[k] {
			b.WriteString(k)
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	return strings.ToValidUTF8(strings.ReplaceAll(b.String(), "\x00", ""), "\uFFFD")
}

// decodeHeaders reads headers as encodeHeaders wrote them.
func decodeHeaders(s string) http.Header {
	h := http.Header{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			h[k] = append(h[k], v)
		}
	}
	return h
}

// storable returns r, or, when an event id or type is text PostgreSQL
// cannot hold (not UTF-8, or a NUL byte: SQLite keeps either), a copy held
// in quarantine instead: refused on every retry, the request would be a 503
// for ever; held, its bytes are kept for a human.
func storable(r *hookwarden.Receipt) *hookwarden.Receipt {
	ok := func(s string) bool { return utf8.ValidString(s) && !strings.Contains(s, "\x00") }
	bad := !ok(r.QuarantineReason)
	for i := range r.Events {
		bad = bad || !ok(r.Events[i].ID) || !ok(r.Events[i].Type)
	}
	if !bad {
		return r
	}
	cp := *r
	cp.Events, cp.BodyReplayCheck = nil, false
	cp.QuarantineReason = "event id or type is not UTF-8 text without NUL bytes, which PostgreSQL cannot store"
	return &cp
}
