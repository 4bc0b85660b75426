package pgstore

// The audit log (docs/reference.md, "The audit log"), as sqlitestore keeps
// it: an action that is one transaction writes its entry inside it
// (auditTx); replay writes it with its first batch that changes anything
// and brings its result up to date in every later batch; prune writes it
// before its first batch and gives it its result after the last.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// Audit records one operator action in a transaction of its own and
// returns its id.
func (s *Store) Audit(ctx context.Context, e hookwarden.AuditEntry) (int64, error) {
	if err := e.Check(); err != nil {
		return 0, err
	}
	var id int64
	err := s.write(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		id, err = s.auditTx(ctx, tx, &e)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record audit entry: %w", err)
	}
	return id, nil
}

// auditTx inserts e inside tx, with its event links, and returns its id.
// It never changes e: a transaction run again inserts the same entry.
func (s *Store) auditTx(ctx context.Context, tx pgx.Tx, e *hookwarden.AuditEntry) (int64, error) {
	if err := e.Check(); err != nil {
		return 0, err
	}
	var at any = s.now()
	if !e.At.IsZero() {
		at = e.At.UTC()
	}
	args := string(e.Args)
	if args == "" {
		args = "{}"
	}
	var result, receipt any
	if len(e.Result) > 0 {
		result = string(e.Result)
	}
	if e.ReceiptID > 0 {
		receipt = e.ReceiptID
	}
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO audit (at, action, origin, actor, args, result, receipt_id)
		VALUES (COALESCE($1::timestamptz, now()), $2, $3, $4, $5, $6, $7) RETURNING id`,
		at, e.Action, e.Origin, e.Actor, args, result, receipt).Scan(&id); err != nil {
		return 0, fmt.Errorf("insert audit entry: %w", err)
	}
	return id, auditLinkTx(ctx, tx, id, e.Events)
}

// auditLinkTx ties entry id to the events it changed.
func auditLinkTx(ctx context.Context, tx pgx.Tx, id int64, events []hookwarden.EventKey) error {
	if len(events) == 0 {
		return nil
	}
	sources, ids := make([]string, len(events)), make([]string, len(events))
	for i, k := range events {
		sources[i], ids[i] = k.Source, k.EventID
	}
	if _, err := tx.Exec(ctx, `INSERT INTO audit_events (source, event_id, audit_id)
		SELECT s, e, $3 FROM unnest($1::text[], $2::text[]) AS k (s, e) ON CONFLICT DO NOTHING`, sources, ids, id); err != nil {
		return fmt.Errorf("link audit entry: %w", err)
	}
	return nil
}

// auditResultTx sets the result of entry id.
func auditResultTx(ctx context.Context, tx pgx.Tx, id int64, result any) error {
	b, err := json.Marshal(result)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE audit SET result = $1 WHERE id = $2`, string(b), id); err != nil {
		return fmt.Errorf("update audit entry: %w", err)
	}
	return nil
}
