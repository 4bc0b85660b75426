package pgstore

// Retention, with sqlitestore's semantics (its prune.go tells the walks),
// on several instances at once:
//
//   - Every batch is its own short transaction that first takes a
//     transaction-scoped advisory lock (pruneLock): batches of passes run
//     by several instances at once take turns, and each checks again what
//     the other left, so nothing is counted twice and pruners never wait
//     on each other's rows (no deadlock).
//   - A batch locks its events with SKIP LOCKED (an event another
//     transaction holds is left for the next pass) and then the delivered
//     jobs of those events, before it checks which may go: a replay that
//     resets one of them commits before the check (the event stays) or
//     waits and finds the job gone.
//   - Held requests are deleted only under the advisory lock Record takes
//     to count a copy (heldKey, tried, never waited for).
//
// Ids come from sequences, so, unlike SQLite's, they are never reused, and
// they are in insert order, not commit order; the walks stop at the first
// row claimed (received) at or after the cutoff, so a row committed late
// behind the cursor would have to be older than the retention when it
// commits: a transaction lasts at most Options.Timeout.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// pruneLock is the transaction-scoped advisory lock every prune batch
// holds: "hookprun" in ASCII.
const pruneLock int64 = 0x686f6f6b7072756e

// prunableEvent selects events the payload tier may fold; $1 is the
// cutoff. Every job delivered before the cutoff, and no request that
// carried the event (a late duplicate, a batch) received at or after it.
const prunableEvent = `e.pruned_at IS NULL AND e.claimed_at < $1
	AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = e.id AND (j.state <> 'delivered' OR j.finished_at >= $1))
	AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.event_ref = e.id AND r.received_at >= $1)
	AND NOT EXISTS (SELECT 1 FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
		WHERE re.event_ref = e.id AND r.received_at >= $1)`

// prunableClaim selects events the claims tier may delete; $1 is the cutoff.
const prunableClaim = `e.claimed_at < $1
	AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = e.id AND (j.state <> 'delivered' OR j.finished_at >= $1))`

// claimRule is prunableClaim for res's cutoffs: the sources with their own
// claims retention (retention_claims) by theirs, inlined as literals (a
// source's name is checked by config, and quoted anyway), every other by $1.
func claimRule(res *hookwarden.PruneResult) string {
	cuts := res.ClaimCutoffs()
	if len(cuts) == 0 {
		return prunableClaim
	}
	srcs := make([]string, 0, len(cuts))
	for src := range cuts {
		srcs = append(srcs, src)
	}
	sort.Strings(srcs)
	var b strings.Builder
	b.WriteString("(CASE e.source")
	for _, src := range srcs {
		fmt.Fprintf(&b, " WHEN %s THEN %s::timestamptz", sqlQuote(src), sqlQuote(cuts[src].UTC().Format(time.RFC3339Nano)))
	}
	b.WriteString(" ELSE $1 END)")
	return strings.ReplaceAll(prunableClaim, "$1", b.String())
}

func sqlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Prune applies retention in small batches: claims first, then held
// requests, seen tokens, then payloads. Dead letters, pending events and
// quarantined requests are never removed; the result counts them. Safe
// while every instance serves, safe to run on several at once and safe to
// interrupt. The cutoffs are the database's clock.
func (s *Store) Prune(ctx context.Context, opt hookwarden.PruneOptions) (hookwarden.PruneResult, error) {
	now, err := s.clock(ctx)
	if err != nil {
		return hookwarden.PruneResult{DryRun: opt.DryRun}, fmt.Errorf("prune: %w", err)
	}
	return hookwarden.PrunePass(ctx, opt, now, hookwarden.PruneSteps{
		Audit: s.Audit, Claims: s.pruneClaims, BodyKeys: s.pruneBodyKeys, Hourly: s.pruneHourly,
		Quarantine: s.pruneQuarantine, Tokens: s.pruneTokens, Payloads: s.prunePayloads, CountHeld: s.countHeld,
		Minutes: s.pruneMinutes, Tidy: s.foldCounts,
		AuditResult: func(ctx context.Context, id int64, res hookwarden.PruneResult) error {
			return s.write(ctx, func(ctx context.Context, tx pgx.Tx) error { return auditResultTx(ctx, tx, id, res) })
		},
	})
}

