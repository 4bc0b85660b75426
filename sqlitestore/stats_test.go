package sqlitestore

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

func TestRecentCountsAndLastAccepted(t *testing.T) {
	s := MustOpen(t, Options{})
	ctx := context.Background()
	now := time.Now().UTC()
	rec := func(r *hookwarden.Receipt, at time.Time) {
		t.Helper()
		r.ReceivedAt = at
		if _, err := s.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	rec(receipt("stripe", "evt_old", `{"n":0}`), now.Add(-48*time.Hour))    // outside both windows
	rec(receipt("stripe", "evt_old", `{"n":0}`), now.Add(-3*time.Hour))     // a day-old duplicate of it
	rec(receipt("stripe", "evt_day", `{"n":1}`), now.Add(-5*time.Hour))     // accepted in the day
	rec(receipt("stripe", "evt_hour", `{"n":2}`), now.Add(-10*time.Minute)) // accepted in the hour
	rec(receipt("stripe", "evt_hour", `{"n":3}`), now.Add(-5*time.Minute))  // divergent duplicate, in the hour
	rec(receipt("stripe", "", `{}`), now.Add(-time.Minute))                 // quarantined: neither
	rec(receipt("github", "gh_1", `{}`), now.Add(-time.Minute))
	// A batch: one new element, one repeat of evt_day.
	batch := receipt("stripe", "", `[{"id":"evt_b1"},{"id":"evt_day"}]`)
	batch.QuarantineReason = ""
	for _, id := range []string{"evt_b1", "evt_day"} {
		el := []byte(`{"id":"` + id + `"}`)
		batch.Events = append(batch.Events, hookwarden.Event{ID: id, Body: el, BodySHA256: sha256.Sum256(el)})
	}
	rec(batch, now.Add(-2*time.Minute))

	got, err := s.RecentCounts(ctx, []string{"stripe", "github", "silent"}, now.Add(-time.Hour), now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source string
		want   [2]hookwarden.WindowCounts
	}{
		{"stripe", [2]hookwarden.WindowCounts{{Accepted: 2, Duplicates: 2}, {Accepted: 3, Duplicates: 3}}},
		{"github", [2]hookwarden.WindowCounts{{Accepted: 1}, {Accepted: 1}}},
		{"silent", [2]hookwarden.WindowCounts{}},
	} {
		if got[c.source] != c.want {
			t.Errorf("%s: got %+v, want %+v", c.source, got[c.source], c.want)
		}
	}

	last, err := s.LastAccepted(ctx, []string{"stripe", "github", "silent"})
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(-2 * time.Minute).Truncate(time.Microsecond); !last["stripe"].Equal(want) {
		t.Errorf("last accepted of stripe = %v, want %v (the batch's new element)", last["stripe"], want)
	}
	if _, ok := last["silent"]; ok {
		t.Error("a source without events has a last accepted time")
	}
}
