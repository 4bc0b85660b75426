package sqlitestore

// The audit log (docs/reference.md, "The audit log"): every operator action that changes state,
// with its arguments, its origin and what it did. Actions that are one
// transaction write their entry inside it (auditTx); replay writes it with
// its first batch that changes anything and brings its result up to date in
// every later batch, so the entry never says more or less than what was
// committed.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/hookwarden/hookwarden"
)

// Audit records one operator action in a transaction of its own, and returns
// its id. For an action that is itself one write of this package, insert the
// entry in that write's transaction instead (auditTx), so that the change
// and its record commit together.
func (s *Store) Audit(ctx context.Context, e hookwarden.AuditEntry) (int64, error) {
	if err := checkAudit(&e); err != nil {
		return 0, err
	}
	var id int64
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		id, err = s.auditTx(ctx, tx, &e)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record audit entry: %w", err)
	}
	return id, nil
}

// checkAudit refuses an entry that would be useless to a human later.
func checkAudit(e *hookwarden.AuditEntry) error { return e.Check() }

// auditTx inserts e inside tx, with its event links, and returns its id.
// The op may run twice (batch isolation), so it never changes e.
func (s *Store) auditTx(ctx context.Context, tx *sql.Tx, e *hookwarden.AuditEntry) (int64, error) {
	if err := checkAudit(e); err != nil {
		return 0, err
	}
	at := e.At
	if at.IsZero() {
		at = s.now()
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
	if err := tx.QueryRowContext(ctx, `
INSERT INTO audit (at, action, origin, actor, args, result, receipt_id) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		fmtTime(at), e.Action, e.Origin, e.Actor, args, result, receipt).Scan(&id); err != nil {
		return 0, fmt.Errorf("insert audit entry: %w", err)
	}
	return id, auditLinkTx(ctx, tx, id, e.Events)
}

// auditLinkTx ties entry id to the events it changed.
func auditLinkTx(ctx context.Context, tx *sql.Tx, id int64, events []hookwarden.EventKey) error {
	if len(events) == 0 {
		return nil
	}
	b, err := json.Marshal(events)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `
INSERT OR IGNORE INTO audit_events (source, event_id, audit_id)
SELECT value ->> '$.source', value ->> '$.event_id', ? FROM json_each(?)`, id, string(b)); err != nil {
		return fmt.Errorf("link audit entry: %w", err)
	}
	return nil
}

// auditResultTx sets the result of entry id.
func auditResultTx(ctx context.Context, tx *sql.Tx, id int64, result any) error {
	b, err := json.Marshal(result)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE audit SET result = ? WHERE id = ?`, string(b), id); err != nil {
		return fmt.Errorf("update audit entry: %w", err)
	}
	return nil
}

// EventAudit lists the audit entries that changed one event, oldest first.
// A file older than the audit log (schema version 5) has none.
func (s *Store) EventAudit(ctx context.Context, source, eventID string) ([]hookwarden.AuditEntry, error) {
	return eventAudit(ctx, s.rdb, source, eventID)
}

func eventAudit(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, source, eventID string) ([]hookwarden.AuditEntry, error) {
	var have int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'audit_events'`).Scan(&have); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	if have == 0 {
		return nil, nil
	}
	var out []hookwarden.AuditEntry
	err := eachRow(ctx, q, `
SELECT a.id, a.at, a.action, a.origin, a.actor, a.args, a.result, a.receipt_id
FROM audit_events l JOIN audit a ON a.id = l.audit_id
WHERE l.source = ? AND l.event_id = ? ORDER BY a.id`, func(rows *sql.Rows) error {
		var e hookwarden.AuditEntry
		var at, args string
		var result sql.NullString
		var receipt sql.NullInt64
		if err := rows.Scan(&e.ID, &at, &e.Action, &e.Origin, &e.Actor, &args, &result, &receipt); err != nil {
			return err
		}
		var err error
		if e.At, err = parseTime(at); err != nil {
			return err
		}
		e.Args = json.RawMessage(args)
		if result.Valid {
			e.Result = json.RawMessage(result.String)
		}
		e.ReceiptID = receipt.Int64
		out = append(out, e)
		return nil
	}, source, eventID)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}
