package sqlitestore

// Held requests: the quarantine (no event id, or a signed body replayed under
// a fresh id), the body keys that catch such replays, and Mailgun's seen
// tokens. The record-side checks run inside Record's transaction; the
// operator side lists, shows, releases and drops held requests.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden"
)

// held is why Record quarantines a receipt.
type held struct {
	kind      string // hookwarden.QuarantineNoEventID or QuarantineBodyReplayed
	reason    string // free-text detail
	candidate string // the event id it carried, if any
	original  string // the claim whose body it repeats (body_replayed)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// quarantineTx holds the receipt. The same body again only bumps a counter,
// so a misconfigured sender (or a replaying attacker) cannot fill the disk
// with copies; a body that was released and comes again is held anew.
func (s *Store) quarantineTx(ctx context.Context, tx *sql.Tx, r *hookwarden.Receipt, headers, at string, res *hookwarden.RecordResult, h held) error {
	res.Outcome = hookwarden.Quarantined
	res.QuarantineKind = h.kind
	res.Events = nil // nothing was claimed
	var old int64
	var released bool
	err := tx.StmtContext(ctx, s.stmts.quarantineFind).QueryRowContext(ctx, r.Source, r.BodySHA256[:]).Scan(&old, &released)
	exists := err == nil
	switch {
	case exists && !released:
		if _, err := tx.StmtContext(ctx, s.stmts.quarantineBump).ExecContext(ctx, at, r.Source, r.BodySHA256[:]); err != nil {
			return fmt.Errorf("count quarantined repeat: %w", err)
		}
		res.ReceiptID = old
		return nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("find quarantined body: %w", err)
	}
	id, err := s.insertReceipt(ctx, tx, r, nil, "quarantined", headers, at, r.Body, h.reason)
	if err != nil {
		return err
	}
	res.ReceiptID = id
	if exists {
		// The released request's event has its own copy of the receipt.
		if _, err := tx.StmtContext(ctx, s.stmts.quarantineReuse).ExecContext(ctx, r.Source, r.BodySHA256[:], id, h.reason, at,
			h.kind, nullable(h.candidate), nullable(h.original)); err != nil {
			return fmt.Errorf("hold released body again: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM receipts WHERE id = ? AND kind = 'quarantined'`, old); err != nil {
			return fmt.Errorf("hold released body again: %w", err)
		}
		return nil
	}
	if _, err := tx.StmtContext(ctx, s.stmts.quarantineNew).ExecContext(ctx,
		r.Source, r.BodySHA256[:], id, h.reason, at, at, h.kind, nullable(h.candidate), nullable(h.original)); err != nil {
		return fmt.Errorf("insert quarantine: %w", err)
	}
	return nil
}

// bodyKeyTx inserts the body key of a receipt whose signature does not cover
// its event id. conflict is set, with the id that claimed the body first,
// when the body was claimed under another id. The unique key decides, not a
// read before the insert, so the check holds for concurrent copies on any
// store with unique keys (PostgreSQL: INSERT ... ON CONFLICT DO NOTHING).
// The caller quarantines unless the receipt's own id is claimed (then it is
// a plain duplicate, whatever its body: nothing new is delivered either way).
func (s *Store) bodyKeyTx(ctx context.Context, tx *sql.Tx, source string, ev *hookwarden.Event, at string) (orig string, conflict bool, err error) {
	res, err := tx.StmtContext(ctx, s.stmts.bodyKey).ExecContext(ctx, source, ev.BodySHA256[:], ev.ID, at)
	if err != nil {
		return "", false, fmt.Errorf("insert body key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return "", false, fmt.Errorf("insert body key: %w", err)
	} else if n == 1 {
		return "", false, nil
	}
	if err := tx.StmtContext(ctx, s.stmts.bodyKeyLookup).QueryRowContext(ctx, source, ev.BodySHA256[:]).Scan(&orig); err != nil {
		return "", false, fmt.Errorf("look up body key: %w", err)
	}
	return orig, orig != ev.ID, nil // the same id again is a provider retry
}

// claimedTx reports whether source/id is claimed.
func (s *Store) claimedTx(ctx context.Context, tx *sql.Tx, source, id string) (bool, error) {
	if _, _, inLog, err := s.findClaimTx(ctx, tx, source, id); err != nil || inLog {
		return inLog, err
	}
	var ref int64
	err := tx.StmtContext(ctx, s.stmts.lookup).QueryRowContext(ctx, source, id).Scan(&ref, new([]byte))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	}
	return false, fmt.Errorf("look up claimed event: %w", err)
}

// replayedHeld is how a body replayed under id, first claimed as orig, is held.
func replayedHeld(id, orig string) held {
	return held{kind: hookwarden.QuarantineBodyReplayed, reason: "signed body already claimed as event " + orig,
		candidate: id, original: orig}
}

// bodyReplaysMany runs the body-replay check of the receipts of a recordMany
// batch that need it and holds the replays, with what singleTx would do had
// they run one after the other in batch order. It returns the receipts that
// go on to be claimed. The body keys go in with multi-row inserts; a
// receipt whose key was not inserted looks the key up, and is held unless
// its own id is claimed, before or by an earlier receipt of the batch.
func (s *Store) bodyReplaysMany(ctx context.Context, tx *sql.Tx, recs []*recordOp) ([]*recordOp, error) {
	var keyed []*recordOp
	for _, rc := range recs {
		if rc.r.BodyReplayCheck {
			keyed = append(keyed, rc)
		}
	}
	if len(keyed) == 0 {
		return recs, nil
	}
	type bkey struct {
		source, id string
		sum        [32]byte
	}
	inserted := make(map[bkey]bool, len(keyed))
	args := make([]any, 0, 4<<(manyLog-1))
	err := chunks(len(keyed), func(lo, size, l int) error {
		args = args[:0]
		for _, rc := range keyed[lo : lo+size] {
			ev := &rc.r.Events[0]
			args = append(args, rc.r.Source, ev.BodySHA256[:], ev.ID, rc.at)
		}
		rows, err := tx.StmtContext(ctx, s.stmts.many.bodyKey[l]).QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k bkey
			var sum []byte
			if err := rows.Scan(&k.source, &sum, &k.id); err != nil {
				return err
			}
			copy(k.sum[:], sum)
			inserted[k] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("insert body keys: %w", err)
	}

	type key struct{ source, id string }
	here := make(map[key]bool, len(recs))
	out := recs[:0:0]
	for _, rc := range recs {
		ev := &rc.r.Events[0]
		k := key{rc.r.Source, ev.ID}
		if bk := (bkey{rc.r.Source, ev.ID, ev.BodySHA256}); rc.r.BodyReplayCheck && !inserted[bk] && !here[k] {
			var orig string
			if err := tx.StmtContext(ctx, s.stmts.bodyKeyLookup).QueryRowContext(ctx, rc.r.Source, ev.BodySHA256[:]).Scan(&orig); err != nil {
				return nil, fmt.Errorf("look up body key: %w", err)
			}
			if orig != ev.ID {
				claimed, err := s.claimedTx(ctx, tx, rc.r.Source, ev.ID)
				if err != nil {
					return nil, err
				}
				if !claimed {
					*rc.res = hookwarden.RecordResult{}
					if err := s.quarantineTx(ctx, tx, rc.r, rc.headers, rc.at, rc.res, replayedHeld(ev.ID, orig)); err != nil {
						return nil, err
					}
					continue
				}
			}
		} else if rc.r.BodyReplayCheck {
			delete(inserted, bk) // the first receipt with the key inserted it
		}
		here[k] = true
		out = append(out, rc)
	}
	return out, nil
}

// tokenTx inserts the receipt's one-time token and reports whether the
// request may go on: a new token (or one whose row has expired), or the same
// token with the same body (an exact resend, which the claim dedupes).
func (s *Store) tokenTx(ctx context.Context, tx *sql.Tx, r *hookwarden.Receipt) (bool, error) {
	t := r.Token
	res, err := tx.StmtContext(ctx, s.stmts.token).ExecContext(ctx, r.Source, t.SHA256[:], r.BodySHA256[:],
		fmtTime(t.Expires), fmtTime(r.ReceivedAt))
	if err != nil {
		return false, fmt.Errorf("insert seen token: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return false, fmt.Errorf("insert seen token: %w", err)
	} else if n == 1 {
		return true, nil
	}
	var sum []byte
	if err := tx.StmtContext(ctx, s.stmts.tokenLookup).QueryRowContext(ctx, r.Source, t.SHA256[:]).Scan(&sum); err != nil {
		return false, fmt.Errorf("look up seen token: %w", err)
	}
	return bytes.Equal(sum, r.BodySHA256[:]), nil
}

const heldColumns = `q.receipt_id, q.source, r.received_at, COALESCE(q.kind, 'no_event_id'), q.reason,
	COALESCE(q.candidate_event_id, ''), COALESCE(q.original_event_id, ''), q.count, q.last_at,
	q.released_at, COALESCE(q.released_event_id, '')`

func scanHeld(sc interface{ Scan(...any) error }, h *hookwarden.Held, extra ...any) error {
	var at, last string
	var released sql.NullString
	var count int
	if err := sc.Scan(append([]any{&h.ReceiptID, &h.Source, &at, &h.Reason, &h.Detail, &h.CandidateEventID,
		&h.OriginalEventID, &count, &last, &released, &h.ReleasedEventID}, extra...)...); err != nil {
		return err
	}
	h.Repeats = count - 1
	if released.Valid {
		h.ReleasedAt = new(time.Time)
		if err := parseInto(h.ReleasedAt, released.String); err != nil {
			return err
		}
	}
	return errors.Join(parseInto(&h.ReceivedAt, at), parseInto(&h.LastAt, last))
}

// ListQuarantine lists held requests (released ones included, until
// retention.quarantine removes them), newest first. next is the cursor of
// the following page, 0 on the last.
func (s *Store) ListQuarantine(ctx context.Context, f hookwarden.QuarantineFilter) (items []hookwarden.Held, next int64, err error) {
	var where []string
	var args []any
	if f.Source != "" {
		where, args = append(where, "q.source = ?"), append(args, f.Source)
	}
	if f.Cursor > 0 {
		where, args = append(where, "q.receipt_id < ?"), append(args, f.Cursor)
	}
	limit := limitOf(f.Limit)
	q := `SELECT ` + heldColumns + ` FROM quarantine q JOIN receipts r ON r.id = q.receipt_id`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY q.receipt_id DESC LIMIT ?"
	args = append(args, limit+1)
	err = eachRow(ctx, s.rdb, q, func(rows *sql.Rows) error {
		var h hookwarden.Held
		if err := scanHeld(rows, &h); err != nil {
			return err
		}
		items = append(items, h)
		return nil
	}, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list quarantine: %w", err)
	}
	if len(items) > limit {
		items = items[:limit]
		next = items[limit-1].ReceiptID
	}
	return items, next, nil
}

// ShowQuarantined returns one held request with its headers and body, or an
// error wrapping hookwarden.ErrNotFound.
func (s *Store) ShowQuarantined(ctx context.Context, receiptID int64) (*hookwarden.HeldDetail, error) {
	d := &hookwarden.HeldDetail{}
	var headers string
	var sum []byte
	row := s.rdb.QueryRowContext(ctx, `SELECT `+heldColumns+`, r.headers, r.body, r.body_sha256, r.remote_addr
		FROM quarantine q JOIN receipts r ON r.id = q.receipt_id WHERE q.receipt_id = ?`, receiptID)
	err := scanHeld(row, &d.Held, &headers, &d.Body, &sum, &d.RemoteAddr)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("quarantined request %d: %w", receiptID, hookwarden.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("show quarantined request: %w", err)
	}
	d.Header = decodeHeaders(headers)
	d.BodySHA256 = hex.EncodeToString(sum)
	return d, nil
}

// ReleaseQuarantined claims a held request's event id and creates its jobs,
// in one transaction, skipping the body-replay check (an operator looked).
// The held receipt is copied as the event's accepted receipt and the
// quarantine row is marked released. An id already claimed fails with
// ErrAlreadyClaimed and changes nothing.
func (s *Store) ReleaseQuarantined(ctx context.Context, rel hookwarden.Release) (hookwarden.Released, error) {
	var out hookwarden.Released
	var fail error
	err := s.writeClaims(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out, fail = hookwarden.Released{}, nil
		var r hookwarden.Receipt
		var candidate, headers, at string
		var released sql.NullString
		var sum []byte
		err := tx.QueryRowContext(ctx, `SELECT q.source, COALESCE(q.candidate_event_id, ''), q.released_at, r.headers, r.body,
			r.body_sha256, r.remote_addr, r.received_at
			FROM quarantine q JOIN receipts r ON r.id = q.receipt_id WHERE q.receipt_id = ?`, rel.ReceiptID).Scan(
			&r.Source, &candidate, &released, &headers, &r.Body, &sum, &r.RemoteAddr, &at)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			fail = fmt.Errorf("quarantined request %d: %w", rel.ReceiptID, hookwarden.ErrNotFound)
			return nil
		case err != nil:
			return fmt.Errorf("find quarantined request: %w", err)
		case released.Valid:
			fail = fmt.Errorf("quarantined request %d: %w at %s", rel.ReceiptID, hookwarden.ErrReleased, released.String)
			return nil
		}
		id := rel.EventID
		if id == "" {
			id = candidate
		}
		if id == "" {
			fail = fmt.Errorf("quarantined request %d carried no event id: give one with --event-id", rel.ReceiptID)
			return nil
		}
		copy(r.BodySHA256[:], sum)
		ev := hookwarden.Event{ID: id, Type: rel.EventType, BodySHA256: r.BodySHA256, Destinations: rel.Destinations}
		now := fmtTime(s.now())
		ref, isNew, _, _, err := s.claimTx(ctx, tx, r.Source, &ev, now, false)
		if err != nil {
			return err
		}
		if !isNew {
			fail = fmt.Errorf("%s/%s: %w; request %d stays quarantined", r.Source, id, hookwarden.ErrAlreadyClaimed, rel.ReceiptID)
			return nil
		}
		if r.Body == nil {
			r.Body = []byte{}
		}
		// The event's own receipt: received when the request came, so
		// events show tells the true story.
		if _, err := tx.ExecContext(ctx, `INSERT INTO receipts (source, event_ref, kind, received_at, remote_addr, headers, body, body_sha256)
			VALUES (?, ?, 'accepted', ?, ?, ?, ?, x'')`, r.Source, ref, at, r.RemoteAddr, headers, r.Body); err != nil {
			return fmt.Errorf("insert released receipt: %w", err)
		}
		n, err := s.jobsTx(ctx, tx, &r, ref, &ev, now)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO body_keys (source, body_sha256, event_id, claimed_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (source, body_sha256) DO NOTHING`, r.Source, sum, id, now); err != nil {
			return fmt.Errorf("insert body key: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE quarantine SET released_at = ?, released_event_id = ? WHERE receipt_id = ?`,
			now, id, rel.ReceiptID); err != nil {
			return fmt.Errorf("mark released: %w", err)
		}
		out = hookwarden.Released{Source: r.Source, EventID: id, Jobs: n}
		if rel.Audit != nil {
			e := *rel.Audit
			e.Action, e.ReceiptID = "release", rel.ReceiptID
			e.Events = []hookwarden.EventKey{{Source: r.Source, EventID: id}}
			if e.Result, err = json.Marshal(out); err != nil {
				return err
			}
			if _, err := s.auditTx(ctx, tx, &e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return hookwarden.Released{}, err
	}
	return out, fail
}

// DropQuarantined deletes a held request (its quarantine row and its held
// receipt). A released one's event keeps its own copy.
// Its copies stay counted in stats, as after retention. audit, when set,
// is recorded in the same transaction.
func (s *Store) DropQuarantined(ctx context.Context, receiptID int64, audit *hookwarden.AuditEntry) error {
	var found bool
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		var source, last string
		var count int64
		err := tx.QueryRowContext(ctx, `DELETE FROM quarantine WHERE receipt_id = ? RETURNING source, count, last_at`,
			receiptID).Scan(&source, &count, &last)
		if errors.Is(err, sql.ErrNoRows) {
			found = false
			return nil
		}
		if err != nil {
			return fmt.Errorf("drop quarantined request: %w", err)
		}
		found = true
		if err := foldHeldTx(ctx, tx, source, count, last); err != nil {
			return err
		}
		if err := execCount(ctx, tx, nil, `DELETE FROM receipts WHERE id = ? AND kind = 'quarantined'`, receiptID); err != nil {
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

// pruneBodyKeys deletes the body keys claimed before the claims cutoff, in
// id order (insert order), in small batches.
func (s *Store) pruneBodyKeys(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	cut := fmtTime(res.ClaimCutoff)
	for {
		ids, done, err := s.nextIDs(ctx, "body_keys", "claimed_at", 0, cut, opt.BatchSize)
		if err != nil {
			return fmt.Errorf("prune body keys: %w", err)
		}
		if opt.DryRun {
			// Nothing leaves, so the walk would see the same rows again.
			n := 0
			if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM body_keys WHERE claimed_at < ?`, cut).Scan(&n); err != nil {
				return fmt.Errorf("prune body keys: %w", err)
			}
			res.BodyKeysDeleted = n
			return nil
		}
		if len(ids) > 0 {
			n := 0
			if err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
				n = 0
				return execCount(ctx, tx, &n, `DELETE FROM body_keys WHERE id IN (SELECT value FROM json_each(?))`, idSet(ids))
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
// removes; ?1 is the cutoff.
const quarantineExpired = `(released_at IS NULL AND last_at < ?1) OR released_at < ?1`

// pruneQuarantine deletes the held requests past retention.quarantine with
// their held receipts. The quarantine is small (one row per distinct held
// body), so it is read whole.
func (s *Store) pruneQuarantine(ctx context.Context, opt hookwarden.PruneOptions, res *hookwarden.PruneResult) error {
	cut := fmtTime(res.QuarantineCutoff)
	if opt.DryRun {
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM quarantine WHERE `+quarantineExpired, cut).Scan(&res.QuarantineDeleted); err != nil {
			return fmt.Errorf("prune quarantine: %w", err)
		}
		return nil
	}
	for {
		var found bool // read first: most passes have none to delete
		if err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM quarantine WHERE `+quarantineExpired+`)`, cut).Scan(&found); err != nil {
			return fmt.Errorf("prune quarantine: %w", err)
		}
		if !found {
			return nil
		}
		n := 0
		err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
			n = 0
			var ids []int64
			type total struct {
				n    int64
				last string
			}
			totals := map[string]total{}
			err := eachRow(ctx, tx, `DELETE FROM quarantine WHERE (source, body_sha256) IN
				(SELECT source, body_sha256 FROM quarantine WHERE `+quarantineExpired+` LIMIT ?2)
				RETURNING receipt_id, source, count, last_at`, func(rows *sql.Rows) error {
				var id, count int64
				var source, last string
				if err := rows.Scan(&id, &source, &count, &last); err != nil {
					return err
				}
				ids = append(ids, id)
				t := totals[source]
				totals[source] = total{t.n + count, max(t.last, last)}
				return nil
			}, cut, opt.BatchSize)
			if err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			n = len(ids)
			if n == 0 {
				return nil
			}
			for source, t := range totals {
				if err := foldHeldTx(ctx, tx, source, t.n, t.last); err != nil {
					return err
				}
			}
			if err := execCount(ctx, tx, nil, `DELETE FROM receipts WHERE id IN (SELECT value FROM json_each(?)) AND kind = 'quarantined'`,
				idSet(ids)); err != nil {
				return fmt.Errorf("delete receipts: %w", err)
			}
			return advanceCursorTx(ctx, tx, "receipts", "receipts", 0)
		})
		if err != nil {
			return fmt.Errorf("prune quarantine: %w", err)
		}
		res.QuarantineDeleted += n
		if n < opt.BatchSize {
			return nil
		}
		if err := hookwarden.Pause(ctx, opt.Pause); err != nil {
			return err
		}
	}
}

// pruneTokens deletes the one-time tokens whose window has closed: a
// request carrying one is refused as stale before the store sees it. An
// unexpired token is never deleted.
func (s *Store) pruneTokens(ctx context.Context, opt hookwarden.PruneOptions, now time.Time, res *hookwarden.PruneResult) error {
	at := fmtTime(now)
	if opt.DryRun {
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM seen_tokens WHERE expires_at <= ?`, at).Scan(&res.TokensDeleted); err != nil {
			return fmt.Errorf("prune seen tokens: %w", err)
		}
		return nil
	}
	err := s.deleteSome(ctx, &res.TokensDeleted, `SELECT EXISTS (SELECT 1 FROM seen_tokens WHERE expires_at <= ?)`,
		`DELETE FROM seen_tokens WHERE expires_at <= ?`, at)
	if err != nil {
		return fmt.Errorf("prune seen tokens: %w", err)
	}
	return nil
}

// foldHeldTx keeps in pruned_totals what removing held requests of source
// takes away (count copies, the last at last), so stats keep counting them
// after retention or an operator's drop.
func foldHeldTx(ctx context.Context, tx *sql.Tx, source string, count int64, last string) error {
	for _, kv := range []struct {
		kind string
		n    int64
		at   any
	}{{"quarantined", count, nil}, {"last_received", 0, last}} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO pruned_totals (name, kind, n, at) VALUES (?1, ?2, ?3, ?4) `+totalsUpsert,
			source, kv.kind, kv.n, kv.at); err != nil {
			return fmt.Errorf("fold totals: %w", err)
		}
	}
	return nil
}
