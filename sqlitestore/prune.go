package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
)

// unfinishedSince is true when an event has a job that is not delivered, or
// was delivered at or after the cutoff (?). Its payload and claim stay.
const unfinishedSince = `EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = %s AND (j.state != 'delivered' OR j.finished_at >= %s))`

// prunableEvent selects events the payload tier may fold; ?1 is the cutoff.
// Every job delivered before the cutoff, and no request that carried the
// event (a late duplicate, a batch) received at or after it.
var prunableEvent = `e.pruned_at IS NULL AND e.claimed_at < ?1 AND NOT ` + fmt.Sprintf(unfinishedSince, "e.id", "?1") + `
	AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.event_ref = e.id AND r.received_at >= ?1)
	AND NOT EXISTS (SELECT 1 FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
		WHERE re.event_ref = e.id AND r.received_at >= ?1)`

// prunableClaim selects events retention may delete; ?1 is the cutoff.
var prunableClaim = `e.claimed_at < ?1 AND NOT ` + fmt.Sprintf(unfinishedSince, "e.id", "?1")

// claimRule is prunableClaim for res's cutoffs: the sources with their own
// claims retention (retention_claims) by theirs, inlined as literals (a
// source's name is checked by config, and quoted anyway), every other by ?1.
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
		fmt.Fprintf(&b, " WHEN %s THEN %s", sqlQuote(src), sqlQuote(fmtTime(cuts[src])))
	}
	b.WriteString(" ELSE ?1 END)")
	cut := b.String()
	return `e.claimed_at < ` + cut + ` AND NOT ` + fmt.Sprintf(unfinishedSince, "e.id", cut)
}

func sqlQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Prune applies retention in small batches, claims first, then payloads.
// Dead letters, pending events and quarantined requests are never removed;
// the result counts them. Safe while serve runs (each batch is one short
// write through the writer) and safe to interrupt.
//
// Both tiers walk rows in id order, not by time: ids grow in commit order
// and the time columns are the request's receive time, so a walk stops at
// the first row at or after the cutoff, and retention is exact to within one
// writer batch (milliseconds). The payload walk resumes where the last pass
// stopped (prune_cursor) and revisits only the events it had to leave
// (prune_held), so an hourly pass on a year-old file costs the hour's work.
func (s *Store) Prune(ctx context.Context, opt hookwarden.PruneOptions) (hookwarden.PruneResult, error) {
	return hookwarden.PrunePass(ctx, opt, s.now(), hookwarden.PruneSteps{
		Audit: s.Audit, Claims: s.pruneClaims, BodyKeys: s.pruneBodyKeys, Hourly: s.pruneHourly, Minutes: s.pruneMinutes,
		Quarantine: s.pruneQuarantine, Tokens: s.pruneTokens, Payloads: s.prunePayloads, CountHeld: s.countHeld,
		AuditResult: func(ctx context.Context, id int64, res hookwarden.PruneResult) error {
			return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error { return auditResultTx(ctx, tx, id, res) })
		},
	})
}

// pruneHourly deletes the hourly counts and the request hours (gaps') of
// the hours before the claims cutoff's: the chart and the recent windows
// read days, and the counts stay in step with the claims they tell of.
func (s *Store) pruneHourly(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	if opt.DryRun {
		return nil
	}
	for _, table := range []string{"hourly", "request_hours"} {
		err := s.deleteSome(ctx, nil, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE hour < ?)`, `DELETE FROM `+table+` WHERE hour < ?`,
			hourOf(res.ClaimCutoff))
		if err != nil {
			return fmt.Errorf("prune %s: %w", table, err)
		}
	}
	cut := fmtTime(res.ClaimCutoff)
	// The 503 minutes (gaps' "unavailable" windows), on the same cutoff.
	if err := s.deleteSome(ctx, nil, `SELECT EXISTS (SELECT 1 FROM unavailable_minutes WHERE minute < ?)`,
		`DELETE FROM unavailable_minutes WHERE minute < ?`, cut); err != nil {
		return fmt.Errorf("prune unavailable_minutes: %w", err)
	}
	// Late arrivals go with the claims too (sequence.go): a small table.
	if err := s.deleteSome(ctx, nil, `SELECT EXISTS (SELECT 1 FROM late_events WHERE received_at < ?)`,
		`DELETE FROM late_events WHERE received_at < ?`, cut); err != nil {
		return fmt.Errorf("prune late_events: %w", err)
	}
	// The refusals (stats'), as hourly's.
	if err := s.deleteSome(ctx, nil, `SELECT EXISTS (SELECT 1 FROM refusal_hours WHERE hour < ?)`,
		`DELETE FROM refusal_hours WHERE hour < ?`, fmtTime(res.ClaimCutoff.UTC().Truncate(time.Hour))); err != nil {
		return fmt.Errorf("prune refusal_hours: %w", err)
	}
	return nil
}

// anyEvent says whether an event among ids meets cond (prunableEvent or
// prunableClaim, ?1 the cutoff), from the read pool.
func (s *Store) anyEvent(ctx context.Context, cond, cut string, ids []int64) (bool, error) {
	var found bool
	err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM events e WHERE e.id IN (SELECT value FROM json_each(?2)) AND `+
		cond+`)`, cut, idSet(ids)).Scan(&found)
	return found, err
}

