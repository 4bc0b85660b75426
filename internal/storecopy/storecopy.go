// Package storecopy copies Hookwarden's rows between stores, table by table
// and column by column by name: the row copier of `hookwarden export` (any
// store into a new SQLite file) and `hookwarden migrate-store` (an SQLite
// file into an empty PostgreSQL database).
//
// Guarantees:
//   - The source is read in one snapshot (a read transaction), the
//     destination written in the caller's one transaction: the copy is
//     consistent, and complete or absent.
//   - Every table both schemas have is copied, with the columns both have;
//     a destination table is emptied first (migrations seed some). A
//     source table or column holding data the destination has no place
//     for fails the copy, naming it: nothing is dropped silently.
//   - Each table's rows are counted in the source (in the snapshot) and in
//     the destination after the copy, and must be equal.
//   - Memory is bounded: rows stream from source to destination.
//   - The counts the stores keep (derived.go) are the destination's own,
//     kept by its triggers as the rows go in.
//
// The two schemas are kept the same tables and columns where they mean the
// same (sqlitestore/migrations, pgstore/migrations); values are converted
// where the encodings differ (times: SQLite's fixed-width text,
// PostgreSQL's timestamptz).
package storecopy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Column is one column of a table.
type Column struct {
	Name     string
	Kind     Kind
	Required bool // NOT NULL and no default: a copy must give it a value
	Identity bool // an id the destination generates (PostgreSQL: its sequence follows the copy)
}

// Kind is a column's type, as far as conversion between stores cares.
type Kind int

const (
	Other Kind = iota
	Time
	Blob
	Int
	Bool
)

// Table is a table's columns and the tables its foreign keys point to.
type Table struct {
	Name    string
	Columns []Column
	Parents []string
}

func (t Table) column(name string) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// Rows is a source's row stream.
type Rows interface {
	Next() bool
	Values() ([]any, error)
	Err() error
	Close()
}

// Source is a store's snapshot being read.
type Source interface {
	// Schema lists the store's tables.
	Schema(ctx context.Context) (map[string]Table, error)
	// Query runs a read in the snapshot. The SQL is written with $1 for
	// the one argument, which TimeArg makes.
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
	// TimeArg is a time as the store's SQL compares it.
	TimeArg(t time.Time) any
}

// Destination is a store's transaction being written.
type Destination interface {
	Schema(ctx context.Context) (map[string]Table, error)
	// Empty deletes every row of table.
	Empty(ctx context.Context, table string) error
	// Insert writes rows into table's cols and returns how many it wrote.
	Insert(ctx context.Context, t Table, cols []Column, rows func() ([]any, bool, error)) (int64, error)
	// Count counts table's rows.
	Count(ctx context.Context, table string) (int64, error)
	// Finish runs after the last table (PostgreSQL: the sequences).
	Finish(ctx context.Context, tables []Table) error
}

// Options tune Copy.
type Options struct {
	// Since, when set, copies only what happened from then on (export
	// --since): events claimed since, with their receipts, jobs and
	// attempts, quarantined requests, runs, audit entries and keys of the
	// same window (sinceWhere); the small bookkeeping tables whole.
	Since time.Time
	// Skip names tables never copied, on either side (schema_version,
	// store_marks: what a file is, not what it holds).
	Skip []string
	// Fill gives a value to a destination column the source lacks or
	// leaves NULL: table -> column -> value.
	Fill map[string]map[string]any
	// Drop names source columns the destination has no place for that
	// may be left behind: table -> columns.
	Drop map[string][]string
}

// Count is one table's rows copied.
type Count struct {
	Table string
	Rows  int64
}

