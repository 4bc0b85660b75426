package worker

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hookwarden/hookwarden"
)

func TestNextDelay(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Second, Max: time.Minute}
	tests := []struct {
		name       string
		attempt    int
		b          Backoff
		retryAfter time.Duration
		rnd        float64
		want       time.Duration
	}{
		{"first attempt rnd 0", 1, b, 0, 0, 0},
		{"first attempt rnd 1", 1, b, 0, 1, time.Second},
		{"second attempt rnd 1", 2, b, 0, 1, 2 * time.Second},
		{"fourth attempt rnd 1", 4, b, 0, 1, 8 * time.Second},
		{"fourth attempt rnd 0.5", 4, b, 0, 0.5, 4 * time.Second},
		{"capped at max", 7, b, 0, 1, time.Minute}, // 64s > 60s
		{"capped at max, rnd 0", 7, b, 0, 0, 0},
		{"huge attempt does not overflow", 10_000, b, 0, 1, time.Minute},
		{"attempt 0 counts as 1", 0, b, 0, 1, time.Second},
		{"rnd above 1 clamped", 1, b, 0, 7, time.Second},
		{"rnd negative clamped", 3, b, 0, -1, 0},
		{"rnd NaN clamped", 3, b, 0, math.NaN(), 0},
		{"retry-after honoured", 1, b, 30 * time.Second, 0, 30 * time.Second},
		{"retry-after capped at max", 1, b, time.Hour, 1, time.Minute},
		{"retry-after shorter than backoff", 5, b, 2 * time.Second, 1, 16 * time.Second},
		{"zero backoff takes defaults", 1, Backoff{}, 0, 1, time.Second},
		{"zero backoff cap is 1h", 30, Backoff{}, 0, 1, time.Hour},
		{"max below initial", 1, Backoff{Initial: time.Minute, Max: time.Second}, 0, 1, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NextDelay(tt.attempt, tt.b, tt.retryAfter, tt.rnd); got != tt.want {
				t.Errorf("NextDelay(%d, %+v, %s, %v) = %s, want %s",
					tt.attempt, tt.b, tt.retryAfter, tt.rnd, got, tt.want)
			}
		})
	}
}

func TestNextDelayBounds(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second}
	for attempt := 1; attempt <= 20; attempt++ {
		ceiling := min(b.Initial<<(attempt-1), b.Max)
		for _, rnd := range []float64{0, 0.1, 0.5, 0.999, 1} {
			got := NextDelay(attempt, b, 0, rnd)
			if got < 0 || got > ceiling {
				t.Errorf("NextDelay(%d, rnd=%v) = %s, want within [0, %s]", attempt, rnd, got, ceiling)
			}
		}
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dest := Destination{MaxAttempts: 3, Backoff: Backoff{Initial: time.Second, Max: time.Minute}}
	tests := []struct {
		name      string
		res       Result
		attempt   int
		aborted   bool
		want      hookwarden.Verdict
		wantRetry time.Duration // RetryAt - t0 when Retry
		wantErr   string
	}{
		{"success", Result{Class: Success, StatusCode: 200}, 1, false, hookwarden.Delivered, 0, ""},
		{"success on last attempt", Result{Class: Success}, 3, false, hookwarden.Delivered, 0, ""},
		{"success despite shutdown", Result{Class: Success}, 1, true, hookwarden.Delivered, 0, ""},
		{"permanent", Result{Class: Permanent, Err: errors.New("HTTP 422")}, 1, false, hookwarden.Dead, 0, "HTTP 422"},
		{"transient", Result{Class: Transient, Err: errors.New("HTTP 503")}, 2, false, hookwarden.Retry, time.Second, "HTTP 503"},
		{"transient retry-after", Result{Class: Transient, RetryAfter: 30 * time.Second}, 1, false, hookwarden.Retry, 30 * time.Second, ""},
		{"transient exhausted", Result{Class: Transient, Err: errors.New("HTTP 503")}, 3, false, hookwarden.Dead, 0, "giving up after 3 attempts: HTTP 503"},
		{"timed out", Result{Class: Transient, TimedOut: true}, 1, false, hookwarden.Retry, 500 * time.Millisecond, "timed out"},
		{"no class is transient", Result{}, 1, false, hookwarden.Retry, 500 * time.Millisecond, "deliverer returned no class (0)"},
		{"aborted is due now", Result{Class: Transient, Err: errors.New("context canceled")}, 1, true, hookwarden.Retry, 0, "interrupted by shutdown: context canceled"},
		{"aborted on last attempt is not dead", Result{Class: Transient}, 3, true, hookwarden.Retry, 0, "interrupted by shutdown"},
		{"aborted permanent is retried", Result{Class: Permanent}, 1, true, hookwarden.Retry, 0, "interrupted by shutdown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := &hookwarden.Job{ID: 7, Attempt: tt.attempt}
			a := judge(tt.res, job, &dest, t0.Add(-time.Second), time.Second, t0, 0.5, tt.aborted)
			if a.Verdict != tt.want {
				t.Fatalf("verdict = %s, want %s (error %q)", a.Verdict, tt.want, a.Error)
			}
			if a.JobID != 7 || a.Number != tt.attempt || a.Duration != time.Second || !a.StartedAt.Equal(t0.Add(-time.Second)) {
				t.Errorf("attempt fields = %+v", a)
			}
			if a.Error != tt.wantErr {
				t.Errorf("error = %q, want %q", a.Error, tt.wantErr)
			}
			if tt.want == hookwarden.Retry {
				if got := a.RetryAt.Sub(t0); got != tt.wantRetry {
					t.Errorf("RetryAt - finished = %s, want %s", got, tt.wantRetry)
				}
			} else if !a.RetryAt.IsZero() {
				t.Errorf("RetryAt = %s, want zero", a.RetryAt)
			}
		})
	}
}

