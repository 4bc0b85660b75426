package pgstore

// The record side of held requests: the quarantine, the body keys that
// catch a signed body replayed under a fresh id, and Mailgun's seen tokens.

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
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

// replayedHeld is how a body replayed under id, first claimed as orig, is held.
func replayedHeld(id, orig string) held {
	return held{kind: hookwarden.QuarantineBodyReplayed, reason: "signed body already claimed as event " + orig,
		candidate: id, original: orig}
}

// heldKey is the advisory lock key of the held body of source (SQL
// expressions): Record takes it before it counts a copy, and whatever
// deletes or releases the row takes it too, so that no copy is counted on a
// row that is going.
func heldKey(source, sum string) string {
	return "hashtextextended(" + source + " || ':' || encode(" + sum + ", 'hex'), 0)"
}

// quarantine holds the receipt. The same body again only bumps a counter; a
// body that was released and comes again is held anew. Copies arriving at
// once on several instances take a transaction-scoped advisory lock on the
// body first, so that the look-up and the write that follows it are one
// step: one row, every copy counted.
func (rc *recording) quarantine(ctx context.Context, h held) error {
	r := rc.r
	rc.res.Outcome = hookwarden.Quarantined
	rc.res.QuarantineKind = h.kind
	rc.res.Events = nil
	if _, err := rc.tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+heldKey("$1", "$2")+`)`, r.Source, r.BodySHA256[:]); err != nil {
		return fmt.Errorf("lock quarantined body: %w", err)
	}
	var old int64
	var released bool
	err := rc.tx.QueryRow(ctx, `SELECT receipt_id, released_at IS NOT NULL FROM quarantine WHERE source = $1 AND body_sha256 = $2`,
		r.Source, r.BodySHA256[:]).Scan(&old, &released)
	exists := err == nil
	switch {
	case exists && !released:
		if _, err := rc.tx.Exec(ctx, `UPDATE quarantine SET count = count + 1, last_at = $3 WHERE source = $1 AND body_sha256 = $2`,
			r.Source, r.BodySHA256[:], rc.at); err != nil {
			return fmt.Errorf("count quarantined repeat: %w", err)
		}
		rc.res.ReceiptID = old
		return nil
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("find quarantined body: %w", err)
	}
	id, err := rc.insertReceipt(ctx, nil, "quarantined", r.Body, h.reason)
	if err != nil {
		return err
	}
	rc.res.ReceiptID = id
	if exists {
		// The released request's event has its own copy of the receipt.
		if _, err := rc.tx.Exec(ctx, `UPDATE quarantine SET receipt_id = $3, reason = $4, first_at = $5, last_at = $5, count = 1, kind = $6,
			candidate_event_id = $7, original_event_id = $8, released_at = NULL, released_event_id = NULL
			WHERE source = $1 AND body_sha256 = $2`, r.Source, r.BodySHA256[:], id, h.reason, rc.at,
			h.kind, nullable(h.candidate), nullable(h.original)); err != nil {
			return fmt.Errorf("hold released body again: %w", err)
		}
		if _, err := rc.tx.Exec(ctx, `DELETE FROM receipts WHERE id = $1 AND kind = 'quarantined'`, old); err != nil {
			return fmt.Errorf("hold released body again: %w", err)
		}
		return nil
	}
	if _, err := rc.tx.Exec(ctx, `INSERT INTO quarantine (source, body_sha256, receipt_id, reason, first_at, last_at, count, kind,
		candidate_event_id, original_event_id) VALUES ($1, $2, $3, $4, $5, $5, 1, $6, $7, $8)`,
		r.Source, r.BodySHA256[:], id, h.reason, rc.at, h.kind, nullable(h.candidate), nullable(h.original)); err != nil {
		return fmt.Errorf("insert quarantine: %w", err)
	}
	return nil
}

// bodyKey inserts the body key of a receipt whose signature does not cover
// its event id. conflict is set, with the id that claimed the body first,
// when the body was claimed under another id. The unique key decides: a
// concurrent copy's insert waits for the first to commit, then conflicts.
func (rc *recording) bodyKey(ctx context.Context, ev *hookwarden.Event) (orig string, conflict bool, err error) {
	var one int
	err = rc.tx.QueryRow(ctx, `INSERT INTO body_keys (source, body_sha256, event_id, claimed_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (source, body_sha256) DO NOTHING RETURNING 1`, rc.r.Source, ev.BodySHA256[:], ev.ID, rc.at).Scan(&one)
	if err == nil {
		return "", false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", false, fmt.Errorf("insert body key: %w", err)
	}
	if err := rc.tx.QueryRow(ctx, `SELECT event_id FROM body_keys WHERE source = $1 AND body_sha256 = $2`,
		rc.r.Source, ev.BodySHA256[:]).Scan(&orig); err != nil {
		return "", false, fmt.Errorf("look up body key: %w", err)
	}
	return orig, orig != ev.ID, nil // the same id again is a provider retry
}

// claimed reports whether the receipt's source has claimed id.
func (rc *recording) claimed(ctx context.Context, id string) (bool, error) {
	var ok bool
	if err := rc.tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE source = $1 AND event_id = $2)`,
		rc.r.Source, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up claimed event: %w", err)
	}
	return ok, nil
}

// token records the request's one-time token. It reports false when the
// token was seen, unexpired, with another body: a replay. An expired row
// (not pruned yet) is taken over.
func (rc *recording) token(ctx context.Context) (bool, error) {
	r, t := rc.r, rc.r.Token
	var one int
	err := rc.tx.QueryRow(ctx, `INSERT INTO seen_tokens (source, token_sha256, body_sha256, expires_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (source, token_sha256) DO UPDATE SET body_sha256 = excluded.body_sha256, expires_at = excluded.expires_at
		WHERE seen_tokens.expires_at <= $5 RETURNING 1`,
		r.Source, t.SHA256[:], r.BodySHA256[:], t.Expires.UTC(), rc.at).Scan(&one)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("insert seen token: %w", err)
	}
	var sum []byte
	if err := rc.tx.QueryRow(ctx, `SELECT body_sha256 FROM seen_tokens WHERE source = $1 AND token_sha256 = $2`,
		r.Source, t.SHA256[:]).Scan(&sum); err != nil {
		return false, fmt.Errorf("look up seen token: %w", err)
	}
	return bytes.Equal(sum, r.BodySHA256[:]), nil
}