// sinceWhere is each table's part of a copy --since: the window's events
// and what hangs off them, so that every foreign key of the copy resolves.
// $1 is the window's start. A table not named here is copied whole.
var sinceWhere = map[string]string{
	"events":         `claimed_at >= $1`,
	"receipts":       `(event_ref IN (SELECT id FROM events WHERE claimed_at >= $1) OR (event_ref IS NULL AND received_at >= $1))`,
	"receipt_events": `event_ref IN (SELECT id FROM events WHERE claimed_at >= $1) AND receipt_id IN (SELECT id FROM receipts WHERE event_ref IS NULL AND received_at >= $1 OR event_ref IN (SELECT id FROM events WHERE claimed_at >= $1))`,
	"quarantine":     `receipt_id IN (SELECT id FROM receipts WHERE event_ref IS NULL AND received_at >= $1)`,
	"jobs":           `event_ref IN (SELECT id FROM events WHERE claimed_at >= $1)`,
	"attempts":       `job_id IN (SELECT j.id FROM jobs j JOIN events e ON e.id = j.event_ref WHERE e.claimed_at >= $1)`,
	"prune_held":     `event_ref IN (SELECT id FROM events WHERE claimed_at >= $1)`,
	"runs":           `heartbeat_at >= $1`,
	"audit":          `at >= $1`,
	"audit_events":   `audit_id IN (SELECT id FROM audit WHERE at >= $1)`,
	"body_keys":      `claimed_at >= $1`,
	"seen_tokens":    `expires_at >= $1`,
}

// Copy copies src into dst and returns the rows copied per table, in the
// order copied.
func Copy(ctx context.Context, src Source, dst Destination, opt Options) ([]Count, error) {
	from, err := src.Schema(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the source's schema: %w", err)
	}
	to, err := dst.Schema(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the destination's schema: %w", err)
	}
	skip := map[string]bool{}
	for _, t := range opt.Skip {
		skip[t] = true
	}
	var tables []Table
	for name, t := range from {
		if skip[name] || derived[name] {
			continue
		}
		if _, ok := to[name]; !ok {
			n, err := count(ctx, src, name, "", nil)
			if err != nil {
				return nil, err
			}
			if n > 0 {
				return nil, fmt.Errorf("table %s (%d rows) has no counterpart in the destination's schema: "+
					"this build cannot copy it", name, n)
			}
			continue
		}
		tables = append(tables, t)
	}
	tables, err = parentsFirst(tables)
	if err != nil {
		return nil, err
	}
	// Children are emptied before their parents, then filled after them.
	for i := len(tables) - 1; i >= 0; i-- {
		if err := dst.Empty(ctx, tables[i].Name); err != nil {
			return nil, fmt.Errorf("empty %s: %w", tables[i].Name, err)
		}
	}
	var counts []Count
	for _, t := range tables {
		n, err := copyTable(ctx, src, dst, t, to[t.Name], opt)
		if err != nil {
			return counts, fmt.Errorf("copy %s: %w", t.Name, err)
		}
		counts = append(counts, Count{t.Name, n})
	}
	if _, ok := from["hourly"]; ok && opt.Since.IsZero() && !skip["hourly"] {
		if t, ok := to["hourly"]; ok {
			n, err := copyHourly(ctx, src, dst, t)
			if err != nil {
				return counts, fmt.Errorf("copy hourly: %w", err)
			}
			counts = append(counts, Count{"hourly", n})
		}
	}
	var written []Table
	for _, t := range tables {
		written = append(written, to[t.Name])
	}
	if err := dst.Finish(ctx, written); err != nil {
		return counts, err
	}
	return counts, nil
}

