package pgstore

// The operator's reads of held requests: the quarantine list and one held
// request with its raw headers and body. The record side is quarantine.go;
// release and drop are the operator's writes.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

const heldColumns = `q.receipt_id, q.source, r.received_at, COALESCE(q.kind, 'no_event_id'), q.reason,
	COALESCE(q.candidate_event_id, ''), COALESCE(q.original_event_id, ''), q.count, q.last_at,
	q.released_at, COALESCE(q.released_event_id, '')`

func scanHeld(row pgx.Row, h *hookwarden.Held, extra ...any) error {
	var at, last time.Time
	var released *time.Time
	var count int
	if err := row.Scan(append([]any{&h.ReceiptID, &h.Source, &at, &h.Reason, &h.Detail, &h.CandidateEventID,
		&h.OriginalEventID, &count, &last, &released, &h.ReleasedEventID}, extra...)...); err != nil {
		return err
	}
	h.Repeats = count - 1
	if released != nil {
		t := released.UTC()
		h.ReleasedAt = &t
	}
	h.ReceivedAt, h.LastAt = at.UTC(), last.UTC()
	return nil
}

// ListQuarantine lists held requests (released ones included, until
// retention.quarantine removes them), newest first, on the quarantine's
// receipt index. next is the cursor of the following page, 0 on the last.
func (s *Store) ListQuarantine(ctx context.Context, f hookwarden.QuarantineFilter) (items []hookwarden.Held, next int64, err error) {
	var w where
	if f.Source != "" {
		w.add("q.source = " + w.arg(f.Source))
	}
	if f.Cursor > 0 {
		w.add("q.receipt_id < " + w.arg(f.Cursor))
	}
	limit := limitOf(f.Limit)
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+heldColumns+` FROM quarantine q JOIN receipts r ON r.id = q.receipt_id`+
		w.String()+` ORDER BY q.receipt_id DESC LIMIT `+w.arg(limit+1), w.args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list quarantine: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h hookwarden.Held
		if err := scanHeld(rows, &h); err != nil {
			return nil, 0, fmt.Errorf("list quarantine: %w", err)
		}
		items = append(items, h)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list quarantine: %w", err)
	}
	items, next = page(items, limit, func(h hookwarden.Held) int64 { return h.ReceiptID })
	return items, next, nil
}

// ShowQuarantined returns one held request with its headers and body, or an
// error wrapping hookwarden.ErrNotFound.
func (s *Store) ShowQuarantined(ctx context.Context, receiptID int64) (*hookwarden.HeldDetail, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	d := &hookwarden.HeldDetail{}
	var headers string
	var sum []byte
	row := s.pool.QueryRow(ctx, `SELECT `+heldColumns+`, r.headers, r.body, r.body_sha256, r.remote_addr
		FROM quarantine q JOIN receipts r ON r.id = q.receipt_id WHERE q.receipt_id = $1`, receiptID)
	err := scanHeld(row, &d.Held, &headers, &d.Body, &sum, &d.RemoteAddr)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("quarantined request %d: %w", receiptID, hookwarden.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("show quarantined request: %w", err)
	}
	d.Header = decodeHeaders(headers)
	d.BodySHA256 = hex.EncodeToString(sum)
	return d, nil
}