// pruneWrite runs one prune batch: a transaction under pruneLock.
func (s *Store) pruneWrite(ctx context.Context, fn func(context.Context, pgx.Tx) error) error {
	return s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, pruneLock); err != nil {
			return fmt.Errorf("take the prune lock: %w", err)
		}
		return fn(ctx, tx)
	})
}

// countHeldSQL counts the held events and requests; $1 is the cutoff.
// After a pass, every event claimed before the cutoff is behind the
// payload walk's cursor, and each one it could not fold is in prune_held:
// the count reads those (the answer's rows) and their jobs on jobs_event,
// as sqlitestore's does. countHeldDrySQL reads every dead and pending job
// (their partial indexes) and looks up each one's event: an idle pass paid
// a read per dead letter of the whole history (7 buffers at 10,000
// claims, 103 at 200,000). Each held event's claim time and jobs are
// scalar subqueries, which the planner runs once per prune_held row and
// never turns into joins, and its jobs are read whole on jobs_event (a
// state in the condition let the planner pick a partial index of every
// pending job): with statistics older than a backlog, the joins drove the
// count from every pending job (232,000 buffers, 160 ms, with 57,000
// parked jobs on a store of 10 M claims), and an EXISTS of a pending job
// walked jobs_pending_age whole (7,600 buffers).
const countHeldSQL = `
SELECT count(*) FILTER (WHERE hold = 2), count(*) FILTER (WHERE hold = 1),
	(SELECT count(*) FROM quarantine WHERE first_at < $1 AND released_at IS NULL)
FROM (SELECT (SELECT max(CASE j.state WHEN 'dead' THEN 2 WHEN 'pending' THEN 1 ELSE 0 END)
		FROM jobs j WHERE j.event_ref = h.event_ref) AS hold
	FROM prune_held h WHERE (SELECT e.claimed_at FROM events e WHERE e.id = h.event_ref) < $1) t`

// countHeldDrySQL is countHeldSQL for a dry run, which moves no cursor and
// fills no prune_held: from the partial indexes of dead and pending jobs
// (jobs_dead, jobs_due), every such job's event looked up.
const countHeldDrySQL = `
SELECT
	(SELECT count(DISTINCT j.event_ref) FROM jobs j JOIN events e ON e.id = j.event_ref WHERE j.state = 'dead' AND e.claimed_at < $1),
	(SELECT count(DISTINCT j.event_ref) FROM jobs j JOIN events e ON e.id = j.event_ref WHERE j.state = 'pending' AND e.claimed_at < $1
		AND NOT EXISTS (SELECT 1 FROM jobs d WHERE d.event_ref = e.id AND d.state = 'dead')),
	(SELECT count(*) FROM quarantine WHERE first_at < $1 AND released_at IS NULL)`

// countHeld counts the events older than the payload cutoff that wait for a
// human, after the payload walk (countHeldSQL; a dry run countHeldDrySQL).
func (s *Store) countHeld(ctx context.Context, res *hookwarden.PruneResult) error {
	q := countHeldSQL
	if res.DryRun {
		q = countHeldDrySQL
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err := s.pool.QueryRow(ctx, q, res.PayloadCutoff).Scan(&res.HeldDead, &res.HeldPending, &res.HeldQuarantined)
	if err != nil {
		return fmt.Errorf("prune: count held: %w", err)
	}
	return nil
}

// nextIDs reads the next rows of table after id, in id order, up to limit,
// and returns the ids of those whose time column is before cut. done is set
// at the first row at or after cut (the walk's end; stop is its id) or when
// the table has no more rows. It reads the primary key's index only as far
// as it goes: when the first row is already past the cutoff (an idle pass)
// it reads that row alone.
func (s *Store) nextIDs(ctx context.Context, table, timeCol string, after int64, cut time.Time, limit int) (ids []int64, stop int64, done bool, err error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `
WITH head AS (SELECT id, `+timeCol+` < $3 AS before FROM `+table+` WHERE id > $1 ORDER BY id LIMIT 1)
SELECT id, before FROM head WHERE NOT before
UNION ALL
(SELECT id, `+timeCol+` < $3 FROM `+table+` WHERE id > $1 AND (SELECT before FROM head) ORDER BY id LIMIT $2)`, after, limit, cut)
	if err != nil {
		return nil, 0, false, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		var id int64
		var before bool
		if err := rows.Scan(&id, &before); err != nil {
			return nil, 0, false, err
		}
		if !before && !done {
			done, stop = true, id
		}
		if !done {
			ids = append(ids, id)
		}
	}
	return ids, stop, done || n < limit, rows.Err()
}