// copyTable copies one table and checks the counts.
func copyTable(ctx context.Context, src Source, dst Destination, from, to Table, opt Options) (int64, error) {
	where, args := "", []any(nil)
	if !opt.Since.IsZero() {
		if w, ok := sinceWhere[from.Name]; ok {
			where, args = w, []any{src.TimeArg(opt.Since)}
		}
	}
	// Columns: the destination's, those the source has or Fill gives.
	fill := opt.Fill[to.Name]
	var cols []Column // destination columns written
	var pick []int    // their index in the source's select list, -1: fill only
	var sel []string
	for _, c := range to.Columns {
		_, inSrc := from.column(c.Name)
		_, filled := fill[c.Name]
		switch {
		case inSrc:
			pick = append(pick, len(sel))
			sel = append(sel, quote(c.Name))
		case filled:
			pick = append(pick, -1)
		case c.Required:
			return 0, fmt.Errorf("column %s is required and the source has none", c.Name)
		default:
			continue
		}
		cols = append(cols, c)
	}
	// Source columns left behind must hold nothing (or be allowed to go).
	dropped := map[string]bool{}
	for _, c := range opt.Drop[from.Name] {
		dropped[c] = true
	}
	for _, c := range from.Columns {
		if _, ok := to.column(c.Name); ok || dropped[c.Name] {
			continue
		}
		n, err := count(ctx, src, from.Name, where, args, quote(c.Name)+" IS NOT NULL")
		if err != nil {
			return 0, err
		}
		if n > 0 {
			return 0, fmt.Errorf("column %s holds values in %d rows and the destination's schema has no such column", c.Name, n)
		}
	}
	want, err := count(ctx, src, from.Name, where, args)
	if err != nil {
		return 0, err
	}
	var rows Rows
	if len(sel) > 0 {
		q := "SELECT " + strings.Join(sel, ", ") + " FROM " + quote(from.Name)
		if where != "" {
			q += " WHERE " + where
		}
		q += orderBy(from)
		if rows, err = src.Query(ctx, q, args...); err != nil {
			return 0, fmt.Errorf("read: %w", err)
		}
		defer rows.Close()
	} else if want > 0 {
		return 0, errors.New("no column in common")
	}
	next := func() ([]any, bool, error) {
		if rows == nil || !rows.Next() {
			if rows != nil {
				return nil, false, rows.Err()
			}
			return nil, false, nil
		}
		vs, err := rows.Values()
		if err != nil {
			return nil, false, err
		}
		out := make([]any, len(cols))
		for i, c := range cols {
			if pick[i] >= 0 {
				out[i] = vs[pick[i]]
			}
			if fv, ok := fill[c.Name]; ok && out[i] == nil {
				out[i] = fv
			}
		}
		return out, true, nil
	}
	n, err := dst.Insert(ctx, to, cols, next)
	if err != nil {
		return n, err
	}
	got, err := dst.Count(ctx, to.Name)
	if err != nil {
		return n, err
	}
	if n != want || got != want {
		return n, fmt.Errorf("counts differ: %d rows in the source, %d written, %d in the destination", want, n, got)
	}
	return n, nil
}

// orderBy copies in id order where there is an id, so that the
// destination's physical order (and SQLite's rowids) follow the source's.
func orderBy(t Table) string {
	if _, ok := t.column("id"); ok {
		return " ORDER BY id"
	}
	return ""
}

// count counts a table's rows, with the copy's filter and extra conditions.
func count(ctx context.Context, src Source, table, where string, args []any, and ...string) (int64, error) {
	conds := and
	if where != "" {
		conds = append([]string{where}, and...)
	}
	q := "SELECT count(*) FROM " + quote(table)
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	rows, err := src.Query(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", table, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, fmt.Errorf("count %s: no row: %v", table, rows.Err())
	}
	vs, err := rows.Values()
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", table, err)
	}
	switch n := vs[0].(type) {
	case int64:
		return n, nil
	case int32:
		return int64(n), nil
	}
	return 0, fmt.Errorf("count %s: %T", table, vs[0])
}

// parentsFirst orders tables so that each comes after the tables its
// foreign keys point to (ties by name, for a stable order).
func parentsFirst(tables []Table) ([]Table, error) {
	sort.Slice(tables, func(i, j int) bool { return tables[i].Name < tables[j].Name })
	byName := map[string]Table{}
	for _, t := range tables {
		byName[t.Name] = t
	}
	state := map[string]int{} // 1: visiting, 2: done
	var out []Table
	var visit func(t Table) error
	visit = func(t Table) error {
		switch state[t.Name] {
		case 1:
			return fmt.Errorf("foreign keys form a cycle through %s", t.Name)
		case 2:
			return nil
		}
		state[t.Name] = 1
		for _, p := range t.Parents {
			if pt, ok := byName[p]; ok && p != t.Name {
				if err := visit(pt); err != nil {
					return err
				}
			}
		}
		state[t.Name] = 2
		out = append(out, t)
		return nil
	}
	for _, t := range tables {
		if err := visit(t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// quote quotes an identifier for both SQL dialects.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }
