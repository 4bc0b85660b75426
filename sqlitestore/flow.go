package sqlitestore

// Flow control (docs/design.md, "Flow control"): pause, probes, the rate's
// token bucket and the order of keyed jobs, kept in destination_flow and
// jobs.order_key so that every process on the file sees the same state.
// The policies come from the configuration (SetFlow); the lease, the
// finish, NextDue and the direct hand-over apply them inside the writer's
// transactions, so one serve's limits hold whatever its slots do.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hookwarden/hookwarden"
)

// waitingAt is hookwarden.WaitingDue as stored.
var waitingAt = fmtTime(hookwarden.WaitingDue)

// flowRow is a destination's row of destination_flow (zero: no row).
type flowRow struct {
	pause     sql.NullString
	failures  int
	nextProbe sql.NullString
	tokens    sql.NullFloat64
	tokensAt  sql.NullString
}

const flowSelect = `SELECT pause, failures, next_probe_at, tokens, tokens_at FROM destination_flow WHERE destination = ?`

// scanFlow reads a flowSelect row (no row: the zero state).
func scanFlow(row *sql.Row, dest string) (flowRow, error) {
	var f flowRow
	err := row.Scan(&f.pause, &f.failures, &f.nextProbe, &f.tokens, &f.tokensAt)
	if errors.Is(err, sql.ErrNoRows) {
		return flowRow{}, nil
	}
	if err != nil {
		return flowRow{}, fmt.Errorf("read flow state of %s: %w", dest, err)
	}
	return f, nil
}

// readFlowTx reads dest's flow state in the writer's transaction.
func (s *Store) readFlowTx(ctx context.Context, tx *sql.Tx, dest string) (flowRow, error) {
	return scanFlow(tx.StmtContext(ctx, s.fstmts.read).QueryRowContext(ctx, dest), dest)
}

// readFlow reads dest's flow state on the read pool.
func (s *Store) readFlow(ctx context.Context, dest string) (flowRow, error) {
	if s.reads.flow == nil { // a read-only store prepares nothing
		return scanFlow(s.rdb.QueryRowContext(ctx, flowSelect, dest), dest)
	}
	return scanFlow(s.reads.flow.QueryRowContext(ctx, dest), dest)
}

// flowStmts are flow control's writer statements, prepared once on the
// writer's connection like writeStmts: they run in every lease and finish.
type flowStmts struct {
	read, leased, refund, jobOf, reset, count, pauseAuto, nextOfKey, keyBusy, keyPending, keyedJob *sql.Stmt
}

func (w *flowStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&w.read, flowSelect},
		{&w.leased, `INSERT INTO destination_flow (destination, tokens, tokens_at, next_probe_at) VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (destination) DO UPDATE SET
			tokens = COALESCE(?2, tokens), tokens_at = COALESCE(?3, tokens_at), next_probe_at = COALESCE(?4, next_probe_at)`},
		{&w.refund, `UPDATE jobs SET attempts = attempts - 1 WHERE id = ? AND attempts > 0`},
		{&w.jobOf, `SELECT destination, order_key FROM jobs WHERE id = ?`},
		{&w.reset, `UPDATE destination_flow SET failures = 0,
			pause = CASE pause WHEN 'auto' THEN NULL ELSE pause END,
			next_probe_at = CASE pause WHEN 'auto' THEN NULL ELSE next_probe_at END
			WHERE destination = ? AND (failures != 0 OR pause = 'auto')`},
		{&w.count, `INSERT INTO destination_flow (destination, failures) VALUES (?, 1)
			ON CONFLICT (destination) DO UPDATE SET failures = failures + 1`},
		// The count reaching pause_after pauses an unpaused destination;
		// the first probe comes one probe interval later.
		{&w.pauseAuto, `UPDATE destination_flow SET pause = 'auto', paused_at = ?, next_probe_at = ?
			WHERE destination = ? AND pause IS NULL AND failures >= ?`},
		{&w.nextOfKey, `UPDATE jobs SET next_at = ?1 WHERE id = (
			SELECT id FROM jobs WHERE destination = ?2 AND order_key = ?3 AND state = 'pending' AND next_at = ?4 ORDER BY id LIMIT 1)`},
		{&w.keyBusy, `SELECT count(*) FROM (SELECT 1 FROM jobs
			WHERE destination = ? AND order_key = ? AND state = 'pending' AND next_at != ? AND id != ? LIMIT 1)`},
		// Any pending job of the key: then one of them is its head (the
		// finish that ends a head makes the next one due in its own
		// transaction). One index probe, however long the key's queue.
		{&w.keyPending, `SELECT EXISTS (SELECT 1 FROM jobs WHERE destination = ? AND order_key = ? AND state = 'pending')`},
		{&w.keyedJob, `INSERT INTO jobs (event_ref, destination, state, attempts, next_at, created_at, order_key)
			VALUES (?, ?, 'pending', 0, ?, ?, ?)`},
	} {
		st, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			w.close()
			return fmt.Errorf("prepare statement: %w", err)
		}
		*p.dst = st
	}
	return nil
}

