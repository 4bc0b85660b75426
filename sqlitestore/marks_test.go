package sqlitestore

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMarkedFileRefused: with RefuseMarked, a file marked as an export or
// as moved does not open (a *MarkError saying which); without it, it opens
// (the --db commands read exports); clearing the mark opens it again.
func TestMarkedFileRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hw.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.SetMark(ctx, Mark{Kind: MarkExport, Since: since, Origin: "postgres://db:5432/hw"}); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Marks(ctx)
	if err != nil || len(ms) != 1 || ms[0].Kind != MarkExport || !ms[0].Since.Equal(since) || ms[0].Origin != "postgres://db:5432/hw" {
		t.Fatalf("marks: %+v %v", ms, err)
	}
	s.Close()

	_, err = Open(ctx, path, Options{RefuseMarked: true})
	var me *MarkError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "is an export of postgres://db:5432/hw") ||
		!strings.Contains(err.Error(), "partial") {
		t.Fatalf("open of an export: %v, want a MarkError saying it is a partial export", err)
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open of an export without RefuseMarked: %v", err)
	}
	if err := s.SetMark(ctx, Mark{Kind: MarkMoved, Origin: path, Target: "postgres://db.example:5432/hw"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearMark(ctx, MarkExport); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err = Open(ctx, path, Options{RefuseMarked: true}); !errors.As(err, &me) || me.Mark.Kind != MarkMoved ||
		!strings.Contains(err.Error(), "was moved to postgres://db.example:5432/hw") {
		t.Fatalf("open of a moved file: %v, want a MarkError naming the database", err)
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ClearMark(ctx, MarkMoved); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path, Options{RefuseMarked: true})
	if err != nil {
		t.Fatalf("open after the marks were cleared: %v", err)
	}
	s.Close()
}