// skipToStop moves a walk's cursor to just before the row it stopped at:
// the ids between were walked or no longer exist (a fold deleted them), so
// the next pass does not step over their index entries again.
func (s *Store) skipToStop(ctx context.Context, name string, after, stop int64) error {
	if stop-1 <= after {
		return nil
	}
	return s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error { return advanceCursorTx(ctx, tx, name, stop-1) })
}

// cursor reads where a pruning walk stands (0 when it never ran).
func (s *Store) cursor(ctx context.Context, name string) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT id FROM prune_cursor WHERE name = $1), 0)`, name).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("read prune cursor %s: %w", name, err)
	}
	return id, nil
}

// advanceCursorTx moves a walk's cursor forward to id (never back: another
// instance's pass may have gone further).
func advanceCursorTx(ctx context.Context, tx pgx.Tx, name string, id int64) error {
	if _, err := tx.Exec(ctx, `INSERT INTO prune_cursor (name, id) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET id = GREATEST(prune_cursor.id, excluded.id)`, name, id); err != nil {
		return fmt.Errorf("move prune cursor %s: %w", name, err)
	}
	return nil
}

// totalsUpsert ends an insert into pruned_totals: counts (n) add up, times
// (at, the kinds last_received and last_accepted) keep the latest. Rows
// go in (name, kind) order, so that two transactions folding totals of the
// same names lock them in one order.
const totalsUpsert = `ON CONFLICT (name, kind) DO UPDATE SET n = pruned_totals.n + excluded.n,
	at = GREATEST(pruned_totals.at, excluded.at)`

// foldTotalsTx adds to pruned_totals what the events in set still hold:
// their duplicates and divergent copies (direct and in batches), their
// delivered jobs per destination, the last request and claim per source,
// and with claims set the claims themselves. Run it before deleting those
// rows, in the same transaction. What an earlier fold already counted has
// been deleted since, so nothing is counted twice.
func foldTotalsTx(ctx context.Context, tx pgx.Tx, set []int64, claims bool) error {
	_, err := tx.Exec(ctx, `
INSERT INTO pruned_totals (name, kind, n, at)
SELECT name, kind, sum(n), max(at) FROM (
	SELECT e.source AS name, r.kind AS kind, count(*) AS n, NULL::timestamptz AS at
	FROM receipts r JOIN events e ON e.id = r.event_ref
	WHERE r.event_ref = ANY($1) AND r.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
	UNION ALL
	SELECT e.source, re.kind, count(*), NULL
	FROM receipt_events re JOIN events e ON e.id = re.event_ref
	WHERE re.event_ref = ANY($1) AND re.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
	UNION ALL
	SELECT j.destination, 'delivered', count(*), NULL
	FROM jobs j WHERE j.event_ref = ANY($1) AND j.state = 'delivered' GROUP BY 1
	UNION ALL
	SELECT e.source, 'last_received', 0, max(r.received_at)
	FROM receipts r JOIN events e ON e.id = r.event_ref
	WHERE r.event_ref = ANY($1) GROUP BY 1
	UNION ALL
	SELECT e.source, 'last_received', 0, max(r.received_at)
	FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id JOIN events e ON e.id = re.event_ref
	WHERE re.event_ref = ANY($1) GROUP BY 1
	UNION ALL
	SELECT e.source, 'last_received', 0, max(e.last_received_at)
	FROM events e WHERE e.id = ANY($1) GROUP BY 1
	UNION ALL
	SELECT e.source, 'last_accepted', 0, max(e.claimed_at)
	FROM events e WHERE e.id = ANY($1) GROUP BY 1
	UNION ALL
	SELECT e.source, 'accepted', count(*), NULL
	FROM events e WHERE $2 AND e.id = ANY($1) GROUP BY 1) t
