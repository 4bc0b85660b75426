package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
)

// ForceAfter is how many times a job may be dead-lettered before a replay
// needs Force: an event the app refused three times is likely poison, and
// replaying it again by habit only adds noise.
const ForceAfter = 3

// DefaultReplayBatch is how many jobs one replay transaction resets. Small
// enough that the writer is never held for long: ingest keeps its latency.
const DefaultReplayBatch = 500

// ReplaySelector says which jobs to replay: the jobs of the named events, or
// (Dead) every dead letter matching the filters, or the jobs by id.
type ReplaySelector struct {
	Source   string
	EventIDs []string // with Source: these events' jobs (dead, delivered, or pending and idle)
	Dead     bool     // every dead letter matching Source, Destination and Since
	JobIDs   []int64  // these jobs (the dashboard's replay button)
	// Destination keeps only jobs of that destination ("source/name").
	Destination string
	// Since keeps only dead letters that died at or after it (Dead only).
	Since time.Time
}

// ReplayOptions tune a replay.
type ReplayOptions struct {
	// Force replays jobs dead-lettered ForceAfter times or more.
	Force bool
	// BatchSize is the number of jobs per write transaction (default DefaultReplayBatch).
	BatchSize int
	// Pause is waited between batches so that a huge replay leaves room to
	// ingest; default 5ms.
	Pause time.Duration
	// Progress, if set, is called after each batch with the jobs handled so
	// far and the total.
	Progress func(done, total int)
	// Audit, if set, is the operator action to record (Origin, Actor; Action
	// and Args are filled in when empty). It is written in the transaction
	// of the first batch that resets a job, linked to the events replayed,
	// and its result kept current by every later batch. A replay that
	// resets nothing changes nothing and writes no entry.
	Audit *hookwarden.AuditEntry
}

// replayArgs is the audit log's record of a replay's arguments.
type replayArgs struct {
	Source      string   `json:"source,omitempty"`
	EventIDs    []string `json:"event_ids,omitempty"`
	Dead        bool     `json:"dead,omitempty"`
	JobIDs      []int64  `json:"job_ids,omitempty"`
	Destination string   `json:"destination,omitempty"`
	Since       string   `json:"since,omitempty"`
	Force       bool     `json:"force,omitempty"`
}

// replayAudit is the audit log's record of what a replay did so far.
type replayAudit struct {
	Selected int `json:"selected"`
	Replayed int `json:"replayed"`
	Skipped  int `json:"skipped"`
}

// Skip reasons of a replay.
const (
	SkipNeedsForce = "needs_force"    // dead-lettered ForceAfter times or more
	SkipPruned     = "payload_pruned" // retention removed the body: nothing to deliver
	SkipInFlight   = "in_flight"      // an attempt holds the job's lease
	SkipNotFound   = "not_found"      // no such event or job
	SkipNoJobs     = "no_jobs"        // the event has no job (of that destination): nothing to deliver
)

// ReplaySkip is a job (or event) a replay left alone, and why.
type ReplaySkip struct {
	JobID       int64     `json:"job_id,omitempty"`
	Source      string    `json:"source"`
	EventID     string    `json:"event_id"`
	Destination string    `json:"destination,omitempty"`
	Reason      string    `json:"reason"`
	DeadCount   int       `json:"dead_count,omitempty"`
	PrunedAt    time.Time `json:"pruned_at,omitzero"`
}

func (k ReplaySkip) String() string {
	what := k.Source + "/" + k.EventID
	if k.Destination != "" {
		what += " -> " + k.Destination
	}
	switch k.Reason {
	case SkipNeedsForce:
		return fmt.Sprintf("%s: dead-lettered %d times; the app keeps refusing it: replay with --force if it is fixed", what, k.DeadCount)
	case SkipPruned:
		at := ""
		if !k.PrunedAt.IsZero() {
			at = " on " + k.PrunedAt.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s: its payload was pruned%s (retention.payloads); there is nothing left to deliver", what, at)
	case SkipInFlight:
		return what + ": an attempt is in flight; it finishes (or is retried) on its own"
	case SkipNotFound:
		if k.JobID != 0 && k.EventID == "" {
			return fmt.Sprintf("job %d: no such job", k.JobID)
		}
		return what + ": no such event"
	case SkipNoJobs:
		return what + ": it has no delivery job to replay (no destination matched it)"
	}
	return what + ": " + k.Reason
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	Selected int          `json:"selected"` // jobs the selector matched
	Replayed int          `json:"replayed"` // reset to pending, due now
	Skipped  []ReplaySkip `json:"skipped,omitempty"`
	// Destinations lists the destinations of replayed jobs (to wake workers).
	Destinations []string `json:"destinations,omitempty"`
	// AuditID is the audit log entry of the replay (0: none written).
	AuditID int64 `json:"audit_id,omitempty"`
}

// Replay resets the selected jobs to pending, due now, with attempts = 0 so
// each gets its destination's full max_attempts again. The event and its
// Idempotency-Key are unchanged; dead_count is kept. Jobs are reset in
// batches of BatchSize, each in its own short write transaction, and every
// rule is checked again inside that transaction:
//   - a job dead-lettered ForceAfter times or more needs Force;
//   - an event whose payload was pruned cannot be replayed;
//   - a pending job whose attempt is in flight (an unexpired lease) is left
//     to finish; an expired lease (its process died) is due anyway and is reset.
//
// A running serve picks the jobs up at its next poll (about a second); in the
// same process, wake the workers for Result.Destinations.
func (s *Store) Replay(ctx context.Context, sel ReplaySelector, opt ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	ids, err := s.selectReplay(ctx, sel, &res)
	if err != nil {
		return res, err
	}
	res.Selected = len(ids)
	if opt.BatchSize <= 0 {
		opt.BatchSize = DefaultReplayBatch
	}
	if opt.Pause <= 0 {
		opt.Pause = 5 * time.Millisecond
	}
	var audit *hookwarden.AuditEntry
	if opt.Audit != nil {
		e := *opt.Audit
		if e.Action == "" {
			e.Action = "replay"
		}
		if e.Args == nil {
			a := replayArgs{Source: sel.Source, EventIDs: sel.EventIDs, Dead: sel.Dead, JobIDs: sel.JobIDs,
				Destination: sel.Destination, Force: opt.Force}
			if !sel.Since.IsZero() {
				a.Since = fmtTime(sel.Since)
			}
			e.Args, _ = json.Marshal(a)
		}
		if err := checkAudit(&e); err != nil {
			return res, err
		}
		audit = &e
	}
	dests := map[string]bool{}
	for done := 0; done < len(ids); {
		if done > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(opt.Pause):
			}
		}
		batch := ids[done:min(done+opt.BatchSize, len(ids))]
		n, skipped, touched, err := s.replayBatch(ctx, batch, opt.Force, audit, res)
		if err != nil {
			return res, fmt.Errorf("replay: %w", err)
		}
		res.Replayed += n
		res.Skipped = append(res.Skipped, skipped...)
		if audit != nil {
			res.AuditID = audit.ID
		}
		for _, d := range touched {
			if !dests[d] {
				dests[d] = true
				res.Destinations = append(res.Destinations, d)
			}
		}
		done += len(batch)
		if opt.Progress != nil {
			opt.Progress(done, len(ids))
		}
	}
	return res, nil
}

// selectReplay lists the job ids to replay, in id order, from the read pool.
func (s *Store) selectReplay(ctx context.Context, sel ReplaySelector, res *ReplayResult) ([]int64, error) {
	var ids []int64
	add := func(q string, args ...any) error {
		return eachRow(ctx, s.rdb, q, func(rows *sql.Rows) error {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			return nil
		}, args...)
	}
	destWhere, destArgs := "", []any(nil)
	if sel.Destination != "" {
		destWhere, destArgs = " AND j.destination = ?", []any{sel.Destination}
	}
	switch {
	case sel.Dead:
		if len(sel.EventIDs) > 0 || len(sel.JobIDs) > 0 {
			return nil, errors.New("replay: dead letters or named events, not both")
		}
		where, args := deadWhere(DeadFilter{Source: sel.Source, Destination: sel.Destination, Since: sel.Since})
		if err := add(`SELECT j.id FROM jobs j JOIN events e ON e.id = j.event_ref WHERE `+
			strings.Join(where, " AND ")+` ORDER BY j.id`, args...); err != nil {
			return nil, fmt.Errorf("replay: select dead letters: %w", err)
		}
	case len(sel.JobIDs) > 0:
		b, _ := json.Marshal(sel.JobIDs)
		if err := add(`SELECT j.id FROM jobs j WHERE j.id IN (SELECT value FROM json_each(?))`+destWhere+` ORDER BY j.id`,
			append([]any{string(b)}, destArgs...)...); err != nil {
			return nil, fmt.Errorf("replay: select jobs: %w", err)
		}
		if len(ids) < len(sel.JobIDs) {
			found := map[int64]bool{}
			for _, id := range ids {
				found[id] = true
			}
			for _, id := range sel.JobIDs {
				if !found[id] {
					res.Skipped = append(res.Skipped, ReplaySkip{JobID: id, Reason: SkipNotFound})
				}
			}
		}
	case len(sel.EventIDs) > 0:
		if sel.Source == "" {
			return nil, errors.New("replay: events need their source")
		}
		for _, id := range sel.EventIDs {
			var ref int64
			var pruned sql.NullString
			err := s.rdb.QueryRowContext(ctx, `SELECT id, pruned_at FROM events WHERE source = ? AND event_id = ?`,
				sel.Source, id).Scan(&ref, &pruned)
			if errors.Is(err, sql.ErrNoRows) {
				res.Skipped = append(res.Skipped, ReplaySkip{Source: sel.Source, EventID: id, Reason: SkipNotFound})
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("replay: look up %s/%s: %w", sel.Source, id, err)
			}
			if pruned.Valid {
				// Folded by retention.payloads: no payload, and no jobs left.
				at, err := parseNullTime(pruned)
				if err != nil {
					return nil, fmt.Errorf("replay: look up %s/%s: %w", sel.Source, id, err)
				}
				res.Skipped = append(res.Skipped, ReplaySkip{Source: sel.Source, EventID: id, Reason: SkipPruned, PrunedAt: at})
				continue
			}
			before := len(ids)
			if err := add(`SELECT j.id FROM jobs j WHERE j.event_ref = ?`+destWhere+` ORDER BY j.id`,
				append([]any{ref}, destArgs...)...); err != nil {
				return nil, fmt.Errorf("replay: select jobs of %s/%s: %w", sel.Source, id, err)
			}
			if len(ids) == before {
				res.Skipped = append(res.Skipped, ReplaySkip{Source: sel.Source, EventID: id, Destination: sel.Destination,
					Reason: SkipNoJobs})
			}
		}
	default:
		return nil, errors.New("replay: nothing selected")
	}
	return ids, nil
}

// replayBatch resets one batch of jobs inside one write transaction, with
// the audit entry of the replay (audit.ID is 0 until a batch wrote it); so
// far is the result before this batch.
func (s *Store) replayBatch(ctx context.Context, ids []int64, force bool, audit *hookwarden.AuditEntry, sofar ReplayResult) (n int, skipped []ReplaySkip, dests []string, err error) {
	b, _ := json.Marshal(ids)
	var auditID int64
	err = s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		// The op may run twice (batch isolation): start from scratch.
		n, skipped, dests, auditID = 0, skipped[:0], dests[:0], 0
		now := fmtTime(s.now())
		var reset []int64
		var events []hookwarden.EventKey
		err := eachRow(ctx, tx, `
SELECT j.id, j.state, j.dead_count, COALESCE(j.leased_until > ?2, 0), e.source, e.event_id, j.destination, `+payloadPruned+`,
	(SELECT max(pruned_at) FROM receipts WHERE event_ref = e.id AND kind = 'accepted')
FROM jobs j JOIN events e ON e.id = j.event_ref
WHERE j.id IN (SELECT value FROM json_each(?1)) ORDER BY j.id`, func(rows *sql.Rows) error {
			var k ReplaySkip
			var state string
			var leased, pruned bool
			var prunedAt sql.NullString
			if err := rows.Scan(&k.JobID, &state, &k.DeadCount, &leased, &k.Source, &k.EventID, &k.Destination,
				&pruned, &prunedAt); err != nil {
				return err
			}
			switch {
			case state == string(hookwarden.JobPending) && leased:
				k.Reason = SkipInFlight
			case pruned:
				k.Reason = SkipPruned
				k.PrunedAt, _ = parseNullTime(prunedAt)
			case k.DeadCount >= ForceAfter && !force:
				k.Reason = SkipNeedsForce
			default:
				reset = append(reset, k.JobID)
				dests = append(dests, k.Destination)
				events = append(events, hookwarden.EventKey{Source: k.Source, EventID: k.EventID})
				return nil
			}
			skipped = append(skipped, k)
			return nil
		}, string(b), now)
		if err != nil {
			return fmt.Errorf("read jobs: %w", err)
		}
		if len(reset) == 0 {
			return nil
		}
		rb, _ := json.Marshal(reset)
		r, err := tx.ExecContext(ctx, `
UPDATE jobs SET state = 'pending', attempts = 0, next_at = ?1, leased_until = NULL, finished_at = NULL, replayed_at = ?1
WHERE id IN (SELECT value FROM json_each(?2))`, now, string(rb))
		if err != nil {
			return fmt.Errorf("reset jobs: %w", err)
		}
		m, err := r.RowsAffected()
		n = int(m)
		if err != nil || audit == nil || n == 0 {
			return err
		}
		// The audit entry commits with the jobs it reset.
		result := replayAudit{Selected: sofar.Selected, Replayed: sofar.Replayed + n, Skipped: len(sofar.Skipped) + len(skipped)}
		if audit.ID == 0 {
			e := *audit
			e.Events = events
			e.Result, _ = json.Marshal(result)
			auditID, err = s.auditTx(ctx, tx, &e)
			return err
		}
		if err := auditLinkTx(ctx, tx, audit.ID, events); err != nil {
			return err
		}
		return auditResultTx(ctx, tx, audit.ID, result)
	})
	if err == nil && auditID != 0 {
		audit.ID = auditID
	}
	return n, skipped, dests, err
}
