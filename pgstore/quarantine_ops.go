package pgstore

// The operator's side of held requests, with sqlitestore's semantics:
// release (the claim through Record's own path, without the body check),
// drop, and their retention beside the body keys' and the seen tokens'.
// Whatever changes or removes a held row first takes the advisory lock
// Record takes to count a copy on it (heldKey), so that a copy arriving at
// that moment is counted on the row before, or held anew after.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// releasing is a ReleaseQuarantined call run as a recording, so that the
// claim and the jobs are made as Record makes them.
type releasing struct {
	rel  hookwarden.Release
	out  hookwarden.Released
	fail error // refused: nothing written
}

// errRefused rolls back a release that is refused (releasing.fail says why).
var errRefused = errors.New("release refused")

// ReleaseQuarantined claims a held request's event id and creates its
// jobs, in one transaction, skipping the body-replay check (an operator
// looked). The held receipt is copied as the event's accepted receipt and
// the quarantine row is marked released. An id already claimed fails with
// ErrAlreadyClaimed, a released request with ErrReleased, an unknown one
// with ErrNotFound, and each changes nothing.
func (s *Store) ReleaseQuarantined(ctx context.Context, rel hookwarden.Release) (hookwarden.Released, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	op := &releasing{rel: rel}
	rc := &recording{s: s, r: &hookwarden.Receipt{}, now: s.now(), release: op}
	err := runAgain(ctx, func() error {
		_, err := rc.run(ctx)
		return err
	})
	switch {
	case errors.Is(err, errRefused):
		return hookwarden.Released{}, op.fail
	case err != nil:
		return hookwarden.Released{}, fmt.Errorf("release quarantined request %d: %w", rel.ReceiptID, err)
	}
	return op.out, nil
}

