package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Retention is the two tiers of SPEC section 3. A zero or negative duration
// disables its tier (keep forever).
type Retention struct {
	// Payloads: raw bodies of finished events. A receipt's body goes when it
	// was received, and every job of its event(s) was delivered, longer ago
	// than this. The claim stays, so a late duplicate is still a duplicate.
	Payloads time.Duration
	// Claims: the event ids, the dedup memory. An event goes with its
	// receipts, jobs and attempts when it was claimed, and every job was
	// delivered, longer ago than this.
	Claims time.Duration
}

// PruneOptions tune Prune.
type PruneOptions struct {
	Retention
	// DryRun counts what would go and changes nothing.
	DryRun bool
	// BatchSize is how many events or receipts one write transaction handles
	// (default 200): pruning never holds the writer for long.
	BatchSize int
	// Pause is waited between batches (default 5ms), so ingest always gets
	// the writer in between.
	Pause time.Duration
}

// PruneResult says what retention removed (or, with DryRun, would remove) and
// what it kept on purpose.
type PruneResult struct {
	DryRun        bool      `json:"dry_run"`
	PayloadCutoff time.Time `json:"payload_cutoff,omitzero"`
	ClaimCutoff   time.Time `json:"claim_cutoff,omitzero"`

	PayloadsPruned int   `json:"payloads_pruned"` // receipt bodies removed
	PayloadBytes   int64 `json:"payload_bytes"`
	EventsDeleted  int   `json:"events_deleted"` // claims removed
	// Receipts, jobs and attempts deleted with those claims (not in a dry run).
	ReceiptsDeleted int `json:"receipts_deleted"`
	JobsDeleted     int `json:"jobs_deleted"`
	AttemptsDeleted int `json:"attempts_deleted"`

	// Held past retention.payloads and never pruned automatically: events
	// with a dead letter, events still pending, quarantined requests. They
	// need a human (replay, or a deliberate delete in sqlite3).
	HeldDead        int `json:"held_dead"`
	HeldPending     int `json:"held_pending"`
	HeldQuarantined int `json:"held_quarantined"`
}

// unfinishedSince is true when an event has a job that is not delivered, or
// was delivered at or after the cutoff (?). Its payload and claim stay.
const unfinishedSince = `EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = %s AND (j.state != 'delivered' OR j.finished_at >= %s))`

// prunablePayload selects receipts whose body retention may remove; ?1 is the cutoff.
var prunablePayload = `r.body IS NOT NULL AND r.received_at < ?1 AND r.kind != 'quarantined' AND (
	(r.event_ref IS NOT NULL AND NOT ` + fmt.Sprintf(unfinishedSince, "r.event_ref", "?1") + `)
	OR (r.kind = 'batch' AND NOT EXISTS (SELECT 1 FROM receipt_events re JOIN jobs j ON j.event_ref = re.event_ref
		WHERE re.receipt_id = r.id AND (j.state != 'delivered' OR j.finished_at >= ?1))))`

// prunableClaim selects events retention may delete; ?1 is the cutoff.
var prunableClaim = `e.claimed_at < ?1 AND NOT ` + fmt.Sprintf(unfinishedSince, "e.id", "?1")

