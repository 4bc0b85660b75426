package metrics

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hookwarden/hookwarden"
)

type pauseReader struct{ paused map[string]bool }

func (r *pauseReader) OutboxStats(_ context.Context, ds []string) ([]hookwarden.OutboxStat, error) {
	var out []hookwarden.OutboxStat
	for _, d := range ds {
		out = append(out, hookwarden.OutboxStat{Destination: d})
	}
	return out, nil
}

func (r *pauseReader) Paused(_ context.Context, ds []string) ([]bool, error) {
	var out []bool
	for _, d := range ds {
		out = append(out, r.paused[d])
	}
	return out, nil
}

// A destination that becomes paused (pause_after's failures) is said in
// the log once, with the command that resumes it; its resume too.
func TestPauseIsLogged(t *testing.T) {
	var buf bytes.Buffer
	r := &pauseReader{paused: map[string]bool{}}
	c := &outboxCollector{r: r, log: slog.New(slog.NewTextHandler(&buf, nil))}
	c.setDestinations([]string{"std/app", "std/other"})
	c.refresh(context.Background())
	if buf.Len() != 0 {
		t.Fatalf("nothing paused, yet: %s", buf.String())
	}
	r.paused["std/app"] = true
	c.refresh(context.Background())
	c.refresh(context.Background())
	if got := buf.String(); strings.Count(got, "destination paused") != 1 || !strings.Contains(got, "destination=std/app") ||
		!strings.Contains(got, `resume="hookwarden resume std/app"`) || strings.Contains(got, "std/other") {
		t.Fatalf("log after the pause:\n%s", got)
	}
	buf.Reset()
	r.paused["std/app"] = false
	c.refresh(context.Background())
	if got := buf.String(); !strings.Contains(got, "destination resumed") {
		t.Fatalf("log after the resume:\n%s", got)
	}
}
