package storecopy

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookwarden/hookwarden/sqlitestore"
)

// PostgresSource reads a PostgreSQL store in tx, a REPEATABLE READ
// transaction: one snapshot for every table.
func PostgresSource(tx pgx.Tx) Source { return pgSide{tx} }

// PostgresDestination writes a PostgreSQL store in tx. Rows go in with
// COPY, with the tables' triggers on (they keep the store's counts of the
// rows written: derived.go), and the identity sequences are moved past the
// copied ids at the end.
func PostgresDestination(tx pgx.Tx) Destination { return pgSide{tx} }

type pgSide struct{ tx pgx.Tx }

func (p pgSide) Schema(ctx context.Context) (map[string]Table, error) {
	rows, err := p.tx.Query(ctx, `
SELECT c.table_name, c.column_name, c.data_type, c.is_nullable = 'NO',
	c.column_default IS NOT NULL OR c.is_identity = 'YES', c.is_identity = 'YES'
FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
ORDER BY c.table_name, c.ordinal_position`)
	if err != nil {
		return nil, err
	}
	out := map[string]Table{}
	for rows.Next() {
		var table, typ string
		var c Column
		var notNull, hasDefault bool
		if err := rows.Scan(&table, &c.Name, &typ, &notNull, &hasDefault, &c.Identity); err != nil {
			rows.Close()
			return nil, err
		}
		c.Required = notNull && !hasDefault
		switch typ {
		case "timestamp with time zone", "timestamp without time zone":
			c.Kind = Time
		case "bytea":
			c.Kind = Blob
		case "integer", "bigint", "smallint":
			c.Kind = Int
		case "boolean":
			c.Kind = Bool
		}
		t := out[table]
		t.Name = table
		t.Columns = append(t.Columns, c)
		out[table] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	fks, err := p.tx.Query(ctx, `SELECT DISTINCT conrelid::regclass::text, confrelid::regclass::text
		FROM pg_constraint WHERE contype = 'f' AND connamespace = current_schema()::regnamespace`)
	if err != nil {
		return nil, err
	}
	defer fks.Close()
	for fks.Next() {
		var child, parent string
		if err := fks.Scan(&child, &parent); err != nil {
			return nil, err
		}
		if t, ok := out[child]; ok {
			t.Parents = append(t.Parents, parent)
			out[child] = t
		}
	}
	return out, fks.Err()
}

func (p pgSide) Query(ctx context.Context, q string, args ...any) (Rows, error) {
	rows, err := p.tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

func (pgSide) TimeArg(t time.Time) any { return t.UTC() }

func (p pgSide) Empty(ctx context.Context, table string) error {
	_, err := p.tx.Exec(ctx, "DELETE FROM "+quote(table))
	return err
}

func (p pgSide) Insert(ctx context.Context, t Table, cols []Column, next func() ([]any, bool, error)) (int64, error) {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	src := &pgCopy{next: next, cols: cols}
	n, err := p.tx.CopyFrom(ctx, pgx.Identifier{t.Name}, names, src)
	if src.err != nil {
		return n, src.err
	}
	return n, err
}

func (p pgSide) Count(ctx context.Context, table string) (int64, error) {
	var n int64
	err := p.tx.QueryRow(ctx, "SELECT count(*) FROM "+quote(table)).Scan(&n)
	return n, err
}

// Finish moves each identity's sequence past the highest id copied, so
// that the next insert does not collide.
func (p pgSide) Finish(ctx context.Context, tables []Table) error {
	for _, t := range tables {
		for _, c := range t.Columns {
			if !c.Identity {
				continue
			}
			if _, err := p.tx.Exec(ctx, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence($1, $2), COALESCE(max(%s), 0) + 1, false) FROM %s`,
				quote(c.Name), quote(t.Name)), t.Name, c.Name); err != nil {
				return fmt.Errorf("move the sequence of %s.%s: %w", t.Name, c.Name, err)
			}
		}
	}
	return nil
}

// pgCopy feeds COPY, converting SQLite's encodings.
type pgCopy struct {
	next func() ([]any, bool, error)
	cols []Column
	vals []any
	err  error
}

func (c *pgCopy) Next() bool {
	vs, ok, err := c.next()
	if err != nil {
		c.err = err
		return false
	}
	if !ok {
		return false
	}
	for i, v := range vs {
		if vs[i], err = toPostgres(c.cols[i], v); err != nil {
			c.err = fmt.Errorf("column %s: %w", c.cols[i].Name, err)
			return false
		}
	}
	c.vals = vs
	return true
}

func (c *pgCopy) Values() ([]any, error) { return c.vals, nil }
func (c *pgCopy) Err() error             { return c.err }

// toPostgres converts a value read from SQLite to the PostgreSQL column's
// type: times from fixed-width text, integers to booleans, text to bytes.
func toPostgres(c Column, v any) (any, error) {
	switch c.Kind {
	case Time:
		if s, ok := v.(string); ok {
			t, err := time.Parse(sqlitestore.TimeFormat, s)
			if err != nil {
				if t, err = time.Parse(time.RFC3339Nano, s); err != nil {
					return nil, fmt.Errorf("time %q: %w", s, err)
				}
			}
			return t.UTC(), nil
		}
	case Bool:
		if n, ok := v.(int64); ok {
			return n != 0, nil
		}
	case Blob:
		switch b := v.(type) {
		case string:
			return []byte(b), nil
		case []byte:
			return emptyBlob(b), nil
		}
	}
	return v, nil
}

// pgRows is pgx's rows as Rows.
type pgRows struct{ pgx.Rows }

func (r pgRows) Close() { r.Rows.Close() }