// deleteSome reads exists from the read pool and runs del (counting its
// rows into n, if set) in a write transaction only when it finds a row. A
// pass with nothing to do then takes the file's write lock only for its
// audit entry: each write of a command waits for a pause in serve's
// (between its commits, or between the steps of its fold). It took the
// lock six times, and once more for each batch of events held past a
// cutoff (dead letters, pending jobs).
func (s *Store) deleteSome(ctx context.Context, n *int, exists, del string, args ...any) error {
	var found bool
	if err := s.rdb.QueryRowContext(ctx, exists, args...).Scan(&found); err != nil || !found {
		return err
	}
	return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		if n != nil {
			*n = 0
		}
		return execCount(ctx, tx, n, del, args...)
	})
}

// pruneMinutes deletes the counts per minute before before: the recent
// windows read the last day's (schema 14). One short write, on the index
// of minutes.
func (s *Store) pruneMinutes(ctx context.Context, before time.Time) error {
	return s.deleteSome(ctx, nil, `SELECT EXISTS (SELECT 1 FROM minutely WHERE minute < ?)`,
		`DELETE FROM minutely WHERE minute < ?`, minuteOf(before))
}

// countHeldSQL counts the held events and requests; ?1 is the cutoff.
// After a pass, every event claimed before the cutoff is behind the
// payload walk's cursor, and each one it could not fold is in prune_held:
// the count reads those (the answer's rows) and their jobs on jobs_event.
// It used to read every dead and pending job (their partial indexes) and
// look up each one's event: an idle pass at ten million claims paid a
// random read per dead letter of the whole history.
const countHeldSQL = `
SELECT
	(SELECT count(*) FROM prune_held h CROSS JOIN events e ON e.id = h.event_ref
		WHERE e.claimed_at < ?1 AND EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = e.id AND j.state = 'dead')),
	(SELECT count(*) FROM prune_held h CROSS JOIN events e ON e.id = h.event_ref
		WHERE e.claimed_at < ?1 AND EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = e.id AND j.state = 'pending')
		AND NOT EXISTS (SELECT 1 FROM jobs d WHERE d.event_ref = e.id AND d.state = 'dead')),
	(SELECT count(*) FROM quarantine WHERE first_at < ?1 AND released_at IS NULL)`

// countHeldDrySQL is countHeldSQL for a dry run, which moves no cursor and
// fills no prune_held: from the partial indexes of dead and pending jobs
// (jobs_dead, jobs_due), every such job's event looked up.
// INDEXED BY: left alone, SQLite reads count(DISTINCT event_ref) in order
// from jobs_event, every job of the history (1.3 s at 10 million claims).
const countHeldDrySQL = `
SELECT
	(SELECT count(DISTINCT j.event_ref) FROM jobs j INDEXED BY jobs_dead JOIN events e ON e.id = j.event_ref
		WHERE j.state = 'dead' AND e.claimed_at < ?1),
	(SELECT count(DISTINCT j.event_ref) FROM jobs j INDEXED BY jobs_due JOIN events e ON e.id = j.event_ref
		WHERE j.state = 'pending' AND e.claimed_at < ?1
		AND NOT EXISTS (SELECT 1 FROM jobs d WHERE d.event_ref = e.id AND d.state = 'dead')),
	(SELECT count(*) FROM quarantine WHERE first_at < ?1 AND released_at IS NULL)`