GROUP BY name, kind HAVING max(at) IS NOT NULL OR kind NOT IN ('last_received', 'last_accepted')
ORDER BY name, kind
`+totalsUpsert, set, claims)
	if err != nil {
		return fmt.Errorf("fold totals: %w", err)
	}
	return nil
}

// lockEventsTx locks the events among ids that no other transaction holds,
// then the delivered jobs of those, and returns the events locked. strength
// is "FOR UPDATE" to delete them, "FOR NO KEY UPDATE" to fold them (a
// duplicate's receipt may still reference the event meanwhile). A job a
// replay resets before the lock is no longer delivered and is not locked;
// the check that follows sees it pending.
func lockEventsTx(ctx context.Context, tx pgx.Tx, ids []int64, strength string) ([]int64, error) {
	locked, err := queryIDs(ctx, tx, `SELECT id FROM events WHERE id = ANY($1) ORDER BY id `+strength+` SKIP LOCKED`, ids)
	if err != nil {
		return nil, fmt.Errorf("lock events: %w", err)
	}
	if len(locked) == 0 {
		return []int64{}, nil // not nil: = ANY(NULL) would be NULL, not false
	}
	if _, err := tx.Exec(ctx, `SELECT id FROM jobs WHERE event_ref = ANY($1) AND state = 'delivered' ORDER BY id FOR UPDATE`, locked); err != nil {
		return nil, fmt.Errorf("lock jobs: %w", err)
	}
	return locked, nil
}

// execCount runs a statement and adds the rows it changed to *n.
func execCount(ctx context.Context, tx pgx.Tx, n *int, q string, args ...any) error {
	tag, err := tx.Exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if n != nil {
		*n += int(tag.RowsAffected())
	}
	return nil
}

func (s *Store) pruneClaims(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	// The claims walk starts at the lowest id every time: what it deletes
	// leaves, so it reads the events it keeps (dead, pending) and what it
	// deletes, up to the first event claimed after the cutoff.
	var after int64
	for {
		// $1 of the rule: the cutoff of the sources without their own;
		// the walk goes up to the latest cutoff of all.
		ids, _, done, err := s.nextIDs(ctx, "events", "claimed_at", after, res.ClaimWalkCutoff(), opt.BatchSize)
		if err != nil {
			return fmt.Errorf("prune claims: %w", err)
		}
		if len(ids) > 0 {
			after = ids[len(ids)-1]
			if opt.DryRun {
				var n int
				bctx, cancel := s.bound(ctx)
				err := s.pool.QueryRow(bctx, `SELECT count(*) FROM events e WHERE e.id = ANY($2) AND `+claimRule(res),
					res.ClaimCutoff, ids).Scan(&n)
				cancel()
				if err != nil {
					return fmt.Errorf("prune claims: %w", err)
				}
				res.EventsDeleted += n
			} else {
				if err := s.deleteClaims(ctx, res.ClaimCutoff, ids, res); err != nil {
					return fmt.Errorf("prune claims: %w", err)
				}
				if err := hookwarden.Pause(ctx, opt.Pause); err != nil {
					return err
				}
			}
		}
		if done {
			return nil
		}
	}
}

// deleteClaims deletes the events among ids that are still prunable, with
// their receipts, links, jobs and attempts, and batch receipts left without
// any event; their counts go to pruned_totals first. Children go first.
func (s *Store) deleteClaims(ctx context.Context, cut time.Time, ids []int64, res *hookwarden.PruneResult) error {
	var events, receipts, jobs, attempts int
	err := s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error {
		events, receipts, jobs, attempts = 0, 0, 0, 0
		locked, err := lockEventsTx(ctx, tx, ids, "FOR UPDATE")
		if err != nil || len(locked) == 0 {
			return err
		}
		keep, err := queryIDs(ctx, tx, `SELECT e.id FROM events e WHERE e.id = ANY($2) AND `+claimRule(res), cut, locked)
		if err != nil {
			return fmt.Errorf("recheck: %w", err)
		}
		if len(keep) == 0 {
			return nil
		}
		batches, err := queryIDs(ctx, tx, `SELECT DISTINCT receipt_id FROM receipt_events WHERE event_ref = ANY($1)`, keep)
		if err != nil {
			return fmt.Errorf("find batch receipts: %w", err)
		}
		if err := foldTotalsTx(ctx, tx, keep, true); err != nil {
			return err
		}
		for _, st := range []struct {
			q   string
			arg []int64
			n   *int
		}{
			{`DELETE FROM attempts WHERE job_id IN (SELECT id FROM jobs WHERE event_ref = ANY($1))`, keep, &attempts},
			{`DELETE FROM jobs WHERE event_ref = ANY($1)`, keep, &jobs},
			{`DELETE FROM receipt_events WHERE event_ref = ANY($1)`, keep, nil},
			{`DELETE FROM receipts WHERE event_ref = ANY($1)`, keep, &receipts},
			{`DELETE FROM receipts r WHERE r.id = ANY($1) AND r.kind = 'batch'
				AND NOT EXISTS (SELECT 1 FROM receipt_events WHERE receipt_id = r.id)`, batches, &receipts},
			{`DELETE FROM prune_held WHERE event_ref = ANY($1)`, keep, nil},
			{`DELETE FROM events WHERE id = ANY($1)`, keep, &events},
		} {
			if err := execCount(ctx, tx, st.n, st.q, st.arg); err != nil {
				return fmt.Errorf("delete: %w", err)
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

// prunePayloads runs the payload tier: the events held on earlier passes,
// then the events claimed since the last pass, then the requests that came
// for already pruned events (late duplicates).
func (s *Store) prunePayloads(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	cut := res.PayloadCutoff
	bctx, cancel := s.bound(ctx)
	held, err := queryIDs(bctx, s.pool, `SELECT event_ref FROM prune_held ORDER BY event_ref`)
	cancel()
	if err != nil {
		return fmt.Errorf("prune payloads: read held events: %w", err)
	}
	for lo := 0; lo < len(held); lo += opt.BatchSize {
		ids := held[lo:min(lo+opt.BatchSize, len(held))]
		if err := s.foldBatch(ctx, opt, cut, ids, 0, res); err != nil {
			return err
		}
	}

	after, err := s.cursor(ctx, "events")
	if err != nil {
		return fmt.Errorf("prune payloads: %w", err)
	}
	for {
		ids, stop, done, err := s.nextIDs(ctx, "events", "claimed_at", after, cut, opt.BatchSize)
		if err != nil {
			return fmt.Errorf("prune payloads: %w", err)
		}
		if len(ids) > 0 {
			after = ids[len(ids)-1]
			if err := s.foldBatch(ctx, opt, cut, ids, after, res); err != nil {
				return err
			}
		}
		if done {
			if opt.DryRun {
				return nil
			}
			if err := s.skipToStop(ctx, "events", after, stop); err != nil {
				return fmt.Errorf("prune payloads: %w", err)
			}
			break
		}
	}

	if after, err = s.cursor(ctx, "receipts"); err != nil {
		return fmt.Errorf("prune payloads: %w", err)
	}
	for {
		ids, stop, done, err := s.nextIDs(ctx, "receipts", "received_at", after, cut, opt.BatchSize)
		if err != nil {
			return fmt.Errorf("prune late receipts: %w", err)
		}
		if len(ids) > 0 {
			after = ids[len(ids)-1]
			if err := s.foldLate(ctx, cut, ids, after, res); err != nil {
				return fmt.Errorf("prune late receipts: %w", err)
			}
			if err := hookwarden.Pause(ctx, opt.Pause); err != nil {
				return err
			}
		}
		if done {
			if err := s.skipToStop(ctx, "receipts", after, stop); err != nil {
				return fmt.Errorf("prune late receipts: %w", err)
			}
			return nil
		}
	}
}

// foldBatch folds (or, in a dry run, counts) the prunable events among ids;
// advance, when set, is the walk's new cursor.
func (s *Store) foldBatch(ctx context.Context, opt hookwarden.PruneOptions, cut time.Time, ids []int64, advance int64, res *hookwarden.PruneResult) error {
	if opt.DryRun {
		var n int
		var bytes int64
		// Bodies: the events' own receipts, and the batches that would go
		// with them (every event they carry pruned or in this batch).
		bctx, cancel := s.bound(ctx)
		defer cancel()
		err := s.pool.QueryRow(bctx, `