func (w *flowStmts) close() {
	for _, st := range []*sql.Stmt{w.read, w.leased, w.refund, w.jobOf, w.reset, w.count, w.pauseAuto, w.nextOfKey,
		w.keyBusy, w.keyPending, w.keyedJob} {
		if st != nil {
			st.Close()
		}
	}
}

// SetFlow makes policies the flow control of their destinations. A
// destination that is not ordered (any more) has its waiting jobs made due
// now: nothing would ever release them otherwise.
func (s *Store) SetFlow(ctx context.Context, policies []hookwarden.FlowPolicy) error {
	unordered := s.flow.Set(policies)
	if len(unordered) == 0 {
		return nil
	}
	return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		for _, d := range unordered {
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET next_at = ? WHERE destination = ? AND state = 'pending' AND next_at = ?`,
				fmtTime(s.now()), d, waitingAt); err != nil {
				return fmt.Errorf("release waiting jobs of %s: %w", d, err)
			}
		}
		return nil
	})
}

func (s *Store) policy(dest string) hookwarden.FlowPolicy { return s.flow.Policy(dest) }

func (s *Store) finishHooks() bool { return s.flow.FinishHooks() }

// leaseGate is what flow control allows one lease of a destination.
type leaseGate struct {
	max    int     // jobs it may take
	probe  bool    // the destination is paused automatically: this lease is its probe
	tokens float64 // rate: the bucket now (refilled), before this lease
	rated  bool
}

// gateTx reads dest's flow state in the lease's transaction and says how
// many of max jobs may be leased now.
func (s *Store) gateTx(ctx context.Context, tx *sql.Tx, dest string, max int, now time.Time) (leaseGate, error) {
	f, err := s.readFlowTx(ctx, tx, dest)
	if err != nil {
		return leaseGate{}, err
	}
	p := s.policy(dest)
	g := leaseGate{max: max}
	switch f.pause.String {
	case hookwarden.PauseManual:
		return leaseGate{}, nil
	case hookwarden.PauseAuto:
		if t, err := parseNullTime(f.nextProbe); err == nil && now.Before(t) {
			return leaseGate{}, nil
		}
		g.max, g.probe = 1, true
	}
	if !p.Rate.IsZero() {
		g.rated = true
		g.tokens = bucket(p.Rate, f, now)
		g.max = min(g.max, int(math.Floor(g.tokens)))
	}
	return g, nil
}

// bucket is the rate's token bucket at now: what was left at tokens_at,
// refilled at N per period, never above N (a full bucket when new).
func bucket(r hookwarden.Rate, f flowRow, now time.Time) float64 {
	n := float64(r.N)
	at, err := parseNullTime(f.tokensAt)
	if !f.tokens.Valid || err != nil || at.IsZero() {
		return n
	}
	elapsed := max(now.Sub(at), 0)
	return min(n, f.tokens.Float64+float64(elapsed)/float64(r.Per)*n)
}

// leasedTx records in dest's flow state what a lease of n jobs took: the
// tokens of the rate, the time of the next probe.
func (s *Store) leasedTx(ctx context.Context, tx *sql.Tx, dest string, g leaseGate, n int, now time.Time) error {
	if n == 0 || (!g.rated && !g.probe) {
		return nil
	}
	p := s.policy(dest)
	var tokens, tokensAt, probeAt any
	if g.rated {
		tokens, tokensAt = g.tokens-float64(n), fmtTime(now)
	}
	if g.probe {
		probeAt = fmtTime(now.Add(max(p.ProbeEvery, time.Second)))
	}
	if _, err := tx.StmtContext(ctx, s.fstmts.leased).ExecContext(ctx, dest, tokens, tokensAt, probeAt); err != nil {
		return fmt.Errorf("record lease in flow state of %s: %w", dest, err)
	}
	return nil
}

// finishedTx applies a finished attempt to flow control, after its verdict
// was applied (matched: the attempt was the job's current one). A failed
// probe gives its attempt back; a retryable failure counts toward
// pause_after, a success resets the count and ends an auto pause; a keyed
// job delivered or dead makes the next of its key due.
func (s *Store) finishedTx(ctx context.Context, tx *sql.Tx, a hookwarden.Attempt, matched bool) error {
	if !matched {
		return nil
	}
	// The attempt names its destination (the worker's do); without it,
	// read it, when some policy may need it.
	dest, p := a.Destination, s.policy(a.Destination)
	if dest != "" && !a.Probe && p.PauseAfter == 0 && !p.Ordered {
		return nil
	}
	if dest == "" && !a.Probe && !s.finishHooks() {
		return nil
	}
	st := func(st *sql.Stmt) *sql.Stmt { return tx.StmtContext(ctx, st) }
	if a.Probe && a.Verdict == hookwarden.Retry {
		if _, err := st(s.fstmts.refund).ExecContext(ctx, a.JobID); err != nil {
			return fmt.Errorf("give back the probe's attempt: %w", err)
		}
	}
	var key sql.NullString
	if dest == "" || p.Ordered {
		if err := st(s.fstmts.jobOf).QueryRowContext(ctx, a.JobID).Scan(&dest, &key); err != nil {
			return fmt.Errorf("read finished job %d: %w", a.JobID, err)
		}
		p = s.policy(dest)
	}
	now := s.now()
	switch {
	case a.Verdict == hookwarden.Delivered && (p.PauseAfter > 0 || a.Probe):
		if _, err := st(s.fstmts.reset).ExecContext(ctx, dest); err != nil {
			return fmt.Errorf("reset failures of %s: %w", dest, err)
		}
	case a.Failed && p.PauseAfter > 0:
		if _, err := st(s.fstmts.count).ExecContext(ctx, dest); err != nil {
			return fmt.Errorf("count failure of %s: %w", dest, err)
		}
		if _, err := st(s.fstmts.pauseAuto).ExecContext(ctx,
			fmtTime(now), fmtTime(now.Add(max(p.ProbeEvery, time.Second))), dest, p.PauseAfter); err != nil {
			return fmt.Errorf("pause %s: %w", dest, err)
		}
	}
	if key.Valid && (a.Verdict == hookwarden.Delivered || a.Verdict == hookwarden.Dead) {
		return s.nextOfKeyTx(ctx, tx, dest, key.String, now)
	}
	return nil
}

// nextOfKeyTx makes the oldest waiting job of dest's key due now: its head
// was delivered or dead-lettered.
func (s *Store) nextOfKeyTx(ctx context.Context, tx *sql.Tx, dest, key string, now time.Time) error {
	if _, err := tx.StmtContext(ctx, s.fstmts.nextOfKey).ExecContext(ctx, fmtTime(now), dest, key, waitingAt); err != nil {
		return fmt.Errorf("release the next job of key %q at %s: %w", key, dest, err)
	}
	return nil
}

// keyedJobTx creates the job of an event with an order_by key: due now if
// the key has no pending job, else waiting behind the key's jobs (in id
// order, which is the writer's commit order).
func (s *Store) keyedJobTx(ctx context.Context, tx *sql.Tx, ref int64, dest, key, at string) error {
	var busy bool
	if err := tx.StmtContext(ctx, s.fstmts.keyPending).QueryRowContext(ctx, dest, key).Scan(&busy); err != nil {
		return fmt.Errorf("look up key %q at %s: %w", key, dest, err)
	}
	next := at
	if busy {
		next = waitingAt
	}
	if _, err := tx.StmtContext(ctx, s.fstmts.keyedJob).ExecContext(ctx, ref, dest, next, at, key); err != nil {
		return fmt.Errorf("insert job: %w", err)
	}
	return nil
}

// keyBusyTx reports whether dest's key has a head (a pending job not
// waiting) other than job except: a replayed job of the key then waits
// behind it.
func (s *Store) keyBusyTx(ctx context.Context, tx *sql.Tx, dest, key string, except int64) (bool, error) {
	var n int
	if err := tx.StmtContext(ctx, s.fstmts.keyBusy).QueryRowContext(ctx, dest, key, waitingAt, except).Scan(&n); err != nil {
		return false, fmt.Errorf("look up key %q at %s: %w", key, dest, err)
	}
	return n > 0, nil
}

// orderReplayedTx keeps one head per key among jobs a replay reset (due
// now): in id order, a job whose key has a head already waits behind it.
func (s *Store) orderReplayedTx(ctx context.Context, tx *sql.Tx, ids []int64) error {
	type keyed struct {
		id        int64
		dest, key string
	}
	var jobs []keyed
	if err := eachRow(ctx, tx, `SELECT id, destination, order_key FROM jobs
		WHERE id IN (SELECT value FROM json_each(?)) AND order_key IS NOT NULL ORDER BY id`, func(rows *sql.Rows) error {
		var k keyed
		if err := rows.Scan(&k.id, &k.dest, &k.key); err != nil {
			return err
		}
		jobs = append(jobs, k)
		return nil
	}, idSet(ids)); err != nil {
		return fmt.Errorf("read replayed keyed jobs: %w", err)
	}
	for _, k := range jobs {
		busy, err := s.keyBusyTx(ctx, tx, k.dest, k.key, k.id)
		if err != nil {
			return err
		}
		if busy {
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET next_at = ? WHERE id = ?`, waitingAt, k.id); err != nil {
				return fmt.Errorf("queue replayed job %d behind its key: %w", k.id, err)
			}
		}
	}
	return nil
}