// releaseHeld is the release's transaction (recording.record runs it).
func (rc *recording) releaseHeld(ctx context.Context) error {
	op, tx := rc.release, rc.tx
	op.out, op.fail = hookwarden.Released{}, nil
	refuse := func(err error) error {
		op.fail = err
		return errRefused
	}
	var sum []byte
	err := tx.QueryRow(ctx, `SELECT source, body_sha256 FROM quarantine WHERE receipt_id = $1`, op.rel.ReceiptID).Scan(&rc.r.Source, &sum)
	if errors.Is(err, pgx.ErrNoRows) {
		return refuse(fmt.Errorf("quarantined request %d: %w", op.rel.ReceiptID, hookwarden.ErrNotFound))
	}
	if err != nil {
		return fmt.Errorf("find quarantined request: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+heldKey("$1", "$2")+`)`, rc.r.Source, sum); err != nil {
		return fmt.Errorf("lock quarantined body: %w", err)
	}
	// Read again under the lock: a copy or another release may have
	// committed since.
	var candidate string
	var released *time.Time
	r := rc.r
	err = tx.QueryRow(ctx, `SELECT q.source, COALESCE(q.candidate_event_id, ''), q.released_at, r.headers, r.body,
		r.body_sha256, r.remote_addr, r.received_at
		FROM quarantine q JOIN receipts r ON r.id = q.receipt_id WHERE q.receipt_id = $1 FOR UPDATE OF q`, op.rel.ReceiptID).Scan(
		&r.Source, &candidate, &released, &rc.headers, &r.Body, &sum, &r.RemoteAddr, &r.ReceivedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return refuse(fmt.Errorf("quarantined request %d: %w", op.rel.ReceiptID, hookwarden.ErrNotFound))
	case err != nil:
		return fmt.Errorf("find quarantined request: %w", err)
	case released != nil:
		return refuse(fmt.Errorf("quarantined request %d: %w at %s", op.rel.ReceiptID, hookwarden.ErrReleased,
			released.UTC().Format(time.RFC3339)))
	}
	id := op.rel.EventID
	if id == "" {
		id = candidate
	}
	if id == "" {
		return refuse(fmt.Errorf("quarantined request %d carried no event id: give one with --event-id", op.rel.ReceiptID))
	}
	copy(r.BodySHA256[:], sum)
	r.Events = []hookwarden.Event{{ID: id, Type: op.rel.EventType, BodySHA256: r.BodySHA256, Destinations: op.rel.Destinations}}
	ev := &r.Events[0]
	// Claimed now, by the store's clock; its receipt keeps the time the
	// request came, so events show tells the true story.
	if err := tx.QueryRow(ctx, `SELECT COALESCE($1::timestamptz, now())`, rc.now).Scan(&rc.at); err != nil {
		return fmt.Errorf("read the clock: %w", err)
	}
	ref, isNew, _, _, err := rc.claim(ctx, ev)
	if err != nil {
		return err
	}
	if !isNew {
		return refuse(fmt.Errorf("%s/%s: %w; request %d stays quarantined", r.Source, id, hookwarden.ErrAlreadyClaimed, op.rel.ReceiptID))
	}
	if r.Body == nil {
		r.Body = []byte{}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
		VALUES ($1, $2, 'accepted', $3, $4, $5, $6, ''::bytea)`, r.Source, ref, r.ReceivedAt, r.RemoteAddr, rc.headers, r.Body); err != nil {
		return fmt.Errorf("insert released receipt: %w", err)
	}
	n, err := rc.jobs(ctx, ref, ev)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO body_keys (source, body_sha256, event_id, claimed_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (source, body_sha256) DO NOTHING`, r.Source, sum, id, rc.at); err != nil {
		return fmt.Errorf("insert body key: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE quarantine SET released_at = $1, released_event_id = $2 WHERE receipt_id = $3`,
		rc.at, id, op.rel.ReceiptID); err != nil {
		return fmt.Errorf("mark released: %w", err)
	}
	op.out = hookwarden.Released{Source: r.Source, EventID: id, Jobs: n}
	if op.rel.Audit != nil {
		e := *op.rel.Audit
		e.Action, e.ReceiptID = "release", op.rel.ReceiptID
		e.Events = []hookwarden.EventKey{{Source: r.Source, EventID: id}}
		if e.Result, err = json.Marshal(op.out); err != nil {
			return err
		}
		if _, err := rc.s.auditTx(ctx, tx, &e); err != nil {
			return err
		}
	}
	return nil
}

// DropQuarantined deletes a held request (its quarantine row and its held
// receipt); a released one's event keeps its own copy. Its copies stay
// counted in stats, as after retention. audit, when set, is recorded in
// the same transaction.
func (s *Store) DropQuarantined(ctx context.Context, receiptID int64, audit *hookwarden.AuditEntry) error {
	var found bool
	err := s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		found = false
		var source string
		var sum []byte
		err := tx.QueryRow(ctx, `SELECT source, body_sha256 FROM quarantine WHERE receipt_id = $1`, receiptID).Scan(&source, &sum)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find quarantined request: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+heldKey("$1", "$2")+`)`, source, sum); err != nil {
			return fmt.Errorf("lock quarantined body: %w", err)
		}
		var count int64
		var last time.Time
		err = tx.QueryRow(ctx, `DELETE FROM quarantine WHERE receipt_id = $1 RETURNING count, last_at`, receiptID).Scan(&count, &last)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // dropped meanwhile
		}
		if err != nil {
			return fmt.Errorf("drop quarantined request: %w", err)
		}
		found = true
		if err := foldHeldTx(ctx, tx, source, count, last); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM receipts WHERE id = $1 AND kind = 'quarantined'`, receiptID); err != nil {
			return fmt.Errorf("drop quarantined receipt: %w", err)
		}
		if audit != nil {
			e := *audit
			e.Action, e.ReceiptID = "drop", receiptID
			if _, err := s.auditTx(ctx, tx, &e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("quarantined request %d: %w", receiptID, hookwarden.ErrNotFound)
	}
	return nil
}

// foldHeldTx keeps in pruned_totals what removing held requests of source
// takes away (count copies, the last at last), so stats keep counting them
// after retention or an operator's drop. One statement, rows in key order,
// as foldTotalsTx writes them.
func foldHeldTx(ctx context.Context, tx pgx.Tx, source string, count int64, last time.Time) error {
	if _, err := tx.Exec(ctx, `INSERT INTO pruned_totals (name, kind, n, at)
		VALUES ($1, 'last_received', 0, $3::timestamptz), ($1, 'quarantined', $2, NULL) `+totalsUpsert,
		source, count, last.UTC()); err != nil {
		return fmt.Errorf("fold totals: %w", err)
	}
	return nil
}

// pruneBodyKeys deletes the body keys claimed before the claims cutoff, in
// id order (insert order), in small batches.
func (s *Store) pruneBodyKeys(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	cut := res.ClaimCutoff
	if opt.DryRun {
		// Nothing leaves, so a walk would see the same rows again.
		bctx, cancel := s.bound(ctx)
		defer cancel()
		if err := s.pool.QueryRow(bctx, `SELECT count(*) FROM body_keys WHERE claimed_at < $1`, cut).Scan(&res.BodyKeysDeleted); err != nil {
			return fmt.Errorf("prune body keys: %w", err)
		}
		return nil
	}
	for {
		ids, _, done, err := s.nextIDs(ctx, "body_keys", "claimed_at", 0, cut, opt.BatchSize)
		if err != nil {
			return fmt.Errorf("prune body keys: %w", err)
		}
		if len(ids) > 0 {
			n := 0
			if err := s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error {
				n = 0
				return execCount(ctx, tx, &n, `DELETE FROM body_keys WHERE id = ANY($1) AND claimed_at < $2`, ids, cut)
			}); err != nil {
				return fmt.Errorf("prune body keys: %w", err)
			}
			res.BodyKeysDeleted += n
			if err := hookwarden.Pause(ctx, opt.Pause); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// quarantineExpired selects the quarantine rows retention.quarantine
// removes; $1 is the cutoff.
const quarantineExpired = `((released_at IS NULL AND last_at < $1) OR released_at < $1)`

// pruneQuarantine deletes the held requests past retention.quarantine with
// their held receipts, a batch at a time. The quarantine is small (one row
// per distinct held body), so it is read whole. A row whose lock Record
// holds (a copy arriving) is left: it is not expired any more.
func (s *Store) pruneQuarantine(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	cut := res.QuarantineCutoff
	if opt.DryRun {
		bctx, cancel := s.bound(ctx)
		defer cancel()
		if err := s.pool.QueryRow(bctx, `SELECT count(*) FROM quarantine WHERE `+quarantineExpired, cut).Scan(&res.QuarantineDeleted); err != nil {
			return fmt.Errorf("prune quarantine: %w", err)
		}
		return nil
	}
	for {
		n, listed := 0, 0
		err := s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error {
			n, listed = 0, 0
			type total struct {
				n    int64
				last time.Time
			}
			totals := map[string]total{}
			var ids []int64
			// The lock is tried on the batch only (the LIMIT comes first),
			// and the DELETE checks again on the row's newest version.
			rows, err := tx.Query(ctx, `
WITH batch AS MATERIALIZED (SELECT source, body_sha256 FROM quarantine WHERE `+quarantineExpired+` LIMIT $2),
	free AS MATERIALIZED (SELECT source, body_sha256, pg_try_advisory_xact_lock(`+heldKey("source", "body_sha256")+`) AS locked FROM batch)
DELETE FROM quarantine q USING free
WHERE free.locked AND q.source = free.source AND q.body_sha256 = free.body_sha256 AND `+quarantineExpired+`
RETURNING q.receipt_id, q.source, q.count, q.last_at, (SELECT count(*) FROM batch)`, cut, opt.BatchSize)
			if err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			for rows.Next() {
				var id, count int64
				var source string
				var last time.Time
				if err := rows.Scan(&id, &source, &count, &last, &listed); err != nil {
					rows.Close()
					return fmt.Errorf("delete: %w", err)
				}
				ids = append(ids, id)
				t := totals[source]
				if last.After(t.last) {
					t.last = last
				}
				totals[source] = total{t.n + count, t.last}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			n = len(ids)
			if n == 0 {
				return nil
			}
			for _, source := range sortedKeys(totals) {
				if err := foldHeldTx(ctx, tx, source, totals[source].n, totals[source].last); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM receipts WHERE id = ANY($1) AND kind = 'quarantined'`, ids); err != nil {
				return fmt.Errorf("delete receipts: %w", err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("prune quarantine: %w", err)
		}
		res.QuarantineDeleted += n
		if n == 0 || listed < opt.BatchSize {
			return nil
		}
		if err := hookwarden.Pause(ctx, opt.Pause); err != nil {
			return err
		}
	}
}