WITH p AS (SELECT e.id FROM events e WHERE e.id = ANY($2) AND `+prunableEvent+`)
SELECT (SELECT count(*) FROM p),
	(SELECT COALESCE(sum(length(r.body)), 0) FROM receipts r WHERE r.event_ref IN (SELECT id FROM p))
	+ (SELECT COALESCE(sum(length(r.body)), 0) FROM receipts r
		WHERE r.kind = 'batch' AND r.id IN (SELECT receipt_id FROM receipt_events WHERE event_ref IN (SELECT id FROM p))
		AND NOT EXISTS (SELECT 1 FROM receipt_events re JOIN events e ON e.id = re.event_ref
			WHERE re.receipt_id = r.id AND e.pruned_at IS NULL AND e.id NOT IN (SELECT id FROM p)))`, cut, ids).Scan(&n, &bytes)
		if err != nil {
			return fmt.Errorf("prune payloads: %w", err)
		}
		res.PayloadsPruned += n
		res.PayloadBytes += bytes
		return nil
	}
	if err := s.foldEvents(ctx, cut, ids, advance, res); err != nil {
		return fmt.Errorf("prune payloads: %w", err)
	}
	return hookwarden.Pause(ctx, opt.Pause)
}

// foldEvents folds the events among ids that are still prunable into their
// claims, in one transaction: totals first, then the summary on the events
// row, then the deletes (children first). The others, not pruned yet (or
// held by another transaction), go to prune_held to be looked at again on
// the next pass.
func (s *Store) foldEvents(ctx context.Context, cut time.Time, ids []int64, advance int64, res *hookwarden.PruneResult) error {
	var events, receipts, jobs, attempts int
	var bytes int64
	err := s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error {
		events, receipts, jobs, attempts, bytes = 0, 0, 0, 0, 0
		locked, err := lockEventsTx(ctx, tx, ids, "FOR NO KEY UPDATE")
		if err != nil {
			return err
		}
		keep, err := queryIDs(ctx, tx, `SELECT e.id FROM events e WHERE e.id = ANY($2) AND `+prunableEvent, cut, locked)
		if err != nil {
			return fmt.Errorf("recheck: %w", err)
		}
		if len(keep) > 0 {
			if err := s.foldTx(ctx, tx, keep, &receipts, &jobs, &attempts, &bytes); err != nil {
				return err
			}
			events = len(keep)
		}
		// The rest, unless gone or pruned, waits in prune_held.
		if err := execCount(ctx, tx, nil, `INSERT INTO prune_held (event_ref)
			SELECT e.id FROM events e WHERE e.id = ANY($1) AND e.pruned_at IS NULL AND NOT e.id = ANY($2)
			ON CONFLICT DO NOTHING`, ids, keep); err != nil {
			return fmt.Errorf("hold: %w", err)
		}
		if advance > 0 {
			return advanceCursorTx(ctx, tx, "events", advance)
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.PayloadsPruned += events
	res.PayloadBytes += bytes
	res.PayloadReceipts += receipts
	res.PayloadJobs += jobs
	res.PayloadAttempts += attempts
	return nil
}

// sumBodiesTx runs a DELETE ... RETURNING length(body) and counts the
// receipts it deleted and their bytes.
func sumBodiesTx(ctx context.Context, tx pgx.Tx, receipts *int, bytes *int64, q string, args ...any) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var n *int64
		if err := rows.Scan(&n); err != nil {
			return err
		}
		*receipts++
		if n != nil {
			*bytes += *n
		}
	}
	return rows.Err()
}

// foldTx folds the events in set (all prunable, locked) into their claims.
func (s *Store) foldTx(ctx context.Context, tx pgx.Tx, set []int64, receipts, jobs, attempts *int, bytes *int64) error {
	batches, err := queryIDs(ctx, tx, `SELECT DISTINCT receipt_id FROM receipt_events WHERE event_ref = ANY($1)`, set)
	if err != nil {
		return fmt.Errorf("find batch receipts: %w", err)
	}
	if err := foldTotalsTx(ctx, tx, set, false); err != nil {
		return err
	}
	// Each count is one grouped read of the batch, not a subquery per
	// event: its plan does not hang on fresh statistics.
	if _, err := tx.Exec(ctx, `