func TestJudgeCapsResponseAndError(t *testing.T) {
	t.Parallel()
	res := Result{
		Class:    Transient,
		Err:      errors.New(strings.Repeat("e", 10_000)),
		Response: bytes.Repeat([]byte("r"), 1<<20),
	}
	a := judge(res, &hookwarden.Job{Attempt: 1}, &Destination{MaxAttempts: 5}, time.Now(), 0, time.Now(), 0, false)
	if len(a.Error) > maxErrorText+3 {
		t.Errorf("error text is %d bytes, want at most %d", len(a.Error), maxErrorText+3)
	}
	if len(a.Response) > maxStoredResponse+64 {
		t.Errorf("response is %d bytes, want at most %d", len(a.Response), maxStoredResponse+64)
	}
}

func TestCapture(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"empty", nil, ""},
		{"fits in head", []string{"abc"}, "abc"},
		{"fits exactly", []string{"abcd", "wxyz"}, "abcdwxyz"},
		{"one byte over", []string{"abcdwxyz!"}, "abcd\n...[1 bytes omitted]...\nxyz!"},
		{"single big write", []string{"0123456789"}, "0123\n...[2 bytes omitted]...\n6789"},
		{"small writes wrap the ring", []string{"ab", "cd", "ef", "gh", "ij", "kl"}, "abcd\n...[4 bytes omitted]...\nijkl"},
		{"partial ring wrap", []string{"abcd", "efg", "hi"}, "abcd\n...[1 bytes omitted]...\nfghi"},
		{"byte by byte", strings.Split("abcdefghijklmnop", ""), "abcd\n...[8 bytes omitted]...\nmnop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(4, 4)
			for _, w := range tt.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := string(c.Bytes()); got != tt.want {
				t.Errorf("Bytes() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClassString(t *testing.T) {
	t.Parallel()
	for c, want := range map[Class]string{Success: "success", Transient: "transient", Permanent: "permanent", 0: "unknown"} {
		if got := c.String(); got != want {
			t.Errorf("Class(%d).String() = %q, want %q", int(c), got, want)
		}
	}
}

// TestJudgeFlow: which attempts count toward pause_after (Failed), and a
// probe, whose attempt the store gives back, is never dead-lettered for
// running out of attempts.
func TestJudgeFlow(t *testing.T) {
	t.Parallel()
	dest := Destination{MaxAttempts: 3}
	now := time.Now()
	for _, tt := range []struct {
		name           string
		res            Result
		attempt        int
		probe, aborted bool
		verdict        hookwarden.Verdict
		failed         bool
	}{
		{"transient counts", Result{Class: Transient}, 1, false, false, hookwarden.Retry, true},
		{"exhausted counts", Result{Class: Transient}, 3, false, false, hookwarden.Dead, true},
		{"poison does not count", Result{Class: Permanent}, 1, false, false, hookwarden.Dead, false},
		{"shutdown does not count", Result{Class: Transient}, 1, false, true, hookwarden.Retry, false},
		{"success", Result{Class: Success}, 1, false, false, hookwarden.Delivered, false},
		{"failed probe past max_attempts is retried", Result{Class: Transient}, 3, true, false, hookwarden.Retry, true},
		{"poison probe is dead", Result{Class: Permanent}, 1, true, false, hookwarden.Dead, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := judge(tt.res, &hookwarden.Job{ID: 1, Attempt: tt.attempt, Probe: tt.probe}, &dest, now, 0, now, 0, tt.aborted)
			if a.Verdict != tt.verdict || a.Failed != tt.failed || a.Probe != tt.probe {
				t.Fatalf("verdict %s failed %v probe %v, want %s %v %v", a.Verdict, a.Failed, a.Probe, tt.verdict, tt.failed, tt.probe)
			}
		})
	}
}