// gateNextDue moves a due time t of dest later where flow control holds
// the lease back; ok=false: nothing will be leased until an operator acts.
func (s *Store) gateNextDue(ctx context.Context, dest string, t time.Time) (time.Time, bool, error) {
	f, err := s.readFlow(ctx, dest)
	if err != nil {
		return time.Time{}, false, err
	}
	switch f.pause.String {
	case hookwarden.PauseManual:
		return time.Time{}, false, nil
	case hookwarden.PauseAuto:
		if p, err := parseNullTime(f.nextProbe); err == nil && p.After(t) {
			t = p
		}
	}
	if r := s.policy(dest).Rate; !r.IsZero() {
		now := s.now()
		if tokens := bucket(r, f, now); tokens < 1 {
			wait := time.Duration((1 - tokens) / float64(r.N) * float64(r.Per))
			if at := now.Add(wait); at.After(t) {
				t = at
			}
		}
	}
	return t, true, nil
}

// directAllowed reports whether a new job of dest may go straight to a
// slot: not where a rate or an order must be kept (the lease keeps them),
// nor while the destination is paused. The paused state is read once per
// transaction and destination.
func (s *Store) directAllowed(ctx context.Context, tx *sql.Tx, dest string) (bool, error) {
	if p := s.policy(dest); !p.Rate.IsZero() || p.Ordered {
		return false, nil
	}
	if paused, ok := s.txPaused[dest]; ok {
		return !paused, nil
	}
	f, err := s.readFlowTx(ctx, tx, dest)
	if err != nil {
		return false, err
	}
	if s.txPaused == nil {
		s.txPaused = map[string]bool{}
	}
	s.txPaused[dest] = f.pause.Valid
	return !f.pause.Valid, nil
}

