package sqlitestore

// Marks: a file that is an export or a database moved to PostgreSQL says so
// (migration 0011), and serve refuses it.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Mark kinds (store_marks.kind).
const (
	MarkExport = "export"
	MarkMoved  = "moved"
)

// Mark is one row of store_marks.
type Mark struct {
	Kind   string
	At     time.Time
	Since  time.Time // export --since; zero for a full export
	Origin string    // the store it was copied from (export), this file (moved)
	Target string    // moved: the PostgreSQL database it went to
}

// MarkError is Open's refusal (Options.RefuseMarked) of a file that is not
// a live database.
type MarkError struct {
	Path string
	Mark Mark
}

func (e *MarkError) Error() string {
	m := e.Mark
	at := m.At.UTC().Format(time.RFC3339)
	switch m.Kind {
	case MarkMoved:
		return fmt.Sprintf("%s was moved to %s by migrate-store at %s: refusing to serve on it "+
			"(two stores accepting the same events would deliver them twice); set database.url to that database instead",
			e.Path, m.Target, at)
	default:
		part := "a full copy"
		if !m.Since.IsZero() {
			part = "a partial copy, since " + m.Since.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%s is an export of %s written at %s (%s): it is for offline forensics with --db, "+
			"refusing to serve on it", e.Path, m.Origin, at, part)
	}
}

// readMarks reads the marks of the database behind db; a file older than
// schema 11 has none.
func readMarks(ctx context.Context, db *sql.DB) ([]Mark, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'store_marks'`).Scan(&n); err != nil {
		return nil, fmt.Errorf("read store marks: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT kind, at, since, origin, target FROM store_marks ORDER BY kind`)
	if err != nil {
		return nil, fmt.Errorf("read store marks: %w", err)
	}
	defer rows.Close()
	var ms []Mark
	for rows.Next() {
		var m Mark
		var at string
		var since, target sql.NullString
		if err := rows.Scan(&m.Kind, &at, &since, &m.Origin, &target); err != nil {
			return nil, fmt.Errorf("read store marks: %w", err)
		}
		if m.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("read store marks: %w", err)
		}
		if since.Valid {
			if m.Since, err = parseTime(since.String); err != nil {
				return nil, fmt.Errorf("read store marks: %w", err)
			}
		}
		m.Target = target.String
		ms = append(ms, m)
	}
	return ms, rows.Err()
}

// refuseMarked fails with a *MarkError when the file carries a mark. It
// runs before the migrations, so a refused file is left as it is.
func (s *Store) refuseMarked(ctx context.Context) error {
	ms, err := readMarks(ctx, s.wdb)
	if err != nil {
		return err
	}
	// moved first: it is what the operator must act on.
	for _, kind := range []string{MarkMoved, MarkExport} {
		for _, m := range ms {
			if m.Kind == kind {
				return &MarkError{Path: s.path, Mark: m}
			}
		}
	}
	return nil
}

// Marks lists the file's marks (none for a live database).
func (s *Store) Marks(ctx context.Context) ([]Mark, error) { return readMarks(ctx, s.rdb) }

// SetMark records m (replacing a mark of its kind) through the writer.
func (s *Store) SetMark(ctx context.Context, m Mark) error {
	return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		return SetMarkTx(ctx, tx, m)
	})
}

// SetMarkTx is SetMark inside the caller's transaction (Bulk).
func SetMarkTx(ctx context.Context, tx *sql.Tx, m Mark) error {
	var since, target any
	if !m.Since.IsZero() {
		since = fmtTime(m.Since)
	}
	if m.Target != "" {
		target = m.Target
	}
	if m.At.IsZero() {
		m.At = time.Now()
	}
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO store_marks (kind, at, since, origin, target) VALUES (?, ?, ?, ?, ?)`,
		m.Kind, fmtTime(m.At), since, m.Origin, target)
	if err != nil {
		return fmt.Errorf("mark %s: %w", m.Kind, err)
	}
	return nil
}

// ClearMark removes the mark of kind, if any.
func (s *Store) ClearMark(ctx context.Context, kind string) error {
	return s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM store_marks WHERE kind = ?`, kind)
		return err
	})
}

// Bulk runs fn in one transaction of the writer, alone: for the row copies
// of export and migrate-store, on a store that serves nothing. fn may run
// again if the transaction fails before it commits.
func (s *Store) Bulk(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if s.wdb == nil {
		return errors.New("store opened read-only")
	}
	return s.write(ctx, true, fn)
}
