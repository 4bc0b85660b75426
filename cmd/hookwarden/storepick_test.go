package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOneFilePicksTheStore: the program names its store implementations
// (and the copier between them) in cmd/hookwarden/store.go only; the rest
// of cmd, internal/admin and worker depend on the contract
// (hookwarden.Store). Tests may open a real store.
func TestOneFilePicksTheStore(t *testing.T) {
	impls := map[string]bool{
		"github.com/hookwarden/hookwarden/sqlitestore":        true,
		"github.com/hookwarden/hookwarden/pgstore":            true,
		"github.com/hookwarden/hookwarden/internal/storecopy": true,
	}
	var checked int
	for _, dir := range []string{".", "../../internal/admin", "../../worker"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || (dir == "." && f == "store.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			for _, im := range af.Imports {
				if p, _ := strconv.Unquote(im.Path.Value); impls[p] {
					t.Errorf("%s imports %s: pick the store in cmd/hookwarden/store.go and take hookwarden.Store", f, p)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files: the walk found too few to mean anything", checked)
	}
}