WITH r AS (SELECT event_ref AS ref, count(*) AS n, max(received_at) AS last FROM receipts
		WHERE event_ref = ANY($1) GROUP BY 1),
	l AS (SELECT re.event_ref AS ref, count(*) AS n, max(r.received_at) AS last
		FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id WHERE re.event_ref = ANY($1) GROUP BY 1),
	j AS (SELECT event_ref AS ref, count(*) AS n, max(finished_at) AS delivered FROM jobs WHERE event_ref = ANY($1) GROUP BY 1),
	a AS (SELECT j.event_ref AS ref, count(*) AS n FROM jobs j JOIN attempts a ON a.job_id = j.id
		WHERE j.event_ref = ANY($1) GROUP BY 1)
UPDATE events AS e SET
	receipts = COALESCE(e.receipts, 0) + COALESCE(r.n, 0) + COALESCE(l.n, 0),
	jobs = COALESCE(j.n, 0),
	attempts = COALESCE(a.n, 0),
	last_received_at = GREATEST(e.claimed_at, e.last_received_at, r.last, l.last),
	delivered_at = j.delivered,
	pruned_at = COALESCE($2::timestamptz, now()),
	body_sha256 = ''::bytea,
	body = NULL
FROM unnest($1::bigint[]) AS k (id)
	LEFT JOIN r ON r.ref = k.id LEFT JOIN l ON l.ref = k.id LEFT JOIN j ON j.ref = k.id LEFT JOIN a ON a.ref = k.id