// countHeld counts the events older than the payload cutoff that wait for a
// human, after the payload walk (countHeldSQL; a dry run countHeldDrySQL).
func (s *Store) countHeld(ctx context.Context, res *hookwarden.PruneResult) error {
	cut := fmtTime(res.PayloadCutoff)
	q := countHeldSQL
	if res.DryRun {
		q = countHeldDrySQL
	}
	err := s.rdb.QueryRowContext(ctx, q, cut).Scan(&res.HeldDead, &res.HeldPending, &res.HeldQuarantined)
	if err != nil {
		return fmt.Errorf("prune: count held: %w", err)
	}
	return nil
}

// nextIDs reads the next rows of table (events or receipts) after id, in id
// order, up to limit, and returns the ids of those whose time column is
// before cut. done is set at the first row at or after cut (the walk's end:
// ids grow with time) or when the table has no more rows.
func (s *Store) nextIDs(ctx context.Context, table, timeCol string, after int64, cut string, limit int) (ids []int64, done bool, err error) {
	n := 0
	err = eachRow(ctx, s.rdb, `SELECT id, `+timeCol+` FROM `+table+` WHERE id > ? ORDER BY id LIMIT ?`, func(rows *sql.Rows) error {
		n++
		var id int64
		var at string
		if err := rows.Scan(&id, &at); err != nil {
			return err
		}
		if at >= cut {
			done = true
		}
		if !done {
			ids = append(ids, id)
		}
		return nil
	}, after, limit)
	if n < limit {
		done = true
	}
	return ids, done, err
}

// cursor reads where a pruning walk stands (0 when it never ran).
func (s *Store) cursor(ctx context.Context, name string) (int64, error) {
	var id int64
	err := s.rdb.QueryRowContext(ctx, `SELECT COALESCE((SELECT id FROM prune_cursor WHERE name = ?), 0)`, name).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("read prune cursor %s: %w", name, err)
	}
	return id, nil
}

// advanceCursorTx moves a walk's cursor forward to id, then back to the
// table's highest id if rows were deleted above it: ids are not
// AUTOINCREMENT, so the next insert reuses max(id)+1 and must not land
// behind the cursor.
func advanceCursorTx(ctx context.Context, tx *sql.Tx, name, table string, id int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO prune_cursor (name, id) VALUES (?1, ?2)
	ON CONFLICT (name) DO UPDATE SET id = max(id, excluded.id)`, name, id); err != nil {
		return fmt.Errorf("move prune cursor %s: %w", name, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE prune_cursor SET id = (SELECT COALESCE(max(id), 0) FROM `+table+`)
	WHERE name = ?1 AND id > (SELECT COALESCE(max(id), 0) FROM `+table+`)`, name); err != nil {
		return fmt.Errorf("move prune cursor %s: %w", name, err)
	}
	return nil
}