// pruneTokens deletes the one-time tokens whose window has closed, a batch
// at a time through their expiry index: a request carrying one is refused
// as stale before the store sees it. An unexpired token is never deleted.
func (s *Store) pruneTokens(ctx context.Context, opt hookwarden.PruneOptions, now time.Time, res *hookwarden.PruneResult) error {
	if opt.DryRun {
		bctx, cancel := s.bound(ctx)
		defer cancel()
		if err := s.pool.QueryRow(bctx, `SELECT count(*) FROM seen_tokens WHERE expires_at <= $1`, now).Scan(&res.TokensDeleted); err != nil {
			return fmt.Errorf("prune seen tokens: %w", err)
		}
		return nil
	}
	res.TokensDeleted = 0
	for {
		n := 0
		err := s.pruneWrite(ctx, func(ctx context.Context, tx pgx.Tx) error {
			n = 0
			return execCount(ctx, tx, &n, `DELETE FROM seen_tokens WHERE (source, token_sha256) IN
				(SELECT source, token_sha256 FROM seen_tokens WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)
				AND expires_at <= $1`, now, opt.BatchSize)
		})
		if err != nil {
			return fmt.Errorf("prune seen tokens: %w", err)
		}
		res.TokensDeleted += n
		if n < opt.BatchSize {
			return nil
		}
		if err := hookwarden.Pause(ctx, opt.Pause); err != nil {
			return err
		}
	}
}