// Pause pauses destination manually, with its audit entry, in one
// transaction. Pausing a destination paused manually changes nothing
// (changed false) but is still recorded.
func (s *Store) Pause(ctx context.Context, destination string, audit *hookwarden.AuditEntry) (bool, error) {
	return s.setPause(ctx, destination, "pause", audit)
}

// Resume ends a pause of either kind and forgets the failure streak.
func (s *Store) Resume(ctx context.Context, destination string, audit *hookwarden.AuditEntry) (bool, error) {
	return s.setPause(ctx, destination, "resume", audit)
}

func (s *Store) setPause(ctx context.Context, dest, action string, audit *hookwarden.AuditEntry) (bool, error) {
	if dest == "" {
		return false, errors.New(action + ": no destination")
	}
	var changed bool
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		f, err := s.readFlowTx(ctx, tx, dest)
		if err != nil {
			return err
		}
		now := fmtTime(s.now())
		if action == "pause" {
			changed = f.pause.String != hookwarden.PauseManual
			_, err = tx.ExecContext(ctx, `INSERT INTO destination_flow (destination, pause, paused_at) VALUES (?1, 'manual', ?2)
				ON CONFLICT (destination) DO UPDATE SET pause = 'manual', paused_at = ?2, next_probe_at = NULL
				WHERE pause IS NOT 'manual'`, dest, now)
		} else {
			changed = f.pause.Valid
			_, err = tx.ExecContext(ctx, `UPDATE destination_flow SET pause = NULL, paused_at = NULL, next_probe_at = NULL, failures = 0
				WHERE destination = ?`, dest)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", action, dest, err)
		}
		if audit == nil {
			return nil
		}
		e := *audit
		e.Action = action
		if len(e.Args) == 0 {
			e.Args = []byte(fmt.Sprintf(`{"destination":%q}`, dest))
		}
		e.Result = []byte(fmt.Sprintf(`{"changed":%t}`, changed))
		_, err = s.auditTx(ctx, tx, &e)
		return err
	})
	return changed, err
}

