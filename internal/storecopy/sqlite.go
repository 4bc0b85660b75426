package storecopy

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/hookwarden/hookwarden/sqlitestore"
)

// sqlq is what the SQLite side queries through: a read or write
// transaction.
type sqlq interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// SQLiteSource reads an SQLite store in tx, a transaction of its read pool:
// its first read fixes the snapshot every later one sees.
func SQLiteSource(tx *sql.Tx) Source { return sqliteSide{tx} }

// SQLiteDestination writes an SQLite store in tx, a transaction of its
// writer (sqlitestore's Bulk).
func SQLiteDestination(tx *sql.Tx) Destination { return sqliteSide{tx} }

type sqliteSide struct{ q sqlq }

func (s sqliteSide) Schema(ctx context.Context) (map[string]Table, error) {
	rows, err := s.q.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := map[string]Table{}
	for _, n := range names {
		t := Table{Name: n}
		cols, err := s.q.QueryContext(ctx, `SELECT name, type, "notnull", dflt_value IS NOT NULL, pk FROM pragma_table_info(?)`, n)
		if err != nil {
			return nil, err
		}
		for cols.Next() {
			var c Column
			var typ string
			var notNull, hasDefault bool
			var pk int
			if err := cols.Scan(&c.Name, &typ, &notNull, &hasDefault, &pk); err != nil {
				cols.Close()
				return nil, err
			}
			// An INTEGER PRIMARY KEY is the rowid: SQLite gives one.
			c.Identity = pk == 1 && strings.EqualFold(typ, "INTEGER")
			c.Required = notNull && !hasDefault && !c.Identity
			switch strings.ToUpper(typ) {
			case "INTEGER":
				c.Kind = Int
			case "BLOB":
				c.Kind = Blob
			}
			t.Columns = append(t.Columns, c)
		}
		cols.Close()
		if err := cols.Err(); err != nil {
			return nil, err
		}
		fks, err := s.q.QueryContext(ctx, `SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)`, n)
		if err != nil {
			return nil, err
		}
		for fks.Next() {
			var p string
			if err := fks.Scan(&p); err != nil {
				fks.Close()
				return nil, err
			}
			t.Parents = append(t.Parents, p)
		}
		fks.Close()
		if err := fks.Err(); err != nil {
			return nil, err
		}
		out[n] = t
	}
	return out, nil
}

func (s sqliteSide) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	// One argument, written $1 for both dialects: ?1 in SQLite.
	rows, err := s.q.QueryContext(ctx, strings.ReplaceAll(q, "$1", "?1"), args...)
	if err != nil {
		return nil, err
	}
	cols, err := rows.Columns()
	if err != nil {
		rows.Close()
		return nil, err
	}
	return &sqlRows{rows: rows, n: len(cols)}, nil
}

func (sqliteSide) TimeArg(t time.Time) any { return t.UTC().Format(sqlitestore.TimeFormat) }

func (s sqliteSide) Empty(ctx context.Context, table string) error {
	_, err := s.q.ExecContext(ctx, "DELETE FROM "+quote(table))
	return err
}

func (s sqliteSide) Insert(ctx context.Context, t Table, cols []Column, next func() ([]any, bool, error)) (int64, error) {
	names := make([]string, len(cols))
	marks := make([]string, len(cols))
	for i, c := range cols {
		names[i], marks[i] = quote(c.Name), "?"
	}
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", quote(t.Name), strings.Join(names, ", "), strings.Join(marks, ", "))
	stmt, err := s.q.PrepareContext(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("insert: %w", err)
	}
	defer stmt.Close()
	var n int64
	for {
		vs, ok, err := next()
		if err != nil {
			return n, fmt.Errorf("read: %w", err)
		}
		if !ok {
			return n, nil
		}
		for i, v := range vs {
			vs[i] = toSQLite(v)
		}
		if _, err := stmt.ExecContext(ctx, vs...); err != nil {
			return n, fmt.Errorf("insert: %w", err)
		}
		n++
	}
}

// toSQLite converts a value to the SQLite schema's encoding.
func toSQLite(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(sqlitestore.TimeFormat)
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	case []byte:
		return emptyBlob(x)
	}
	return v
}

func (s sqliteSide) Count(ctx context.Context, table string) (int64, error) {
	rows, err := s.q.QueryContext(ctx, "SELECT count(*) FROM "+quote(table))
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var n int64
	if rows.Next() {
		err = rows.Scan(&n)
	}
	return n, err
}

func (sqliteSide) Finish(context.Context, []Table) error { return nil }

// emptyBlob keeps an empty blob empty: SQLite reads x” back as a nil
// slice, which would be written as NULL (a NULL is read as a nil any).
func emptyBlob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// sqlRows is database/sql's rows as Rows.
type sqlRows struct {
	rows *sql.Rows
	n    int
}

func (r *sqlRows) Next() bool { return r.rows.Next() }
func (r *sqlRows) Err() error { return r.rows.Err() }
func (r *sqlRows) Close()     { r.rows.Close() }
func (r *sqlRows) Values() ([]any, error) {
	vs := make([]any, r.n)
	ptrs := make([]any, r.n)
	for i := range vs {
		ptrs[i] = &vs[i]
	}
	if err := r.rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vs, nil
}
