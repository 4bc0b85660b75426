package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hookwarden/hookwarden"
)

// replayAudit is the audit log's record of what a replay did so far.
type replayAudit = hookwarden.ReplayAuditResult

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
func (s *Store) Replay(ctx context.Context, sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) (hookwarden.ReplayResult, error) {
	var res hookwarden.ReplayResult
	ids, err := s.selectReplay(ctx, sel, &res)
	if err != nil {
		return res, err
	}
	return hookwarden.ReplayInBatches(ctx, ids, sel, opt, res, s.replayBatch)
}

// selectReplay lists the job ids to replay, in id order, from the read pool.
func (s *Store) selectReplay(ctx context.Context, sel hookwarden.ReplaySelector, res *hookwarden.ReplayResult) ([]int64, error) {
	var ids []int64
	add := func(q string, args ...any) error {
		got, err := selectIDs(ctx, s.rdb, q, args...)
		ids = append(ids, got...)
		return err
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
		where, args := deadWhere(hookwarden.DeadFilter{Source: sel.Source, Destination: sel.Destination, Since: sel.Since})
		if err := add(`SELECT j.id FROM jobs j JOIN events e ON e.id = j.event_ref WHERE `+
			strings.Join(where, " AND ")+` ORDER BY j.id`, args...); err != nil {
			return nil, fmt.Errorf("replay: select dead letters: %w", err)
		}
	case len(sel.JobIDs) > 0:
		if err := add(`SELECT j.id FROM jobs j WHERE j.id IN (SELECT value FROM json_each(?))`+destWhere+` ORDER BY j.id`,
			append([]any{idSet(sel.JobIDs)}, destArgs...)...); err != nil {
			return nil, fmt.Errorf("replay: select jobs: %w", err)
		}
		if len(ids) < len(sel.JobIDs) {
			found := map[int64]bool{}
			for _, id := range ids {
				found[id] = true
			}
			for _, id := range sel.JobIDs {
				if !found[id] {
					res.Skipped = append(res.Skipped, hookwarden.ReplaySkip{JobID: id, Reason: hookwarden.SkipNotFound})
				}
			}
		}
	case len(sel.EventIDs) > 0:
		if sel.Source == "" {
			return nil, errors.New("replay: events need their source")
		}
		for _, id := range sel.EventIDs {
			var pruned sql.NullString
			ref, ok, err := s.findClaim(ctx, sel.Source, id)
			if err == nil && ok {
				err = s.rdb.QueryRowContext(ctx, `SELECT id, pruned_at FROM events WHERE id = ?`, ref).Scan(&ref, &pruned)
			} else if err == nil {
				err = sql.ErrNoRows
			}
			if errors.Is(err, sql.ErrNoRows) {
				res.Skipped = append(res.Skipped, hookwarden.ReplaySkip{Source: sel.Source, EventID: id, Reason: hookwarden.SkipNotFound})
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
				res.Skipped = append(res.Skipped, hookwarden.ReplaySkip{Source: sel.Source, EventID: id, Reason: hookwarden.SkipPruned, PrunedAt: at})
				continue
			}
			before := len(ids)
			if err := add(`SELECT j.id FROM jobs j WHERE j.event_ref = ?`+destWhere+` ORDER BY j.id`,
				append([]any{ref}, destArgs...)...); err != nil {
				return nil, fmt.Errorf("replay: select jobs of %s/%s: %w", sel.Source, id, err)
			}
			if len(ids) == before {
				res.Skipped = append(res.Skipped, hookwarden.ReplaySkip{Source: sel.Source, EventID: id, Destination: sel.Destination,
					Reason: hookwarden.SkipNoJobs})
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
func (s *Store) replayBatch(ctx context.Context, ids []int64, force bool, audit *hookwarden.AuditEntry, sofar hookwarden.ReplayResult) (n int, skipped []hookwarden.ReplaySkip, dests []string, err error) {
	set := idSet(ids)
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
			var k hookwarden.ReplaySkip
			var state string
			var leased, pruned bool
			var prunedAt sql.NullString
			if err := rows.Scan(&k.JobID, &state, &k.DeadCount, &leased, &k.Source, &k.EventID, &k.Destination,
				&pruned, &prunedAt); err != nil {
				return err
			}
			switch {
			case state == string(hookwarden.JobPending) && leased:
				k.Reason = hookwarden.SkipInFlight
			case pruned:
				k.Reason = hookwarden.SkipPruned
				k.PrunedAt, _ = parseNullTime(prunedAt)
			case k.DeadCount >= hookwarden.ForceAfter && !force:
				k.Reason = hookwarden.SkipNeedsForce
			default:
				reset = append(reset, k.JobID)
				dests = append(dests, k.Destination)
				events = append(events, hookwarden.EventKey{Source: k.Source, EventID: k.EventID})
				return nil
			}
			skipped = append(skipped, k)
			return nil
		}, set, now)
		if err != nil {
			return fmt.Errorf("read jobs: %w", err)
		}
		if len(reset) == 0 {
			return nil
		}
		r, err := tx.ExecContext(ctx, `
UPDATE jobs SET state = 'pending', attempts = 0, next_at = ?1, leased_until = NULL, finished_at = NULL, replayed_at = ?1
WHERE id IN (SELECT value FROM json_each(?2))`, now, idSet(reset))
		if err != nil {
			return fmt.Errorf("reset jobs: %w", err)
		}
		m, err := r.RowsAffected()
		n = int(m)
		if err == nil {
			err = s.orderReplayedTx(ctx, tx, reset) // one head per order_by key
		}
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