WHERE e.id = k.id`, set, s.now()); err != nil {
		return fmt.Errorf("summarise events: %w", err)
	}
	for _, st := range []struct {
		q string
		n *int
	}{
		{`DELETE FROM attempts WHERE job_id IN (SELECT id FROM jobs WHERE event_ref = ANY($1))`, attempts},
		{`DELETE FROM jobs WHERE event_ref = ANY($1)`, jobs},
		{`DELETE FROM receipt_events WHERE event_ref = ANY($1)`, nil},
		{`DELETE FROM prune_held WHERE event_ref = ANY($1)`, nil},
	} {
		if err := execCount(ctx, tx, st.n, st.q, set); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	if err := sumBodiesTx(ctx, tx, receipts, bytes, `DELETE FROM receipts WHERE event_ref = ANY($1) RETURNING length(body)`, set); err != nil {
		return fmt.Errorf("delete receipts: %w", err)
	}
	// A batch receipt goes with the last event it carried.
	if err := sumBodiesTx(ctx, tx, receipts, bytes, `DELETE FROM receipts r WHERE r.id = ANY($1) AND r.kind = 'batch'
		AND NOT EXISTS (SELECT 1 FROM receipt_events WHERE receipt_id = r.id) RETURNING length(body)`, batches); err != nil {
		return fmt.Errorf("delete batch receipts: %w", err)
	}
	return nil
}

// foldLate folds into their pruned events the receipts among ids that came
// after the event was pruned (late duplicates, direct or in a batch whose
// every event is pruned), and advances the receipts walk to advance.
// Anything else (receipts of events not pruned, quarantined requests) is
// left alone: the event tier or nobody removes it.
func (s *Store) foldLate(ctx context.Context, cut time.Time, ids []int64, advance int64, res *hookwarden.PruneResult) error {
	var receipts int
	var bytes int64
	err := s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error {
		receipts, bytes = 0, 0
		late, err := queryIDs(ctx, tx, `
