package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
)

// writeStmts are prepared once on the writer's single connection and reused
// by every transaction (tx.StmtContext on the same connection re-binds them
// without preparing again).
type writeStmts struct {
	claim, lookup, receipt, job, link *sql.Stmt
	claimNew                          *sql.Stmt // an id the claims filter never saw (filter.go)
	quarantineFind, quarantineBump    *sql.Stmt
	quarantineNew, quarantineReuse    *sql.Stmt
	bodyKey, bodyKeyLookup            *sql.Stmt
	token, tokenLookup                *sql.Stmt
	backfilled                        *sql.Stmt
	lease, attempt                    *sql.Stmt
	verify, logTop                    *sql.Stmt // the claims log's (claimindex.go)
	delivered, retry, dead            *sql.Stmt
	many                              manyStmts
}

func (w *writeStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		// No RETURNING on the hot inserts: SQLite implements it with an
		// ephemeral table per execution, which cost more than the insert.
		// The row id comes from last_insert_rowid, the claim from changes().
		// The claim, once the log's index (claimindex.go) has not found
		// the id: the events row is inserted when claims does not hold it
		// either, and its insert trigger appends the claim to claims_log.
		{&w.claim, `INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256, body)
			SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS (SELECT 1 FROM claims WHERE source = ?1 AND event_id = ?2)`},
		{&w.claimNew, `INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`},
		{&w.lookup, `SELECT id, body_sha256 FROM events WHERE id = (SELECT event_ref FROM claims WHERE source = ? AND event_id = ?)`},
		{&w.verify, verifyClaimSQL},
		{&w.logTop, logTopSQL},
		{&w.receipt, `INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256, quarantine_reason, origin)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		// Asked only of a duplicate whose bytes differ (rare): was the
		// claim recovered by a backfill?
		{&w.backfilled, `SELECT EXISTS (SELECT 1 FROM receipts WHERE event_ref = ? AND kind = 'accepted' AND origin = 'backfill')`},
		// attempts, next_at and leased_until say whether the job starts
		// leased to a Direct slot (attempt 1 counted, due at the lease's end).
		{&w.job, `INSERT INTO jobs (event_ref, destination, state, attempts, next_at, leased_until, created_at)
			VALUES (?, ?, 'pending', ?, ?, ?, ?)`},
		{&w.link, `INSERT INTO receipt_events (event_ref, receipt_id, kind) VALUES (?, ?, ?)`},
		{&w.quarantineFind, `SELECT receipt_id, released_at IS NOT NULL FROM quarantine WHERE source = ? AND body_sha256 = ?`},
		{&w.quarantineBump, `UPDATE quarantine SET count = count + 1, last_at = ? WHERE source = ? AND body_sha256 = ?`},
		{&w.quarantineNew, `INSERT INTO quarantine (source, body_sha256, receipt_id, reason, first_at, last_at, count, kind, candidate_event_id, original_event_id)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?)`},
		// A released body that comes again is held anew, in the released
		// row's place (the primary key allows one row per body).
		{&w.quarantineReuse, `UPDATE quarantine SET receipt_id = ?3, reason = ?4, first_at = ?5, last_at = ?5, count = 1, kind = ?6,
			candidate_event_id = ?7, original_event_id = ?8, released_at = NULL, released_event_id = NULL
			WHERE source = ?1 AND body_sha256 = ?2`},
		{&w.bodyKey, `INSERT INTO body_keys (source, body_sha256, event_id, claimed_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (source, body_sha256) DO NOTHING`},
		{&w.bodyKeyLookup, `SELECT event_id FROM body_keys WHERE source = ? AND body_sha256 = ?`},
		// An expired row (not pruned yet) is taken over by the new request.
		{&w.token, `INSERT INTO seen_tokens (source, token_sha256, body_sha256, expires_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (source, token_sha256) DO UPDATE SET body_sha256 = excluded.body_sha256, expires_at = excluded.expires_at
			WHERE seen_tokens.expires_at <= ?5`},
		{&w.tokenLookup, `SELECT body_sha256 FROM seen_tokens WHERE source = ? AND token_sha256 = ?`},
		{&w.lease, `UPDATE jobs SET attempts = attempts + 1, leased_until = ?, next_at = ?
			WHERE id IN (SELECT id FROM jobs WHERE state = 'pending' AND destination = ? AND next_at <= ? ORDER BY next_at LIMIT ?)
			RETURNING id, event_ref, attempts, dead_count`},
		{&w.attempt, `INSERT INTO attempts (job_id, number, started_at, duration_us, status_code, exit_code, error, response, verdict)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		// The verdict applies only to the lease that made the attempt: a late
		// finish of an attempt whose lease expired (and was leased again)
		// is logged but must not overwrite the newer attempt's outcome.
		{&w.delivered, `UPDATE jobs SET state = 'delivered', leased_until = NULL, last_error = NULL, finished_at = ?
			WHERE id = ? AND state = 'pending' AND attempts = ?`},
		{&w.retry, `UPDATE jobs SET next_at = ?, leased_until = NULL, last_error = ? WHERE id = ? AND state = 'pending' AND attempts = ?`},
		{&w.dead, `UPDATE jobs SET state = 'dead', leased_until = NULL, last_error = ?, finished_at = ?, dead_count = dead_count + 1
			WHERE id = ? AND state = 'pending' AND attempts = ?`},
	} {
		st, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			w.close()
			return fmt.Errorf("prepare statement: %w", err)
		}
		*p.dst = st
	}
	if err := w.many.prepare(ctx, db); err != nil {
		w.close()
		return err
	}
	return nil
}