// foldTotalsTx adds to pruned_totals what the events in set (a JSON array)
// still hold: their duplicates and divergent copies (direct and in
// batches), their delivered jobs per destination, the last request and
// claim per source, and with claims set the claims themselves. Run it
// before deleting those rows, in the same transaction. What an earlier fold
// already counted has been deleted since, so nothing is counted twice.
func foldTotalsTx(ctx context.Context, tx *sql.Tx, set string, claims bool) error {
	_, err := tx.ExecContext(ctx, `
INSERT INTO pruned_totals (name, kind, n, at)
SELECT name, kind, sum(n), max(at) FROM (
	SELECT e.source AS name, r.kind AS kind, count(*) AS n, NULL AS at
	FROM receipts r JOIN events e ON e.id = r.event_ref
	WHERE r.event_ref IN (SELECT value FROM json_each(?1)) AND r.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
	UNION ALL
	SELECT e.source, re.kind, count(*), NULL
	FROM receipt_events re JOIN events e ON e.id = re.event_ref
	WHERE re.event_ref IN (SELECT value FROM json_each(?1)) AND re.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
	UNION ALL
	SELECT j.destination, 'delivered', count(*), NULL
	FROM jobs j WHERE j.event_ref IN (SELECT value FROM json_each(?1)) AND j.state = 'delivered' GROUP BY 1
	UNION ALL
	SELECT e.source, 'last_received', 0, max(r.received_at)
	FROM receipts r JOIN events e ON e.id = r.event_ref
	WHERE r.event_ref IN (SELECT value FROM json_each(?1)) GROUP BY 1
	UNION ALL
	SELECT e.source, 'last_received', 0, max(r.received_at)
	FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id JOIN events e ON e.id = re.event_ref
	WHERE re.event_ref IN (SELECT value FROM json_each(?1)) GROUP BY 1
	UNION ALL
	SELECT e.source, 'last_received', 0, max(e.last_received_at)
	FROM events e WHERE e.id IN (SELECT value FROM json_each(?1)) GROUP BY 1
	UNION ALL
	SELECT e.source, 'last_accepted', 0, max(e.claimed_at)
	FROM events e WHERE e.id IN (SELECT value FROM json_each(?1)) GROUP BY 1
	UNION ALL
	SELECT e.source, 'accepted', count(*), NULL
	FROM events e WHERE ?2 AND e.id IN (SELECT value FROM json_each(?1)) GROUP BY 1)
WHERE at IS NOT NULL OR kind NOT IN ('last_received', 'last_accepted') GROUP BY name, kind
`+totalsUpsert, set, claims)
	if err != nil {
		return fmt.Errorf("fold totals: %w", err)
	}
	return nil
}

// totalsUpsert ends an insert into pruned_totals: counts (n) add up, times
// (at, the kinds last_received and last_accepted) keep the latest. Text
// times of fixed width compare as times.
const totalsUpsert = `ON CONFLICT (name, kind) DO UPDATE SET n = n + excluded.n,
	at = CASE WHEN at IS NULL OR excluded.at > at THEN excluded.at ELSE at END`

// execCount runs a statement and adds the rows it changed to *n.
func execCount(ctx context.Context, tx *sql.Tx, n *int, q string, args ...any) error {
	r, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n != nil {
		m, _ := r.RowsAffected()
		*n += int(m)
	}
	return nil
}