// Paused reads whether each destination named is paused: one flow row each.
func (s *Store) Paused(ctx context.Context, names []string) ([]bool, error) {
	out := make([]bool, len(names))
	for i, name := range names {
		f, err := s.readFlow(ctx, name)
		if err != nil {
			return nil, err
		}
		out[i] = f.pause.Valid
	}
	return out, nil
}

// destinationCountsSQL: destination ?2's pending jobs, from the counters,
// and its leases in flight by ?1. A lease moves next_at to its end, so the
// leases in flight are among the jobs due after now: a range of jobs_due
// that steps over the backlog that is due (a parked backlog of 260,000
// jobs was read whole before), and reads the live leases and the retries
// still waiting.
const destinationCountsSQL = `SELECT
	(SELECT COALESCE(sum(n), 0) FROM counters WHERE name = ?2 AND kind = 'pending'),
	(SELECT count(*) FROM jobs WHERE destination = ?2 AND state = 'pending' AND next_at > ?1 AND leased_until > ?1)`

// Destinations reads the flow state of each destination named: its pause,
// failure streak and next probe, its pending and in-flight jobs
// (destinationCountsSQL) and its blocked keys.
func (s *Store) Destinations(ctx context.Context, names []string) ([]hookwarden.DestinationState, error) {
	out := make([]hookwarden.DestinationState, 0, len(names))
	now := fmtTime(s.now())
	for _, name := range names {
		st := hookwarden.DestinationState{Destination: name, BlockedKeys: []hookwarden.BlockedKey{}}
		f, err := s.readFlow(ctx, name)
		if err != nil {
			return nil, err
		}
		if f.pause.Valid {
			kind := f.pause.String
			st.Paused, st.Pause = true, &kind
		}
		st.ConsecutiveFailures = f.failures
		if t, err := parseNullTime(f.nextProbe); err == nil && !t.IsZero() && f.pause.String == hookwarden.PauseAuto {
			st.NextProbeAt = &t
		}
		if err := s.rdb.QueryRowContext(ctx, destinationCountsSQL, now, name).Scan(&st.Pending, &st.InFlight); err != nil {
			return nil, fmt.Errorf("count jobs of %s: %w", name, err)
		}
		if err := eachRow(ctx, s.rdb, `
SELECT j.order_key, e.event_id, j.attempts, j.last_error,
	COALESCE((SELECT min(started_at) FROM attempts WHERE job_id = j.id AND verdict = 'retry'), j.created_at)
FROM jobs j JOIN events e ON e.id = j.event_ref
WHERE j.destination = ? AND j.state = 'pending' AND j.order_key IS NOT NULL AND j.next_at != ? AND j.last_error IS NOT NULL
ORDER BY j.id LIMIT ?`, func(rows *sql.Rows) error {
			var k hookwarden.BlockedKey
			var since string
			if err := rows.Scan(&k.Key, &k.HeadEventID, &k.Attempts, &k.LastError, &since); err != nil {
				return err
			}
			if err := parseInto(&k.Since, since); err != nil {
				return err
			}
			st.BlockedKeys = append(st.BlockedKeys, k)
			return nil
		}, name, waitingAt, hookwarden.MaxBlockedKeys); err != nil {
			return nil, fmt.Errorf("blocked keys of %s: %w", name, err)
		}
		out = append(out, st)
	}
	return out, nil
}
