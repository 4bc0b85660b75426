package receiver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCommitDeadlinesShareAndBound: requests within one grain share a
// context; each one's deadline is at least the timeout away and at most a
// grain more; a later request gets a new one; the shared one does end.
func TestCommitDeadlinesShareAndBound(t *testing.T) {
	const d = 200 * time.Millisecond
	c := newCommitDeadlines(d)
	start := time.Now()
	a := c.get()
	b := c.get()
	got := time.Now()
	if a != b {
		t.Fatal("two requests within a grain got two contexts")
	}
	dl, ok := a.Deadline()
	if !ok || dl.Before(got.Add(d)) || dl.After(got.Add(d+d/10)) {
		t.Fatalf("deadline %s after start, want within [%s, %s]", dl.Sub(start), d, d+d/10)
	}
	time.Sleep(d / 10 * 2)
	later := c.get()
	if later == a {
		t.Fatal("a request two grains later reused a context ending too soon")
	}
	if dl2, _ := later.Deadline(); dl2.Before(time.Now().Add(d - time.Millisecond)) {
		t.Fatalf("later deadline %s away, want at least %s", time.Until(dl2), d)
	}
	select {
	case <-a.Done():
		if !errors.Is(a.Err(), context.DeadlineExceeded) {
			t.Fatalf("shared context ended with %v", a.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the shared context never ended")
	}
}
