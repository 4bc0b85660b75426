package hookwarden

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestReplayInBatches: the loop both stores run around their batch
// transaction: batches of BatchSize in order, progress after each, the
// result summed, each destination once, the audit entry prepared once and
// its id kept from the batch that wrote it.
func TestReplayInBatches(t *testing.T) {
	ids := []int64{1, 2, 3, 4, 5}
	var batches, progress []string
	var audits []AuditEntry
	batch := func(ctx context.Context, part []int64, force bool, audit *AuditEntry, sofar ReplayResult) (int, []ReplaySkip, []string, error) {
		batches = append(batches, fmt.Sprintf("%v force=%v sofar=%d/%d", part, force, sofar.Replayed, sofar.Selected))
		audits = append(audits, *audit)
		if audit.ID == 0 {
			audit.ID = 42 // the first batch writes the entry
		}
		if part[0] == 3 {
			return 1, []ReplaySkip{{JobID: 4, Reason: SkipInFlight}}, []string{"s/b"}, nil
		}
		return len(part), nil, []string{"s/a", "s/b"}, nil
	}
	res, err := ReplayInBatches(context.Background(), ids, ReplaySelector{Dead: true},
		ReplayOptions{BatchSize: 2, Pause: time.Millisecond, Force: true, Audit: &AuditEntry{Origin: AuditCLI, Actor: "op"},
			Progress: func(done, total int) { progress = append(progress, fmt.Sprintf("%d/%d", done, total)) }},
		ReplayResult{Skipped: []ReplaySkip{{JobID: 9, Reason: SkipNotFound}}}, batch)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[[1 2] force=true sofar=0/5 [3 4] force=true sofar=2/5 [5] force=true sofar=3/5]"; fmt.Sprint(batches) != want {
		t.Errorf("batches %v, want %s", batches, want)
	}
	if fmt.Sprint(progress) != "[2/5 4/5 5/5]" {
		t.Errorf("progress %v, want 2/5 4/5 5/5", progress)
	}
	if res.Selected != 5 || res.Replayed != 4 || len(res.Skipped) != 2 || res.Skipped[0].JobID != 9 || res.Skipped[1].JobID != 4 ||
		fmt.Sprint(res.Destinations) != "[s/a s/b]" || res.AuditID != 42 {
		t.Errorf("result %+v, want 5 selected, 4 replayed, the selection's skip then the batch's, s/a and s/b once, audit 42", res)
	}
	if a := audits[0]; a.Action != "replay" || string(a.Args) != `{"dead":true,"force":true}` || a.ID != 0 || audits[1].ID != 42 {
		t.Errorf("audit entries %+v, want action replay, the selector's args, written by the first batch", audits)
	}

	// Defaults: one batch of DefaultReplayBatch; no audit.
	var sizes []int
	res, err = ReplayInBatches(context.Background(), make([]int64, DefaultReplayBatch+1), ReplaySelector{}, ReplayOptions{}, ReplayResult{},
		func(ctx context.Context, part []int64, force bool, audit *AuditEntry, sofar ReplayResult) (int, []ReplaySkip, []string, error) {
			if audit != nil {
				t.Error("an audit entry without opt.Audit")
			}
			sizes = append(sizes, len(part))
			return len(part), nil, nil, nil
		})
	if err != nil || fmt.Sprint(sizes) != fmt.Sprint([]int{DefaultReplayBatch, 1}) || res.AuditID != 0 {
		t.Errorf("default batches %v, %+v %v", sizes, res, err)
	}
}

// TestReplayInBatchesStops: a bad audit entry resets nothing; a batch's
// error and a cancelled context stop the replay with what was done.
func TestReplayInBatchesStops(t *testing.T) {
	calls := 0
	boom := errors.New("boom")
	batch := func(ctx context.Context, part []int64, force bool, audit *AuditEntry, sofar ReplayResult) (int, []ReplaySkip, []string, error) {
		calls++
		if part[0] == 2 {
			return 0, nil, nil, boom
		}
		return len(part), nil, nil, nil
	}
	ids := []int64{1, 2, 3}
	if _, err := ReplayInBatches(context.Background(), ids, ReplaySelector{}, ReplayOptions{Audit: &AuditEntry{Origin: "mail"}},
		ReplayResult{}, batch); err == nil || calls != 0 {
		t.Fatalf("bad audit origin: %v after %d batches, want an error before any", err, calls)
	}
	res, err := ReplayInBatches(context.Background(), ids, ReplaySelector{}, ReplayOptions{BatchSize: 1}, ReplayResult{}, batch)
	if !errors.Is(err, boom) || err.Error() != "replay: boom" || res.Replayed != 1 || calls != 2 {
		t.Fatalf("batch error: %+v %v after %d batches, want replay: boom after one replayed", res, err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	res, err = ReplayInBatches(ctx, []int64{1, 3}, ReplaySelector{}, ReplayOptions{BatchSize: 1, Pause: time.Hour}, ReplayResult{},
		func(ctx context.Context, part []int64, force bool, audit *AuditEntry, sofar ReplayResult) (int, []ReplaySkip, []string, error) {
			calls++
			cancel() // the operator gives up during the first batch
			return 1, nil, nil, nil
		})
	if !errors.Is(err, context.Canceled) || res.Replayed != 1 || calls != 1 {
		t.Fatalf("cancelled: %+v %v after %d batches, want context.Canceled after the first", res, err, calls)
	}
}