func (s *Store) pruneClaims(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	// ?1 of the rule: the cutoff of the sources without their own; the
	// walk goes up to the latest cutoff of all.
	cut, walk, rule := fmtTime(res.ClaimCutoff), fmtTime(res.ClaimWalkCutoff()), claimRule(res)
	// The claims walk starts at the lowest id every time: what it deletes
	// leaves, so it reads the events it keeps (dead, pending) and what it
	// deletes, up to the first event claimed after the cutoff.
	var after int64
	for {
		ids, done, err := s.nextIDs(ctx, "events", "claimed_at", after, walk, opt.BatchSize)
		if err != nil {
			return fmt.Errorf("prune claims: %w", err)
		}
		if len(ids) > 0 {
			after = ids[len(ids)-1]
			if opt.DryRun {
				var n int
				if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM events e WHERE e.id IN (SELECT value FROM json_each(?2)) AND `+
					rule, cut, idSet(ids)).Scan(&n); err != nil {
					return fmt.Errorf("prune claims: %w", err)
				}
				res.EventsDeleted += n
			} else {
				// Events past the cutoff that are still held (dead
				// letters, pending jobs) are read again every pass: see
				// from the read pool whether any can go before taking
				// the write lock.
				found, err := s.anyEvent(ctx, rule, cut, ids)
				if err != nil {
					return fmt.Errorf("prune claims: %w", err)
				}
				if !found {
					if done {
						return nil
					}
					continue
				}
				if err := s.deleteClaims(ctx, cut, ids, res); err != nil {
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
// any event; their counts go to pruned_totals first. Foreign keys are on:
// children go first.
func (s *Store) deleteClaims(ctx context.Context, cut string, ids []int64, res *hookwarden.PruneResult) error {
	var events, receipts, jobs, attempts int
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		events, receipts, jobs, attempts = 0, 0, 0, 0
		keep, err := selectIDs(ctx, tx, `SELECT e.id FROM events e WHERE e.id IN (SELECT value FROM json_each(?2)) AND `+claimRule(res),
			cut, idSet(ids))
		if err != nil {
			return fmt.Errorf("recheck: %w", err)
		}
		if len(keep) == 0 {
			return nil
		}
		set := idSet(keep)
		batches, err := selectIDs(ctx, tx, `SELECT DISTINCT re.receipt_id FROM receipt_events re WHERE re.event_ref IN (SELECT value FROM json_each(?))`, set)
		if err != nil {
			return fmt.Errorf("find batch receipts: %w", err)
		}
		if err := foldTotalsTx(ctx, tx, set, true); err != nil {
			return err
		}
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
				AND NOT EXISTS (SELECT 1 FROM receipt_events WHERE receipt_id = receipts.id)`, idSet(batches), &receipts},
			{`DELETE FROM prune_held WHERE event_ref IN (SELECT value FROM json_each(?))`, set, nil},
			{`DELETE FROM events WHERE id IN (SELECT value FROM json_each(?))`, set, &events},
		} {
			if err := execCount(ctx, tx, st.n, st.q, st.arg); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
		}
		if err := advanceCursorTx(ctx, tx, "events", "events", 0); err != nil {
			return err
		}
		return advanceCursorTx(ctx, tx, "receipts", "receipts", 0)
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
	cut := fmtTime(res.PayloadCutoff)
	held, err := selectIDs(ctx, s.rdb, `SELECT event_ref FROM prune_held ORDER BY event_ref`)
	if err != nil {
		return fmt.Errorf("prune payloads: read held events: %w", err)
	}
	for lo := 0; lo < len(held); lo += opt.BatchSize {
		ids := held[lo:min(lo+opt.BatchSize, len(held))]
		if !opt.DryRun {
			// Most held events are still held (dead letters wait for a
			// human): see so from the read pool, without the write lock.
			found, err := s.anyEvent(ctx, prunableEvent, cut, ids)
			if err != nil {
				return fmt.Errorf("prune payloads: recheck held events: %w", err)
			}
			if !found {
				continue
			}
		}
		if err := s.foldBatch(ctx, opt, cut, ids, 0, res); err != nil {
			return err
		}
	}

	after, err := s.cursor(ctx, "events")
	if err != nil {
		return fmt.Errorf("prune payloads: %w", err)
	}
	for {
		ids, done, err := s.nextIDs(ctx, "events", "claimed_at", after, cut, opt.BatchSize)
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
			break
		}
	}
	if opt.DryRun {
		return nil
	}

	if after, err = s.cursor(ctx, "receipts"); err != nil {
		return fmt.Errorf("prune payloads: %w", err)
	}
	for {
		ids, done, err := s.nextIDs(ctx, "receipts", "received_at", after, cut, opt.BatchSize)
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
			return nil
		}
	}
}