// Prune applies retention in small batches, claims first, then payloads.
// Dead letters, pending events and quarantined requests are never removed;
// the result counts them. Safe while serve runs (each batch is one short
// write through the writer) and safe to interrupt.
func (s *Store) Prune(ctx context.Context, opt PruneOptions) (PruneResult, error) {
	res := PruneResult{DryRun: opt.DryRun}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 200
	}
	if opt.Pause <= 0 {
		opt.Pause = 5 * time.Millisecond
	}
	now := s.now()
	if opt.Claims > 0 {
		res.ClaimCutoff = now.Add(-opt.Claims).UTC()
	}
	if opt.Payloads > 0 {
		res.PayloadCutoff = now.Add(-opt.Payloads).UTC()
	}
	if !res.ClaimCutoff.IsZero() {
		if err := s.pruneClaims(ctx, opt, &res); err != nil {
			return res, err
		}
	}
	if !res.PayloadCutoff.IsZero() {
		if err := s.prunePayloads(ctx, opt, &res); err != nil {
			return res, err
		}
		if err := s.countHeld(ctx, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (s *Store) countHeld(ctx context.Context, res *PruneResult) error {
	cut := fmtTime(res.PayloadCutoff)
	err := s.rdb.QueryRowContext(ctx, `
SELECT
	(SELECT count(DISTINCT j.event_ref) FROM jobs j JOIN events e ON e.id = j.event_ref WHERE j.state = 'dead' AND e.claimed_at < ?1),
	(SELECT count(DISTINCT j.event_ref) FROM jobs j JOIN events e ON e.id = j.event_ref WHERE j.state = 'pending' AND e.claimed_at < ?1
		AND NOT EXISTS (SELECT 1 FROM jobs d WHERE d.event_ref = e.id AND d.state = 'dead')),
	(SELECT count(*) FROM quarantine WHERE first_at < ?1)`, cut).Scan(&res.HeldDead, &res.HeldPending, &res.HeldQuarantined)
	if err != nil {
		return fmt.Errorf("prune: count held: %w", err)
	}
	return nil
}

func (s *Store) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// candidates reads the next batch of ids in (time, id) order after the cursor.
func (s *Store) candidates(ctx context.Context, q string, cut string, afterAt string, afterID int64, limit int) (ids []int64, lastAt string, err error) {
	err = eachRow(ctx, s.rdb, q, func(rows *sql.Rows) error {
		var id int64
		if err := rows.Scan(&id, &lastAt); err != nil {
			return err
		}
		ids = append(ids, id)
		return nil
	}, cut, afterAt, afterID, limit)
	return ids, lastAt, err
}

func (s *Store) pruneClaims(ctx context.Context, opt PruneOptions, res *PruneResult) error {
	cut := fmtTime(res.ClaimCutoff)
	if opt.DryRun {
		err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM events e WHERE `+prunableClaim, cut).Scan(&res.EventsDeleted)
		if err != nil {
			return fmt.Errorf("prune claims: %w", err)
		}
		return nil
	}
	q := `SELECT e.id, e.claimed_at FROM events e WHERE ` + prunableClaim +
		` AND (e.claimed_at, e.id) > (?2, ?3) ORDER BY e.claimed_at, e.id LIMIT ?4`
	afterAt, afterID := "", int64(0)
	for {
		ids, lastAt, err := s.candidates(ctx, q, cut, afterAt, afterID, opt.BatchSize)
		if err != nil {
			return fmt.Errorf("prune claims: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		afterAt, afterID = lastAt, ids[len(ids)-1]
		if err := s.deleteClaims(ctx, cut, ids, res); err != nil {
			return fmt.Errorf("prune claims: %w", err)
		}
		if err := s.pause(ctx, opt.Pause); err != nil {
			return err
		}
	}
}

// deleteClaims deletes the events among ids that are still prunable, with
// their receipts, links, jobs and attempts, and batch receipts left without
// any event. Foreign keys are on: children go first.
func (s *Store) deleteClaims(ctx context.Context, cut string, ids []int64, res *PruneResult) error {
	b, _ := json.Marshal(ids)
	var events, receipts, jobs, attempts int
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		events, receipts, jobs, attempts = 0, 0, 0, 0
		var keep []int64
		err := eachRow(ctx, tx, `SELECT e.id FROM events e WHERE e.id IN (SELECT value FROM json_each(?2)) AND `+prunableClaim,
			func(rows *sql.Rows) error {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return err
				}
				keep = append(keep, id)
				return nil
			}, cut, string(b))
		if err != nil {
			return fmt.Errorf("recheck: %w", err)
		}
		if len(keep) == 0 {
			return nil
		}
		kb, _ := json.Marshal(keep)
		set := string(kb)
		var batches []int64
		err = eachRow(ctx, tx, `SELECT DISTINCT re.receipt_id FROM receipt_events re WHERE re.event_ref IN (SELECT value FROM json_each(?))`,
			func(rows *sql.Rows) error {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return err
				}
				batches = append(batches, id)
				return nil
			}, set)
		if err != nil {
			return fmt.Errorf("find batch receipts: %w", err)
		}
		bb, _ := json.Marshal(batches)
		for _, st := range []struct {
			q   string
			arg string
			n   *int
		}{
			{`DELETE FROM attempts WHERE job_id IN (SELECT id FROM jobs WHERE event_ref IN (SELECT value FROM json_each(?)))`, set, &attempts},
			{`DELETE FROM jobs WHERE event_ref IN (SELECT value FROM json_each(?))`, set, &jobs},
			{`DELETE FROM receipt_events WHERE event_ref IN (SELECT value FROM json_each(?))`, set, nil},
			{`DELETE FROM receipts WHERE event_ref IN (SELECT value FROM json_each(?))`, set, &receipts},
			{`DELETE FROM receipts WHERE id IN (SELECT value FROM json_each(?)) AND kind = 'batch'
				AND NOT EXISTS (SELECT 1 FROM receipt_events WHERE receipt_id = receipts.id)`, string(bb), &receipts},
			{`DELETE FROM events WHERE id IN (SELECT value FROM json_each(?))`, set, &events},
		} {
			r, err := tx.ExecContext(ctx, st.q, st.arg)
			if err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			if st.n != nil {
				n, _ := r.RowsAffected()
				*st.n += int(n)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.EventsDeleted += events
	res.ReceiptsDeleted += receipts
	res.JobsDeleted += jobs
	res.AttemptsDeleted += attempts
	return nil
}

func (s *Store) prunePayloads(ctx context.Context, opt PruneOptions, res *PruneResult) error {
	cut := fmtTime(res.PayloadCutoff)
	if opt.DryRun {
		err := s.rdb.QueryRowContext(ctx, `SELECT count(*), COALESCE(sum(length(r.body)), 0) FROM receipts r WHERE `+prunablePayload,
			cut).Scan(&res.PayloadsPruned, &res.PayloadBytes)
		if err != nil {
			return fmt.Errorf("prune payloads: %w", err)
		}
		return nil
	}
	q := `SELECT r.id, r.received_at FROM receipts r WHERE ` + prunablePayload +
		` AND (r.received_at, r.id) > (?2, ?3) ORDER BY r.received_at, r.id LIMIT ?4`
	afterAt, afterID := "", int64(0)
	for {
		ids, lastAt, err := s.candidates(ctx, q, cut, afterAt, afterID, opt.BatchSize)
		if err != nil {
			return fmt.Errorf("prune payloads: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		afterAt, afterID = lastAt, ids[len(ids)-1]
		if err := s.clearPayloads(ctx, cut, ids, res); err != nil {
			return fmt.Errorf("prune payloads: %w", err)
		}
		if err := s.pause(ctx, opt.Pause); err != nil {
			return err
		}
	}
}

// clearPayloads removes the bodies of the receipts among ids that are still
// prunable, and the element bodies of the events their batches carried.
func (s *Store) clearPayloads(ctx context.Context, cut string, ids []int64, res *PruneResult) error {
	b, _ := json.Marshal(ids)
	var n int
	var bytes int64
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		n, bytes = 0, 0
		now := fmtTime(s.now())
		var batches []int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(sum(length(r.body)), 0) FROM receipts r
			WHERE r.id IN (SELECT value FROM json_each(?2)) AND `+prunablePayload, cut, string(b)).Scan(&bytes); err != nil {
			return fmt.Errorf("measure bodies: %w", err)
		}
		err := eachRow(ctx, tx, `
UPDATE receipts AS r SET body = NULL, pruned_at = ?3
WHERE r.id IN (SELECT value FROM json_each(?2)) AND `+prunablePayload+`
RETURNING id, kind`, func(rows *sql.Rows) error {
			var id int64
			var kind string
			if err := rows.Scan(&id, &kind); err != nil {
				return err
			}
			n++
			if kind == "batch" {
				batches = append(batches, id)
			}
			return nil
		}, cut, string(b), now)
		if err != nil {
			return fmt.Errorf("clear bodies: %w", err)
		}
		if len(batches) > 0 {
			bb, _ := json.Marshal(batches)
			if _, err := tx.ExecContext(ctx, `UPDATE events SET body = NULL WHERE id IN
				(SELECT event_ref FROM receipt_events WHERE kind = 'accepted' AND receipt_id IN (SELECT value FROM json_each(?)))`,
				string(bb)); err != nil {
				return fmt.Errorf("clear batch elements: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.PayloadsPruned += n
	res.PayloadBytes += bytes
	return nil
}
