package pgstore

// Replay, with sqlitestore's semantics, on several instances at once:
// each batch locks its jobs (FOR UPDATE, in id order) before it checks the
// rules, so that a lease, a finish, another instance's replay or a prune
// of the same jobs commits either before the check or after the reset,
// never between.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// replayPruned is true when retention removed the bytes event e would be
// delivered with: it was folded into its claim, or its first receipt's
// body, or its batch's, was cleared (a store copied from an SQLite file of
// schema 2 to 4).
const replayPruned = `(e.pruned_at IS NOT NULL
	OR EXISTS (SELECT 1 FROM receipts pr WHERE pr.event_ref = e.id AND pr.kind = 'accepted' AND pr.pruned_at IS NOT NULL)
	OR EXISTS (SELECT 1 FROM receipt_events pe JOIN receipts pr ON pr.id = pe.receipt_id
		WHERE pe.event_ref = e.id AND pe.kind = 'accepted' AND pr.pruned_at IS NOT NULL))`

// Replay resets the selected jobs to pending, due now, with attempts = 0
// so each gets its destination's full max_attempts again. The event and
// its Idempotency-Key are unchanged; dead_count is kept. Jobs are reset in
// batches of BatchSize, each in its own short transaction that locks its
// jobs and checks every rule again:
//   - a job dead-lettered ForceAfter times or more needs Force;
//   - an event whose payload was pruned cannot be replayed;
//   - a pending job whose attempt is in flight (an unexpired lease) is left
//     to finish; an expired lease (its process died) is due anyway and is reset.
//
// Each batch announces its destinations at COMMIT (notify.go), so the
// workers of every listening instance lease them at once; others pick the
// jobs up at their next poll (about a
// second); in the same process, wake them for Result.Destinations.
func (s *Store) Replay(ctx context.Context, sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) (hookwarden.ReplayResult, error) {
	var res hookwarden.ReplayResult
	ids, err := s.selectReplay(ctx, sel, &res)
	if err != nil {
		return res, err
	}
	return hookwarden.ReplayInBatches(ctx, ids, sel, opt, res, s.replayBatch)
}

// selectReplay lists the job ids to replay, in id order (by event for
// named events), and notes the events and jobs that are not there. It
// locks nothing: each batch checks its jobs again.
func (s *Store) selectReplay(ctx context.Context, sel hookwarden.ReplaySelector, res *hookwarden.ReplayResult) ([]int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var dest any
	if sel.Destination != "" {
		dest = sel.Destination
	}
	switch {
	case sel.Dead:
		if len(sel.EventIDs) > 0 || len(sel.JobIDs) > 0 {
			return nil, errors.New("replay: dead letters or named events, not both")
		}
		var source, since any
		if sel.Source != "" {
			source = sel.Source
		}
		if !sel.Since.IsZero() {
			since = sel.Since.UTC()
		}
		// The jobs_dead partial index holds only dead letters.
		ids, err := queryIDs(ctx, s.pool, `SELECT j.id FROM jobs j JOIN events e ON e.id = j.event_ref
			WHERE j.state = 'dead' AND ($1::text IS NULL OR j.destination = $1) AND ($2::text IS NULL OR e.source = $2)
				AND ($3::timestamptz IS NULL OR j.finished_at >= $3)
			ORDER BY j.id`, dest, source, since)
		if err != nil {
			return nil, fmt.Errorf("replay: select dead letters: %w", err)
		}
		return ids, nil
	case len(sel.JobIDs) > 0:
		ids, err := queryIDs(ctx, s.pool, `SELECT id FROM jobs WHERE id = ANY($1) AND ($2::text IS NULL OR destination = $2) ORDER BY id`,
			sel.JobIDs, dest)
		if err != nil {
			return nil, fmt.Errorf("replay: select jobs: %w", err)
		}
		if len(ids) < len(sel.JobIDs) {
			found := make(map[int64]bool, len(ids))
			for _, id := range ids {
				found[id] = true
			}
			for _, id := range sel.JobIDs {
				if !found[id] {
					res.Skipped = append(res.Skipped, hookwarden.ReplaySkip{JobID: id, Reason: hookwarden.SkipNotFound})
				}
			}
		}
		return ids, nil
	case len(sel.EventIDs) > 0:
		if sel.Source == "" {
			return nil, errors.New("replay: events need their source")
		}
		return s.selectReplayEvents(ctx, sel, dest, res)
	}
	return nil, errors.New("replay: nothing selected")
}