SELECT r.id FROM receipts r JOIN events e ON e.id = r.event_ref
WHERE r.id = ANY($2) AND r.received_at < $1 AND e.pruned_at IS NOT NULL
UNION ALL
SELECT r.id FROM receipts r
WHERE r.id = ANY($2) AND r.received_at < $1 AND r.kind = 'batch'
	AND EXISTS (SELECT 1 FROM receipt_events re WHERE re.receipt_id = r.id)
	AND NOT EXISTS (SELECT 1 FROM receipt_events re JOIN events e ON e.id = re.event_ref
		WHERE re.receipt_id = r.id AND e.pruned_at IS NULL)`, cut, ids)
		if err != nil {
			return fmt.Errorf("find late receipts: %w", err)
		}
		if len(late) > 0 {
			// Per event: the receipts that carried it, direct or linked.
			const carried = `
	SELECT r.event_ref AS ref, r.kind AS kind, r.received_at AS at FROM receipts r
	WHERE r.id = ANY($1) AND r.event_ref IS NOT NULL
	UNION ALL
	SELECT re.event_ref, re.kind, r.received_at FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
	WHERE re.receipt_id = ANY($1)`
			if _, err := tx.Exec(ctx, `
INSERT INTO pruned_totals (name, kind, n, at)
SELECT name, kind, sum(n), max(at) FROM (
	SELECT e.source AS name, c.kind AS kind, 1 AS n, NULL::timestamptz AS at FROM (`+carried+`) c JOIN events e ON e.id = c.ref
	WHERE c.kind IN ('duplicate', 'divergent')
	UNION ALL
	SELECT e.source, 'last_received', 0, c.at FROM (`+carried+`) c JOIN events e ON e.id = c.ref) t
GROUP BY name, kind ORDER BY name, kind
`+totalsUpsert, late); err != nil {
				return fmt.Errorf("fold totals: %w", err)
			}
			if _, err := tx.Exec(ctx, `
UPDATE events AS e SET
	receipts = COALESCE(e.receipts, 0) + (SELECT count(*) FROM (`+carried+`) c WHERE c.ref = e.id),
	last_received_at = GREATEST(e.last_received_at, (SELECT max(c.at) FROM (`+carried+`) c WHERE c.ref = e.id))
WHERE e.id IN (SELECT ref FROM (`+carried+`) c)`, late); err != nil {
				return fmt.Errorf("summarise events: %w", err)
			}
			if err := execCount(ctx, tx, nil, `DELETE FROM receipt_events WHERE receipt_id = ANY($1)`, late); err != nil {
				return fmt.Errorf("delete links: %w", err)
			}
			if err := sumBodiesTx(ctx, tx, &receipts, &bytes, `DELETE FROM receipts WHERE id = ANY($1) RETURNING length(body)`, late); err != nil {
				return fmt.Errorf("delete late receipts: %w", err)
			}
		}
		return advanceCursorTx(ctx, tx, "receipts", advance)
	})
	if err != nil {
		return err
	}
	res.PayloadReceipts += receipts
	res.PayloadBytes += bytes
	return nil
}
