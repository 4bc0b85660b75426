// Package migrations reads a store's numbered schema migrations from an
// embedded folder. Each store keeps its own SQL (sqlitestore/migrations,
// pgstore/migrations) and runs it its own way; what they share is the rule:
// a file name starts with the version it brings the schema to and "_"
// (0001_init.sql), and gaps and duplicates are refused, so a bad release
// cannot skip a step.
package migrations

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one step of a schema.
type Migration struct {
	Version int
	Name    string // the file name, for errors and logs
	SQL     string
}

// Load returns the *.sql files of dir in fsys, in version order.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, n := range names {
		base := strings.TrimPrefix(n, dir+"/")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must start with a positive version number and _", base)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %q: want version %d (no gaps or duplicates)", m.Name, i+1)
		}
	}
	return ms, nil
}