// selectReplayEvents lists the jobs of the named events in one statement,
// event by event in the order given.
func (s *Store) selectReplayEvents(ctx context.Context, sel hookwarden.ReplaySelector, dest any, res *hookwarden.ReplayResult) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `
SELECT k.id, e.id IS NOT NULL, e.pruned_at,
	COALESCE((SELECT array_agg(j.id ORDER BY j.id) FROM jobs j WHERE j.event_ref = e.id AND ($3::text IS NULL OR j.destination = $3)), '{}')
FROM unnest($2::text[]) WITH ORDINALITY AS k (id, n)
LEFT JOIN events e ON e.source = $1 AND e.event_id = k.id
ORDER BY k.n`, sel.Source, sel.EventIDs, dest)
	if err != nil {
		return nil, fmt.Errorf("replay: look up events: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id string
		var found bool
		var pruned *time.Time
		var jobs []int64
		if err := rows.Scan(&id, &found, &pruned, &jobs); err != nil {
			return nil, fmt.Errorf("replay: look up events: %w", err)
		}
		k := hookwarden.ReplaySkip{Source: sel.Source, EventID: id}
		switch {
		case !found:
			k.Reason = hookwarden.SkipNotFound
		case pruned != nil:
			// Folded by retention.payloads: no payload, and no jobs left.
			k.Reason, k.PrunedAt = hookwarden.SkipPruned, pruned.UTC()
		case len(jobs) == 0:
			k.Destination, k.Reason = sel.Destination, hookwarden.SkipNoJobs
		default:
			ids = append(ids, jobs...)
			continue
		}
		res.Skipped = append(res.Skipped, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("replay: look up events: %w", err)
	}
	return ids, nil
}

// replayBatch resets one batch of jobs in one transaction, with the audit
// entry of the replay (audit.ID is 0 until a batch wrote it); sofar is the
// result before this batch. The jobs are locked in id order before the
// rules are read, so concurrent replays of overlapping batches wait for
// each other instead of deadlocking, and a job deleted meanwhile (by a
// prune) is simply not there.
func (s *Store) replayBatch(ctx context.Context, ids []int64, force bool, audit *hookwarden.AuditEntry, sofar hookwarden.ReplayResult) (n int, skipped []hookwarden.ReplaySkip, dests []string, err error) {
	var auditID int64
	err = s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		// The transaction may run again (a deadlock): start from scratch.
		n, skipped, dests, auditID = 0, skipped[:0], dests[:0], 0
		var reset []int64
		var events []hookwarden.EventKey
		rows, err := tx.Query(ctx, `
SELECT j.id, j.state, j.dead_count, COALESCE(j.leased_until > COALESCE($2::timestamptz, now()), false),
	e.source, e.event_id, j.destination, `+replayPruned+`,
	COALESCE(e.pruned_at, (SELECT max(pruned_at) FROM receipts WHERE event_ref = e.id AND kind = 'accepted'))
FROM jobs j JOIN events e ON e.id = j.event_ref
WHERE j.id = ANY($1) ORDER BY j.id FOR UPDATE OF j`, ids, s.now())
		if err != nil {
			return fmt.Errorf("read jobs: %w", err)
		}
		for rows.Next() {
			var k hookwarden.ReplaySkip
			var state string
			var leased, pruned bool
			var prunedAt *time.Time
			if err := rows.Scan(&k.JobID, &state, &k.DeadCount, &leased, &k.Source, &k.EventID, &k.Destination,
				&pruned, &prunedAt); err != nil {
				rows.Close()
				return fmt.Errorf("read jobs: %w", err)
			}
			switch {
			case state == string(hookwarden.JobPending) && leased:
				k.Reason = hookwarden.SkipInFlight
			case pruned:
				k.Reason = hookwarden.SkipPruned
				if prunedAt != nil {
					k.PrunedAt = prunedAt.UTC()
				}
			case k.DeadCount >= hookwarden.ForceAfter && !force:
				k.Reason = hookwarden.SkipNeedsForce
			default:
				reset = append(reset, k.JobID)
				dests = append(dests, k.Destination)
				events = append(events, hookwarden.EventKey{Source: k.Source, EventID: k.EventID})
				continue
			}
			skipped = append(skipped, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read jobs: %w", err)
		}
		if len(reset) == 0 {
			return nil
		}
		if s.testReplayChecked != nil {
			s.testReplayChecked()
		}
		tag, err := tx.Exec(ctx, `UPDATE jobs SET state = 'pending', attempts = 0, next_at = COALESCE($1::timestamptz, now()),
			leased_until = NULL, finished_at = NULL, replayed_at = COALESCE($1::timestamptz, now())
			WHERE id = ANY($2)`, s.now(), reset)
		if err != nil {
			return fmt.Errorf("reset jobs: %w", err)
		}
		n = int(tag.RowsAffected())
		if err := orderReplayedTx(ctx, tx, reset); err != nil { // one head per order_by key
			return err
		}
		if err := s.announce(ctx, tx, dests); err != nil { // every instance's workers, at COMMIT
			return err
		}
		if audit == nil || n == 0 {
			return nil
		}
		// The audit entry commits with the jobs it reset.
		result := hookwarden.ReplayAuditResult{Selected: sofar.Selected, Replayed: sofar.Replayed + n,
			Skipped: len(sofar.Skipped) + len(skipped)}
		if audit.ID == 0 {
			e := *audit
			e.Events = events
			if e.Result, err = json.Marshal(result); err != nil {
				return err
			}
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