func (w *writeStmts) close() {
	for _, st := range []*sql.Stmt{w.claim, w.claimNew, w.lookup, w.receipt, w.job, w.link, w.quarantineFind, w.quarantineBump,
		w.quarantineNew, w.quarantineReuse, w.bodyKey, w.bodyKeyLookup, w.token, w.tokenLookup, w.backfilled,
		w.lease, w.attempt, w.delivered, w.retry, w.dead, w.verify, w.logTop} {
		if st != nil {
			st.Close()
		}
	}
	w.many.close()
}

// Record commits the receipt, the claims of its events and their jobs in one
// durable transaction. It never blocks on a full queue: it fails with an error
// wrapping hookwarden.ErrUnavailable, and the receiver answers 503.
func (s *Store) Record(ctx context.Context, r *hookwarden.Receipt) (hookwarden.RecordResult, error) {
	// Outside the writer: keep its work small.
	rec := &recordOp{r: r, headers: encodeHeaders(r.Header), at: fmtTime(r.ReceivedAt), since: s.since()}
	var res hookwarden.RecordResult
	rec.res = &res
	err := s.writeOp(ctx, false, &op{rec: rec, done: make(chan error, 1), fn: func(ctx context.Context, tx *sql.Tx) error {
		res = hookwarden.RecordResult{Events: make([]hookwarden.EventResult, len(r.Events))}
		return s.recordTx(ctx, tx, r, rec.headers, &res)
	}})
	if err != nil {
		return hookwarden.RecordResult{}, err
	}
	return res, nil
}

func (s *Store) recordTx(ctx context.Context, tx *sql.Tx, r *hookwarden.Receipt, headers string, res *hookwarden.RecordResult) error {
	at := fmtTime(r.ReceivedAt)
	if r.Token != nil {
		ok, err := s.tokenTx(ctx, tx, r)
		if err != nil {
			return err
		}
		if !ok {
			// Nothing is written: the token's row is the first request's.
			*res = hookwarden.RecordResult{Outcome: hookwarden.Replayed}
			return nil
		}
	}
	switch {
	case len(r.Events) == 0:
		return s.quarantineTx(ctx, tx, r, headers, at, res, held{kind: hookwarden.QuarantineNoEventID, reason: r.QuarantineReason})
	case len(r.Events) == 1 && r.Events[0].Body == nil:
		return s.singleTx(ctx, tx, r, headers, at, res)
	default:
		return s.batchTx(ctx, tx, r, headers, at, res)
	}
}

// claimTx inserts the claim. It returns the event's row and whether this call
// claimed it; for a duplicate it also says whether the bytes differ.
//
// A claim whose payload retention removed the hash (empty body_sha256)
// cannot tell: the duplicate is not flagged, and unknown says to keep its
// body, since nothing proves it identical.
func (s *Store) claimTx(ctx context.Context, tx *sql.Tx, source string, ev *hookwarden.Event, at string, fromBackfill bool) (ref int64, isNew, divergent, unknown bool, err error) {
	// From the catch-up on, the claims filter knows both levels.
	if err := s.catchUp(ctx, tx); err != nil {
		return 0, false, false, false, err
	}
	var sum []byte
	var inLog bool
	claim := s.stmts.claimNew
	if !s.claims.absent(source, ev.ID) {
		claim = s.stmts.claim
		if ref, sum, inLog, err = s.findClaimTx(ctx, tx, source, ev.ID); err != nil {
			return 0, false, false, false, err
		}
	}
	if !inLog {
		res, err := tx.StmtContext(ctx, claim).ExecContext(ctx,
			source, ev.ID, ev.Type, at, ev.BodySHA256[:], ev.Body)
		if err != nil {
			return 0, false, false, false, fmt.Errorf("claim event: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, false, false, false, fmt.Errorf("claim event: %w", err)
		} else if n == 1 {
			if ref, err = res.LastInsertId(); err != nil {
				return 0, false, false, false, fmt.Errorf("claim event: %w", err)
			}
			s.claims.claimed(source, ev.ID, ref)
			if ev.Derived {
				if err := markDerived(ctx, tx, ref); err != nil {
					return 0, false, false, false, err
				}
			}
			if ev.Seq != nil {
				if err := seqTx(ctx, tx, source, ev.Seq, at); err != nil {
					return 0, false, false, false, err
				}
			}
			if hookwarden.Late(ev, fromBackfill, s.since()) {
				if err := lateTx(ctx, tx, source, ev, at); err != nil {
					return 0, false, false, false, err
				}
			}
			return ref, true, false, false, nil
		}
		if err := tx.StmtContext(ctx, s.stmts.lookup).QueryRowContext(ctx, source, ev.ID).Scan(&ref, &sum); err != nil {
			return 0, false, false, false, fmt.Errorf("look up claimed event: %w", err)
		}
	}
	divergent, unknown = compareClaim(sum, ev)
	if divergent {
		if divergent, unknown, err = s.backfillCopy(ctx, tx, ref, fromBackfill); err != nil {
			return 0, false, false, false, err
		}
	}
	return ref, false, divergent, unknown, nil
}

// markDerived marks a new claim whose id Hookwarden derived (SPEC 11): one
// more statement, for the few events a platform sends without an id.
func markDerived(ctx context.Context, tx *sql.Tx, ref int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE events SET derived = 1 WHERE id = ?`, ref); err != nil {
		return fmt.Errorf("mark derived claim: %w", err)
	}
	return nil
}

// backfillCopy applies the backfill rule to a duplicate whose bytes differ
// from its claim's: when either copy came from a backfill (the API's JSON
// may differ from the webhook's bytes) it is not divergent, but its body is
// kept (unknown), as for a claim whose hash retention removed.
func (s *Store) backfillCopy(ctx context.Context, tx *sql.Tx, ref int64, fromBackfill bool) (divergent, unknown bool, err error) {
	if !fromBackfill {
		if err := tx.StmtContext(ctx, s.stmts.backfilled).QueryRowContext(ctx, ref).Scan(&fromBackfill); err != nil {
			return false, false, fmt.Errorf("look up backfilled claim: %w", err)
		}
	}
	if fromBackfill {
		return false, true, nil
	}
	return true, false, nil
}

// compareClaim says how a duplicate's bytes relate to its claim's hash sum:
// divergent when it differs, unknown when payload retention emptied it.
func compareClaim(sum []byte, ev *hookwarden.Event) (divergent, unknown bool) {
	return len(sum) > 0 && !bytes.Equal(sum, ev.BodySHA256[:]), len(sum) == 0
}

// receiptKind is what a single-event receipt is stored as, and the body it
// keeps: all of it but a byte-identical duplicate's (the accepted receipt
// has it). A kept empty body is stored as such, not as NULL (pruned).
func receiptKind(isNew, divergent, unknown bool, body []byte) (string, []byte) {
	kind := "accepted"
	switch {
	case isNew:
	case divergent:
		kind = "divergent" // keep the differing body: worth a human's look
	case unknown:
		kind = "duplicate" // of a pruned event: keep the body, it may differ
	default:
		return "duplicate", nil
	}
	if body == nil {
		body = []byte{}
	}
	return kind, body
}

// newJob is how a new job is stored: due at once (at), or leased to a
// Direct slot until until, its first attempt counted.
func newJob(at, until string, direct bool) (attempts int, next string, leasedUntil any) {
	if direct {
		return 1, until, until
	}
	return 0, at, nil
}

func (s *Store) jobsTx(ctx context.Context, tx *sql.Tx, r *hookwarden.Receipt, ref int64, ev *hookwarden.Event, at string) (int, error) {
	st := tx.StmtContext(ctx, s.stmts.job)
	for i, d := range ev.Destinations {
		if key := ev.OrderKey(i); key != "" && s.policy(d).Ordered {
			if err := s.keyedJobTx(ctx, tx, ref, d, key, at); err != nil {
				return 0, err
			}
			s.waiting(d)
			continue
		}
		slot, until, direct, err := s.reserve(ctx, tx, d, s.now())
		if err != nil {
			return 0, err
		}
		if direct {
			// Listed now so that a failure releases the slot.
			s.handed = append(s.handed, handed{slot: slot})
		}
		attempts, next, leased := newJob(at, until, direct)
		res, err := st.ExecContext(ctx, ref, d, attempts, next, leased, at)
		if err != nil {
			return 0, fmt.Errorf("insert job: %w", err)
		}
		if direct {
			id, err := res.LastInsertId()
			if err != nil {
				return 0, fmt.Errorf("insert job: %w", err)
			}
			s.handed[len(s.handed)-1].job = directJob(r, ev, id, d)
		}
	}
	return len(ev.Destinations), nil
}

func (s *Store) insertReceipt(ctx context.Context, tx *sql.Tx, r *hookwarden.Receipt, ref any, kind, headers, at string, body []byte, reason any) (int64, error) {
	var origin any
	if r.Backfill {
		origin = "backfill"
	}
	res, err := tx.StmtContext(ctx, s.stmts.receipt).ExecContext(ctx,
		r.Source, ref, kind, at, r.RemoteAddr, headers, body, receiptHash(r, kind, body), reason, origin)
	if err != nil {
		return 0, fmt.Errorf("insert receipt: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert receipt: %w", err)
	}
	return id, nil
}

func (s *Store) singleTx(ctx context.Context, tx *sql.Tx, r *hookwarden.Receipt, headers, at string, res *hookwarden.RecordResult) error {
	ev := &r.Events[0]
	if r.BodyReplayCheck {
		orig, conflict, err := s.bodyKeyTx(ctx, tx, r.Source, ev, at)
		if err != nil {
			return err
		}
		if conflict {
			claimed, err := s.claimedTx(ctx, tx, r.Source, ev.ID)
			if err != nil {
				return err
			}
			if !claimed {
				return s.quarantineTx(ctx, tx, r, headers, at, res, replayedHeld(ev.ID, orig))
			}
		}
	}
	ref, isNew, divergent, unknown, err := s.claimTx(ctx, tx, r.Source, ev, at, r.Backfill)
	if err != nil {
		return err
	}
	kind, body := receiptKind(isNew, divergent, unknown, r.Body)
	if res.ReceiptID, err = s.insertReceipt(ctx, tx, r, ref, kind, headers, at, body, nil); err != nil {
		return err
	}
	if !isNew {
		res.Outcome = hookwarden.Duplicate
		res.Events[0] = hookwarden.EventResult{Outcome: hookwarden.Duplicate, Divergent: divergent}
		return nil
	}
	n, err := s.jobsTx(ctx, tx, r, ref, ev, at)
	if err != nil {
		return err
	}
	res.Outcome = hookwarden.Accepted
	res.Events[0] = hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: n}
	return nil
}

// batchTx records a request of several events (SPEC 11): one receipt, each
// event claimed on its own id, with a few multi-row statements per table
// rather than three or four statements per event (a 100-event request
// spent most of its time stepping single-row inserts). The outcome of each
// event is what claiming them one after the other in request order gives.
func (s *Store) batchTx(ctx context.Context, tx *sql.Tx, r *hookwarden.Receipt, headers, at string, res *hookwarden.RecordResult) error {
	id, err := s.insertReceipt(ctx, tx, r, nil, "batch", headers, at, r.Body, nil)
	if err != nil {
		return err
	}
	res.ReceiptID = id
	res.Outcome = hookwarden.Duplicate
	// From the catch-up on, the claims filter knows both levels.
	if err := s.catchUp(ctx, tx); err != nil {
		return err
	}
	n := len(r.Events)
	// first[i] is the index of the first event with event i's id: a batch
	// may repeat an id, the first copy claims it, the others are its
	// duplicates.
	first := make([]int, n)
	refs := make([]int64, n)
	sums := make([][]byte, n) // a duplicate's claim hash
	known := make([]bool, n)  // refs[i] and sums[i] are the claim's
	byID := make(map[string]int, n)
	var toClaim []int
	checked := false // a claim the filter may hold: insert WHERE NOT EXISTS
	for i := range r.Events {
		ev := &r.Events[i]
		if f, ok := byID[ev.ID]; ok {
			first[i] = f
			continue
		}
		byID[ev.ID], first[i] = i, i
		if !s.claims.absent(r.Source, ev.ID) {
			ref, sum, ok, err := s.findClaimTx(ctx, tx, r.Source, ev.ID)
			if err != nil {
				return err
			}
			if ok {
				refs[i], sums[i], known[i] = ref, sum, true
				continue
			}
			checked = true
		}
		toClaim = append(toClaim, i)
	}
	// One statement form for the whole request keeps the rows in request
	// order; the NOT EXISTS probe of ids the filter rules out costs little.
	stmts := &s.stmts.many.batchClaimNew
	if checked {
		stmts = &s.stmts.many.batchClaim
	}
	isNew := make([]bool, n)
	args := make([]any, 0, 7<<(manyLog-1))
	if err := chunks(len(toClaim), func(lo, size, l int) error {
		args = args[:0]
		for _, i := range toClaim[lo : lo+size] {
			ev := &r.Events[i]
			args = append(args, r.Source, ev.ID, ev.Type, at, ev.BodySHA256[:], ev.Body, ev.Derived)
		}
		rows, err := tx.StmtContext(ctx, stmts[l]).QueryContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("claim events: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var ref int64
			var eid string
			if err := rows.Scan(&ref, &eid); err != nil {
				return fmt.Errorf("claim events: %w", err)
			}
			i := byID[eid]
			refs[i], isNew[i], known[i] = ref, true, true
			s.claims.claimed(r.Source, eid, ref)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claim events: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}

	type jobRow struct {
		ref    int64
		ev     *hookwarden.Event
		dest   string
		until  string // the lease's end when the job goes to a Direct slot
		handed int    // its place in s.handed; -1: not handed over
	}
	var jobs []jobRow
	links := make([]int, 0, n) // the first copy of each id, linked with kinds[i]
	kinds := make([]string, n)
	now := s.now()
	for i := range r.Events {
		ev := &r.Events[i]
		f := first[i]
		if f == i && !known[i] {
			// Claimed by another process since the filter looked.
			if err := tx.StmtContext(ctx, s.stmts.lookup).QueryRowContext(ctx, r.Source, ev.ID).Scan(&refs[i], &sums[i]); err != nil {
				return fmt.Errorf("look up claimed event: %w", err)
			}
			known[i] = true
		}
		if f == i {
			links = append(links, i)
		}
		if f == i && isNew[i] {
			// What claimTx keeps beside a new claim (sequence.go).
			if ev.Seq != nil {
				if err := seqTx(ctx, tx, r.Source, ev.Seq, at); err != nil {
					return err
				}
			}
			if hookwarden.Late(ev, r.Backfill, s.since()) {
				if err := lateTx(ctx, tx, r.Source, ev, at); err != nil {
					return err
				}
			}
			for j, d := range ev.Destinations {
				if key := ev.OrderKey(j); key != "" && s.policy(d).Ordered {
					if err := s.keyedJobTx(ctx, tx, refs[i], d, key, at); err != nil {
						return err
					}
					s.waiting(d)
					continue
				}
				slot, until, direct, err := s.reserve(ctx, tx, d, now)
				if err != nil {
					return err
				}
				jr := jobRow{refs[i], ev, d, until, -1}
				if direct {
					// Listed now so that a failure releases the slot.
					jr.handed = len(s.handed)
					s.handed = append(s.handed, handed{slot: slot})
				}
				jobs = append(jobs, jr)
			}
			kinds[i] = "accepted"
			res.Events[i] = hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: len(ev.Destinations)}
			res.Outcome = hookwarden.Accepted
			continue
		}
		// A duplicate: of a claim stored before, or of an earlier copy
		// in this request (whose claim holds its hash).
		sum := sums[f]
		if isNew[f] {
			sum = r.Events[f].BodySHA256[:]
		}
		divergent, _ := compareClaim(sum, ev)
		if divergent {
			if divergent, _, err = s.backfillCopy(ctx, tx, refs[f], r.Backfill); err != nil {
				return err
			}
		}
		kinds[i] = "duplicate"
		if divergent {
			kinds[i] = "divergent"
		}
		res.Events[i] = hookwarden.EventResult{Outcome: hookwarden.Duplicate, Divergent: divergent}
	}
	// The first link of an id wins: the others repeat it.
	if err := chunks(len(links), func(lo, size, l int) error {
		args = args[:0]
		for _, i := range links[lo : lo+size] {
			args = append(args, refs[i], id, kinds[i])
		}
		if _, err := tx.StmtContext(ctx, s.stmts.many.link[l]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("link receipt to event: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(jobs) == 0 {
		return nil
	}
	// Explicit ids, as in recordMany: a handed job needs its id.
	var base int64
	if err := tx.StmtContext(ctx, s.stmts.many.maxJob).QueryRowContext(ctx).Scan(&base); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	if err := chunks(len(jobs), func(lo, size, l int) error {
		args = args[:0]
		for k, j := range jobs[lo : lo+size] {
			attempts, next, leased := newJob(at, j.until, j.handed >= 0)
			args = append(args, base+int64(lo+k)+1, j.ref, j.dest, attempts, next, leased, at)
		}
		if _, err := tx.StmtContext(ctx, s.stmts.many.job[l]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	for k, j := range jobs {
		if j.handed >= 0 {
			s.handed[j.handed].job = directJob(r, j.ev, base+int64(k)+1, j.dest)
		}
	}
	return nil
}

// recordOp is one Record request as the writer sees it.
type recordOp struct {
	r       *hookwarden.Receipt
	headers string // encodeHeaders(r.Header)
	at      string // fmtTime(r.ReceivedAt)
	res     *hookwarden.RecordResult
	since   time.Time // the run's start: an event timed before it takes singleTx (sequence.go)

	// Filled by recordMany.
	ref              int64
	isNew, divergent bool
	unknown          bool // a duplicate of a claim without a hash (payload pruned)
}

// single reports whether the receipt carries one event that is the whole
// body: the common case, which recordMany commits with multi-row statements.
// A receipt with a one-time token (Mailgun), or recovered by a backfill
// (its origin is kept), takes singleTx. So does one with an order_by key:
// its jobs are created in order (keyedJobTx).
func (rc *recordOp) single() bool {
	return len(rc.r.Events) == 1 && rc.r.Events[0].Body == nil && rc.r.Token == nil && !rc.r.Backfill && len(rc.r.Events[0].OrderKeys) == 0 &&
		!rc.r.Events[0].Derived &&
		rc.r.Events[0].Seq == nil && !hookwarden.Late(&rc.r.Events[0], false, rc.since) // kept by claimTx (sequence.go)
}

// manyLog bounds the multi-row statements: one of each size 1, 2, 4, ...,
// 1<<(manyLog-1) rows, prepared once; k rows go in chunks of descending
// powers of two, so a batch of any size takes a few statements per table.
const manyLog = 9

// manyStmts are the multi-row forms of the claim, receipt and job inserts.
type manyStmts struct {
	claim, claimNew, receipt, job, bodyKey [manyLog]*sql.Stmt
	batchClaim, batchClaimNew, link        [manyLog]*sql.Stmt // batchTx's
	maxReceipt, maxJob                     *sql.Stmt
}

func (m *manyStmts) prepare(ctx context.Context, db *sql.DB) error {
	rows := func(row string, n int) string {
		return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
	}
	var err error
	if m.maxReceipt, err = db.PrepareContext(ctx, `SELECT coalesce(max(id), 0) FROM receipts`); err != nil {
		return fmt.Errorf("prepare statement: %w", err)
	}
	if m.maxJob, err = db.PrepareContext(ctx, `SELECT coalesce(max(id), 0) FROM jobs`); err != nil {
		return fmt.Errorf("prepare statement: %w", err)
	}
	for l := range manyLog {
		n := 1 << l
		for _, p := range []struct {
			dst **sql.Stmt
			sql string
		}{
			// The ids of one statement are distinct (recordMany sends a
			// repeated id once); the claim is as in writeStmts.claim.
			{&m.claim[l], `INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256)
				SELECT v.column1, v.column2, v.column3, v.column4, v.column5 FROM (VALUES ` + rows("(?, ?, ?, ?, ?)", n) + `) AS v
				WHERE NOT EXISTS (SELECT 1 FROM claims c WHERE c.source = v.column1 AND c.event_id = v.column2)
				RETURNING id, source, event_id`},
			// Ids the claims filter never saw (filter.go).
			{&m.claimNew[l], `INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256) VALUES ` +
				rows("(?, ?, ?, ?, ?)", n) + ` RETURNING id, source, event_id`},
			// Explicit ids (max + 1, + 2, ...): each request learns its row
			// without RETURNING, whose row order SQLite does not promise.
			{&m.receipt[l], `INSERT INTO receipts (id, source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256) VALUES ` +
				rows("(?, ?, ?, ?, ?, ?, ?, ?, ?)", n)},
			{&m.job[l], `INSERT INTO jobs (id, event_ref, destination, state, attempts, next_at, leased_until, created_at) VALUES ` +
				rows("(?, ?, ?, 'pending', ?, ?, ?, ?)", n)},
			// As for the claims: rows go in order, the first copy of a body wins.
			{&m.bodyKey[l], `INSERT INTO body_keys (source, body_sha256, event_id, claimed_at) VALUES ` +
				rows("(?, ?, ?, ?)", n) + ` ON CONFLICT (source, body_sha256) DO NOTHING RETURNING source, body_sha256, event_id`},
			// A batch's events (batchTx): one source, distinct ids, each
			// with its own bytes.
			{&m.batchClaim[l], `INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256, body, derived)
				SELECT v.column1, v.column2, v.column3, v.column4, v.column5, v.column6, v.column7 FROM (VALUES ` + rows("(?, ?, ?, ?, ?, ?, ?)", n) + `) AS v
				WHERE NOT EXISTS (SELECT 1 FROM claims c WHERE c.source = v.column1 AND c.event_id = v.column2)
				RETURNING id, event_id`},
			{&m.batchClaimNew[l], `INSERT INTO events (source, event_id, event_type, claimed_at, body_sha256, body, derived) VALUES ` +
				rows("(?, ?, ?, ?, ?, ?, ?)", n) + ` RETURNING id, event_id`},
			{&m.link[l], `INSERT INTO receipt_events (event_ref, receipt_id, kind) VALUES ` + rows("(?, ?, ?)", n)},
		} {
			if *p.dst, err = db.PrepareContext(ctx, p.sql); err != nil {
				return fmt.Errorf("prepare statement: %w", err)
			}
		}
	}
	return nil
}

func (m *manyStmts) close() {
	for l := range manyLog {
		for _, st := range []*sql.Stmt{m.claim[l], m.claimNew[l], m.receipt[l], m.job[l], m.bodyKey[l],
			m.batchClaim[l], m.batchClaimNew[l], m.link[l]} {
			if st != nil {
				st.Close()
			}
		}
	}
	for _, st := range []*sql.Stmt{m.maxReceipt, m.maxJob} {
		if st != nil {
			st.Close()
		}
	}
}

// chunks calls f for consecutive chunks of n items, each 1<<l long, largest
// first, with l < manyLog.
func chunks(n int, f func(lo, size, l int) error) error {
	for lo := 0; lo < n; {
		l := min(bits.Len(uint(n-lo))-1, manyLog-1)
		if err := f(lo, 1<<l, l); err != nil {
			return err
		}
		lo += 1 << l
	}
	return nil
}

// recordMany commits the single-event receipts of one writer batch with a
// few multi-row statements per table instead of three statements per
// request: claims first (RETURNING says which are new), a look-up per
// duplicate, then the receipts, then the jobs of the new events. The
// outcome of each request is what singleTx would give it had the requests
// run one after the other in batch order.
func (s *Store) recordMany(ctx context.Context, tx *sql.Tx, recs []*recordOp) error {
	// Replayed bodies are held first, one by one (attacks are rare; the
	// key insert of every other receipt is one small statement).
	recs, err := s.bodyReplaysMany(ctx, tx, recs)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	type key struct{ source, id string }
	claimed := make(map[key]int64, len(recs))
	// A batch may carry the same id twice: the first request claims it,
	// the others find its claim.
	seen := make(map[key]bool, len(recs))
	firsts := make([]*recordOp, 0, len(recs))
	var fresh []*recordOp // the claims filter never saw their ids
	// Claims the log's index holds (checked against their events rows).
	type found struct {
		ref int64
		sum []byte
	}
	var inLog map[key]found
	// From the catch-up on, the claims filter knows both levels.
	if err := s.catchUp(ctx, tx); err != nil {
		return err
	}
	for _, rc := range recs {
		if k := (key{rc.r.Source, rc.r.Events[0].ID}); !seen[k] {
			seen[k] = true
			if s.claims.absent(k.source, k.id) {
				fresh = append(fresh, rc)
				continue
			}
			ref, sum, ok, err := s.findClaimTx(ctx, tx, k.source, k.id)
			if err != nil {
				return err
			}
			if ok {
				if inLog == nil {
					inLog = make(map[key]found)
				}
				inLog[k] = found{ref, sum}
				continue
			}
			firsts = append(firsts, rc)
		}
	}
	args := make([]any, 0, 9<<(manyLog-1))
	claimAll := func(recs []*recordOp, stmts *[manyLog]*sql.Stmt) error {
		return chunks(len(recs), func(lo, size, l int) error {
			args = args[:0]
			for _, rc := range recs[lo : lo+size] {
				ev := &rc.r.Events[0]
				args = append(args, rc.r.Source, ev.ID, ev.Type, rc.at, ev.BodySHA256[:])
			}
			rows, err := tx.StmtContext(ctx, stmts[l]).QueryContext(ctx, args...)
			if err != nil {
				return fmt.Errorf("claim events: %w", err)
			}
			defer rows.Close()
			for rows.Next() {
				var id int64
				var k key
				if err := rows.Scan(&id, &k.source, &k.id); err != nil {
					return fmt.Errorf("claim events: %w", err)
				}
				claimed[k] = id
				s.claims.claimed(k.source, k.id, id)
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("claim events: %w", err)
			}
			return nil
		})
	}
	if err := claimAll(fresh, &s.stmts.many.claimNew); err != nil {
		return err
	}
	if err := claimAll(firsts, &s.stmts.many.claim); err != nil {
		return err
	}
	var lookup *sql.Stmt
	for _, rc := range recs {
		ev := &rc.r.Events[0]
		k := key{rc.r.Source, ev.ID}
		*rc.res = hookwarden.RecordResult{Events: make([]hookwarden.EventResult, 1)}
		if id, ok := claimed[k]; ok {
			delete(claimed, k) // the first request with the id claimed it
			rc.ref, rc.isNew, rc.divergent = id, true, false
			continue
		}
		var sum []byte
		if f, ok := inLog[k]; ok {
			rc.ref, sum = f.ref, f.sum
		} else if ref, fsum, ok, err := s.findClaimTx(ctx, tx, k.source, k.id); err != nil {
			return err
		} else if ok { // claimed by an earlier request of this batch
			rc.ref, sum = ref, fsum
		} else {
			if lookup == nil {
				lookup = tx.StmtContext(ctx, s.stmts.lookup)
			}
			if err := lookup.QueryRowContext(ctx, k.source, k.id).Scan(&rc.ref, &sum); err != nil {
				return fmt.Errorf("look up claimed event: %w", err)
			}
		}
		rc.isNew = false
		rc.divergent, rc.unknown = compareClaim(sum, ev)
		if rc.divergent {
			if rc.divergent, rc.unknown, err = s.backfillCopy(ctx, tx, rc.ref, false); err != nil {
				return err
			}
		}
	}

	var base int64
	if err := tx.StmtContext(ctx, s.stmts.many.maxReceipt).QueryRowContext(ctx).Scan(&base); err != nil {
		return fmt.Errorf("insert receipts: %w", err)
	}
	err = chunks(len(recs), func(lo, size, l int) error {
		args = args[:0]
		for i, rc := range recs[lo : lo+size] {
			kind, body := receiptKind(rc.isNew, rc.divergent, rc.unknown, rc.r.Body)
			rc.res.ReceiptID = base + int64(lo+i) + 1
			args = append(args, rc.res.ReceiptID, rc.r.Source, rc.ref, kind, rc.at, rc.r.RemoteAddr,
				rc.headers, body, receiptHash(rc.r, kind, body))
		}
		if _, err := tx.StmtContext(ctx, s.stmts.many.receipt[l]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("insert receipts: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}

	type jobRow struct {
		rc     *recordOp
		dest   string
		until  string // the lease's end when the job goes to a Direct slot
		handed int    // its place in s.handed; -1: not handed over
	}
	var jobs []jobRow
	now := s.now()
	for _, rc := range recs {
		ev := &rc.r.Events[0]
		if !rc.isNew {
			rc.res.Outcome = hookwarden.Duplicate
			rc.res.Events[0] = hookwarden.EventResult{Outcome: hookwarden.Duplicate, Divergent: rc.divergent}
			continue
		}
		for _, d := range ev.Destinations {
			slot, until, direct, err := s.reserve(ctx, tx, d, now)
			if err != nil {
				return err
			}
			j := jobRow{rc, d, until, -1}
			if direct {
				// Listed now so that a failure below releases the slot; the
				// job is filled in once its id is known.
				j.handed = len(s.handed)
				s.handed = append(s.handed, handed{slot: slot})
			}
			jobs = append(jobs, j)
		}
		rc.res.Outcome = hookwarden.Accepted
		rc.res.Events[0] = hookwarden.EventResult{Outcome: hookwarden.Accepted, Jobs: len(ev.Destinations)}
	}
	if len(jobs) == 0 {
		return nil
	}
	// Explicit ids, as for the receipts: a handed job needs its id.
	if err := tx.StmtContext(ctx, s.stmts.many.maxJob).QueryRowContext(ctx).Scan(&base); err != nil {
		return fmt.Errorf("insert jobs: %w", err)
	}
	if err := chunks(len(jobs), func(lo, size, l int) error {
		args = args[:0]
		for i, j := range jobs[lo : lo+size] {
			attempts, next, leased := newJob(j.rc.at, j.until, j.handed >= 0)
			args = append(args, base+int64(lo+i)+1, j.rc.ref, j.dest, attempts, next, leased, j.rc.at)
		}
		if _, err := tx.StmtContext(ctx, s.stmts.many.job[l]).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	for i, j := range jobs {
		if j.handed >= 0 {
			s.handed[j.handed].job = directJob(j.rc.r, &j.rc.r.Events[0], base+int64(i)+1, j.dest)
		}
	}
	return nil
}

// noHash is stored as a receipt's body_sha256 when it is its event's hash.
var noHash = []byte{}

// receiptHash is what a receipt stores as body_sha256: nothing when the
// bytes are the event's own (the accepted copy and byte-identical
// duplicates: events.body_sha256 has the hash, 32 bytes a receipt need not
// repeat), the hash of what arrived otherwise.
func receiptHash(r *hookwarden.Receipt, kind string, body []byte) []byte {
	if kind == "accepted" || (kind == "duplicate" && body == nil) {
		return noHash
	}
	return r.BodySHA256[:]
}

// encodeHeaders renders headers in HTTP wire format, sorted by name, one
// "Name: value" per line: readable in the sqlite3 shell, parseable back.
func encodeHeaders(h http.Header) string {
	keys := make([]string, 0, len(h))
	n := 0
	for k, vs := range h {
		keys = append(keys, k)
		for _, v := range vs {
			n += len(k) + len(v) + 3
		}
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.Grow(n)
	for _, k := range keys {
		for _, v := range h[k] {
			b.WriteString(k)
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// decodeHeaders parses what encodeHeaders wrote.
func decodeHeaders(s string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			h[k] = append(h[k], v)
		}
	}
	return h
}
