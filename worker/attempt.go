package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/hookwarden/hookwarden"
)

const (
	// maxStoredResponse caps what one attempt stores as its response, whatever
	// the deliverer returned (the HTTP and command deliverers cap far lower).
	maxStoredResponse = 128 << 10
	// maxErrorText caps an attempt's error text.
	maxErrorText = 2 << 10
)

// errShutdown marks attempts cut short when the drain timeout expired.
var errShutdown = errors.New("interrupted by shutdown")

// deliverSafely runs one attempt, turning a panic or a runtime.Goexit of the
// deliverer into a transient failure. The deliverer runs on its own goroutine
// because a Goexit cannot be stopped on the goroutine that calls it; the
// caller always waits for that goroutine, so it has an owner.
func deliverSafely(ctx context.Context, d Deliverer, job *hookwarden.Job, log *slog.Logger) Result {
	ch := make(chan Result, 1)
	go func() {
		returned := false
		defer func() {
			if returned {
				return
			}
			var err error
			if r := recover(); r != nil {
				err = fmt.Errorf("deliverer panicked: %v", r)
				log.Error("deliverer panicked", "destination", job.Destination, "job", job.ID,
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			} else {
				err = errors.New("deliverer called runtime.Goexit")
				log.Error("deliverer called runtime.Goexit", "destination", job.Destination, "job", job.ID)
			}
			ch <- Result{Class: Transient, Err: err, ExitCode: -1}
		}()
		res := d.Deliver(ctx, job)
		returned = true
		ch <- res
	}()
	return <-ch
}

// judge turns a Result into the Attempt to record: the verdict and, for a
// retry, when the job is due again. finished is the time the attempt ended.
// aborted says the attempt was cancelled by shutdown: anything but a success
// is then due again at once, whatever its class, because the failure was ours.
func judge(res Result, job *hookwarden.Job, dest *Destination, started time.Time, dur time.Duration,
	finished time.Time, rnd float64, aborted bool) hookwarden.Attempt {
	a := hookwarden.Attempt{
		JobID:      job.ID,
		Number:     job.Attempt,
		StartedAt:  started,
		Duration:   dur,
		StatusCode: res.StatusCode,
		ExitCode:   res.ExitCode,
		Response:   capOutput(res.Response, maxStoredResponse/2),
	}
	errText := ""
	switch {
	case res.Err != nil:
		errText = res.Err.Error()
	case res.TimedOut:
		errText = "timed out"
	}
	class := res.Class
	if class != Success && class != Transient && class != Permanent {
		class = Transient
		if errText == "" {
			errText = fmt.Sprintf("deliverer returned no class (%d)", int(res.Class))
		}
	}

	switch {
	case class == Success:
		a.Verdict = hookwarden.Delivered
	case aborted:
		a.Verdict = hookwarden.Retry
		a.RetryAt = finished
		errText = joinText(errShutdown.Error(), errText)
	case class == Permanent:
		a.Verdict = hookwarden.Dead
	case job.Attempt >= dest.MaxAttempts && !job.Probe:
		// A probe's attempt is given back when it fails (the store
		// does), so a paused destination's jobs never run out of attempts.
		a.Verdict = hookwarden.Dead
		errText = joinText(fmt.Sprintf("giving up after %d attempts", job.Attempt), errText)
	default:
		a.Verdict = hookwarden.Retry
		a.RetryAt = finished.Add(NextDelay(job.Attempt, dest.Backoff, res.RetryAfter, rnd))
	}
	// A retryable failure counts toward pause_after; shutdown's do not.
	a.Failed = class == Transient && !aborted
	a.Probe, a.Destination = job.Probe, job.Destination
	if len(errText) > maxErrorText {
		errText = errText[:maxErrorText] + "..."
	}
	a.Error = errText
	return a
}

func joinText(prefix, s string) string {
	if s == "" {
		return prefix
	}
	return prefix + ": " + s
}

// capOutput keeps the first and last keep bytes of b with a marker saying
// how much was left out in between.
func capOutput(b []byte, keep int) []byte {
	if len(b) <= 2*keep {
		return b
	}
	c := newCapture(keep, keep)
	_, _ = c.Write(b)
	return c.Bytes()
}