// foldBatch folds (or, in a dry run, counts) the prunable events among ids;
// advance, when set, is the walk's new cursor.
func (s *Store) foldBatch(ctx context.Context, opt hookwarden.PruneOptions, cut string, ids []int64, advance int64, res *hookwarden.PruneResult) error {
	if opt.DryRun {
		var n int
		var bytes int64
		// Bodies: the events' own receipts, and the batches that would go
		// with them (every event they carry pruned or in this batch).
		err := s.rdb.QueryRowContext(ctx, `
WITH p AS (SELECT e.id FROM events e WHERE e.id IN (SELECT value FROM json_each(?2)) AND `+prunableEvent+`)
SELECT (SELECT count(*) FROM p),
	(SELECT COALESCE(sum(length(r.body)), 0) FROM receipts r WHERE r.event_ref IN p)
	+ (SELECT COALESCE(sum(length(r.body)), 0) FROM receipts r
		WHERE r.kind = 'batch' AND r.id IN (SELECT receipt_id FROM receipt_events WHERE event_ref IN p)
		AND NOT EXISTS (SELECT 1 FROM receipt_events re JOIN events e ON e.id = re.event_ref
			WHERE re.receipt_id = r.id AND e.pruned_at IS NULL AND e.id NOT IN p))`, cut, idSet(ids)).Scan(&n, &bytes)
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
// claims, in one write transaction: totals first, then the summary on the
// events row, then the deletes (children first). The others, not pruned
// yet, go to prune_held to be looked at again on the next pass.
func (s *Store) foldEvents(ctx context.Context, cut string, ids []int64, advance int64, res *hookwarden.PruneResult) error {
	var events, receipts, jobs, attempts int
	var bytes int64
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		events, receipts, jobs, attempts, bytes = 0, 0, 0, 0, 0
		all := idSet(ids)
		keep, err := selectIDs(ctx, tx, `SELECT e.id FROM events e WHERE e.id IN (SELECT value FROM json_each(?2)) AND `+prunableEvent,
			cut, all)
		if err != nil {
			return fmt.Errorf("recheck: %w", err)
		}
		set := idSet(keep)
		if len(keep) > 0 {
			if err := s.foldTx(ctx, tx, set, &receipts, &jobs, &attempts, &bytes); err != nil {
				return err
			}
			events = len(keep)
		}
		// The rest, unless gone or pruned, waits in prune_held.
		if err := execCount(ctx, tx, nil, `
INSERT OR IGNORE INTO prune_held (event_ref)
SELECT e.id FROM events e WHERE e.id IN (SELECT value FROM json_each(?1)) AND e.pruned_at IS NULL
	AND e.id NOT IN (SELECT value FROM json_each(?2))`, all, set); err != nil {
			return fmt.Errorf("hold: %w", err)
		}
		if advance > 0 {
			return advanceCursorTx(ctx, tx, "events", "events", advance)
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

// foldTx folds the events in set (all prunable) into their claims.
func (s *Store) foldTx(ctx context.Context, tx *sql.Tx, set string, receipts, jobs, attempts *int, bytes *int64) error {
	batches, err := selectIDs(ctx, tx, `SELECT DISTINCT receipt_id FROM receipt_events WHERE event_ref IN (SELECT value FROM json_each(?))`, set)
	if err != nil {
		return fmt.Errorf("find batch receipts: %w", err)
	}
	if err := foldTotalsTx(ctx, tx, set, false); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `
UPDATE events AS e SET
	receipts = COALESCE(e.receipts, 0)
		+ (SELECT count(*) FROM receipts r WHERE r.event_ref = e.id)
		+ (SELECT count(*) FROM receipt_events re WHERE re.event_ref = e.id),
	jobs = (SELECT count(*) FROM jobs j WHERE j.event_ref = e.id),
	attempts = (SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.event_ref = e.id),
	last_received_at = max(e.claimed_at, COALESCE(e.last_received_at, ''),
		COALESCE((SELECT max(r.received_at) FROM receipts r WHERE r.event_ref = e.id), ''),
		COALESCE((SELECT max(r.received_at) FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
			WHERE re.event_ref = e.id), '')),
	delivered_at = (SELECT max(j.finished_at) FROM jobs j WHERE j.event_ref = e.id),
	pruned_at = ?2,
	body_sha256 = x'',
	body = NULL
WHERE e.id IN (SELECT value FROM json_each(?1))`, set, fmtTime(s.now())); err != nil {
		return fmt.Errorf("summarise events: %w", err)
	}
	sumBodies := func(q string, arg string) error {
		return eachRow(ctx, tx, q, func(rows *sql.Rows) error {
			var n sql.NullInt64
			if err := rows.Scan(&n); err != nil {
				return err
			}
			*receipts++
			*bytes += n.Int64
			return nil
		}, arg)
	}
	for _, st := range []struct {
		q   string
		arg string
		n   *int
	}{
		{`DELETE FROM attempts WHERE job_id IN (SELECT id FROM jobs WHERE event_ref IN (SELECT value FROM json_each(?)))`, set, attempts},
		{`DELETE FROM jobs WHERE event_ref IN (SELECT value FROM json_each(?))`, set, jobs},
		{`DELETE FROM receipt_events WHERE event_ref IN (SELECT value FROM json_each(?))`, set, nil},
		{`DELETE FROM prune_held WHERE event_ref IN (SELECT value FROM json_each(?))`, set, nil},
	} {
		if err := execCount(ctx, tx, st.n, st.q, st.arg); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	if err := sumBodies(`DELETE FROM receipts WHERE event_ref IN (SELECT value FROM json_each(?)) RETURNING length(body)`, set); err != nil {
		return fmt.Errorf("delete receipts: %w", err)
	}
	// A batch receipt goes with the last event it carried.
	if err := sumBodies(`DELETE FROM receipts WHERE id IN (SELECT value FROM json_each(?)) AND kind = 'batch'
		AND NOT EXISTS (SELECT 1 FROM receipt_events WHERE receipt_id = receipts.id) RETURNING length(body)`, idSet(batches)); err != nil {
		return fmt.Errorf("delete batch receipts: %w", err)
	}
	return advanceCursorTx(ctx, tx, "receipts", "receipts", 0)
}

// foldLate folds into their pruned events the receipts among ids that came
// after the event was pruned (late duplicates, direct or in a batch whose
// every event is pruned), and advances the receipts walk to advance.
// Anything else (receipts of events not pruned, quarantined requests) is
// left alone: the event tier or nobody removes it.
func (s *Store) foldLate(ctx context.Context, cut string, ids []int64, advance int64, res *hookwarden.PruneResult) error {
	var receipts int
	var bytes int64
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		receipts, bytes = 0, 0
		all := idSet(ids)
		late, err := selectIDs(ctx, tx, `
SELECT r.id FROM receipts r JOIN events e ON e.id = r.event_ref
WHERE r.id IN (SELECT value FROM json_each(?2)) AND r.received_at < ?1 AND e.pruned_at IS NOT NULL
UNION ALL
SELECT r.id FROM receipts r
WHERE r.id IN (SELECT value FROM json_each(?2)) AND r.received_at < ?1 AND r.kind = 'batch'
	AND EXISTS (SELECT 1 FROM receipt_events re WHERE re.receipt_id = r.id)
	AND NOT EXISTS (SELECT 1 FROM receipt_events re JOIN events e ON e.id = re.event_ref
		WHERE re.receipt_id = r.id AND e.pruned_at IS NULL)`, cut, all)
		if err != nil {
			return fmt.Errorf("find late receipts: %w", err)
		}
		if len(late) > 0 {
			set := idSet(late)
			// Per event: the receipts that carried it, direct or linked.
			const carried = `
	SELECT r.event_ref AS ref, r.kind AS kind, r.received_at AS at FROM receipts r
	WHERE r.id IN (SELECT value FROM json_each(?1)) AND r.event_ref IS NOT NULL
	UNION ALL
	SELECT re.event_ref, re.kind, r.received_at FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
	WHERE re.receipt_id IN (SELECT value FROM json_each(?1))`
			if _, err := tx.ExecContext(ctx, `
INSERT INTO pruned_totals (name, kind, n, at)
SELECT name, kind, sum(n), max(at) FROM (
	SELECT e.source AS name, c.kind AS kind, 1 AS n, NULL AS at FROM (`+carried+`) c JOIN events e ON e.id = c.ref
	WHERE c.kind IN ('duplicate', 'divergent')
	UNION ALL
	SELECT e.source, 'last_received', 0, c.at FROM (`+carried+`) c JOIN events e ON e.id = c.ref)
WHERE true GROUP BY name, kind
`+totalsUpsert, set); err != nil {
				return fmt.Errorf("fold totals: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `
UPDATE events AS e SET
	receipts = COALESCE(e.receipts, 0) + (SELECT count(*) FROM (`+carried+`) c WHERE c.ref = e.id),
	last_received_at = max(COALESCE(e.last_received_at, ''), COALESCE((SELECT max(c.at) FROM (`+carried+`) c WHERE c.ref = e.id), ''))
WHERE e.id IN (SELECT ref FROM (`+carried+`))`, set); err != nil {
				return fmt.Errorf("summarise events: %w", err)
			}
			if err := execCount(ctx, tx, nil, `DELETE FROM receipt_events WHERE receipt_id IN (SELECT value FROM json_each(?))`, set); err != nil {
				return fmt.Errorf("delete links: %w", err)
			}
			err := eachRow(ctx, tx, `DELETE FROM receipts WHERE id IN (SELECT value FROM json_each(?)) RETURNING length(body)`,
				func(rows *sql.Rows) error {
					var n sql.NullInt64
					if err := rows.Scan(&n); err != nil {
						return err
					}
					receipts++
					bytes += n.Int64
					return nil
				}, set)
			if err != nil {
				return fmt.Errorf("delete late receipts: %w", err)
			}
		}
		return advanceCursorTx(ctx, tx, "receipts", "receipts", advance)
	})
	if err != nil {
		return err
	}
	res.PayloadReceipts += receipts
	res.PayloadBytes += bytes
	return nil
}
