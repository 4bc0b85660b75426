package pgstore

// Finishes that arrive together share a statement. A worker with more
// slots than it chains (worker's chainMaxConcurrency) records each attempt
// with its own Finish, from a goroutine of its own, so under load many are
// under way at once; each alone is a statement and a commit whose fixed
// costs (the executor's start, the snapshot, the commit record, the wake
// of the WAL flush) outweigh its two rows. Here at most finishWriters
// statements are under way at once; a Finish that arrives meanwhile waits
// and is written with every other one waiting, in one statement of arrays
// (finishManySQL), by the first of them when a writer is done. Nobody
// waits for a batch to fill: a Finish alone is written at once.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookwarden/hookwarden"
)

// finishWriters: statements of finishes under way at once. Two let one
// batch execute while another's commit waits for its flush.
const finishWriters = 2

// finishBatchMax bounds the finishes of one statement.
const finishBatchMax = 256

// finishGroup holds the finishes waiting for a writer.
type finishGroup struct {
	mu      sync.Mutex
	writers int
	waiting []*finishCall
}

// finishCall is one Finish waiting for its statement.
type finishCall struct {
	a    hookwarden.Attempt
	done chan struct{} // closed when written (err set) or when lead is set
	err  error
	lead []*finishCall // the batch this call is to write, itself included
}

// finishGrouped writes a (a finish that changes no flow state) in a
// statement with the others waiting, and returns that statement's outcome.
func (s *Store) finishGrouped(ctx context.Context, a hookwarden.Attempt) error {
	g := &s.finishes
	call := &finishCall{a: a, done: make(chan struct{})}
	g.mu.Lock()
	if g.writers < finishWriters {
		g.writers++
		g.mu.Unlock()
		return s.writeFinishes(ctx, call, []*finishCall{call})
	}
	g.waiting = append(g.waiting, call)
	g.mu.Unlock()
	select {
	case <-call.done:
	case <-ctx.Done():
		// Given up before a writer took it: nothing of it is written. Once
		// taken, its statement may be under way: wait for its outcome (the
		// writer's deadline, Options.Timeout, bounds it).
		g.mu.Lock()
		if i := slices.Index(g.waiting, call); i >= 0 {
			g.waiting = slices.Delete(g.waiting, i, i+1)
			g.mu.Unlock()
			return fmt.Errorf("finish job %d: %w", a.JobID, ctx.Err())
		}
		g.mu.Unlock()
		<-call.done
	}
	if call.lead != nil {
		return s.writeFinishes(ctx, call, call.lead)
	}
	return call.err
}

// writeFinishes writes batch, which includes self, reports each its
// outcome, and hands the writer's place to the first of the calls waiting
// since (with all of them), or gives it up.
func (s *Store) writeFinishes(ctx context.Context, self *finishCall, batch []*finishCall) error {
	err := s.finishMany(ctx, batch)
	for _, c := range batch {
		if c != self {
			c.err = err
			close(c.done)
		}
	}
	g := &s.finishes
	g.mu.Lock()
	if len(g.waiting) == 0 {
		g.writers--
		g.mu.Unlock()
		return err
	}
	n := min(len(g.waiting), finishBatchMax)
	next := g.waiting[:n:n]
	g.waiting = append([]*finishCall(nil), g.waiting[n:]...)
	g.mu.Unlock()
	next[0].lead = next
	close(next[0].done)
	return err
}

// finishManySQL is finishSQL for many attempts at once, each element of
// the arrays one attempt: $1 jobs, $2 numbers, $3 started, $4 durations
// (µs), $5 statuses, $6 exit codes, $7 errors, $8 responses, $9 verdicts,
// $10 the retries' due times; $11 the store's clock (NULL: now()). Each
// verdict sets what finishSQL's does and leaves the other columns as they
// are (a retry keeps its state: count_jobs_state does not fire). A job's
// verdict applies only to the lease that made the attempt, as one at a
// time. The elements come in job id order, which the join follows: two
// batches can wait on each other only over a stale attempt (a job in both),
// and then the server's deadlock check fails one, whose jobs keep their
// leases (at least once, as any failed Finish).
const finishManySQL = `WITH v AS (
	SELECT * FROM unnest($1::bigint[], $2::int[], $3::timestamptz[], $4::bigint[], $5::int[], $6::int[],
		$7::text[], $8::bytea[], $9::text[], $10::timestamptz[])
		AS v(job_id, number, started_at, duration_us, status_code, exit_code, error, response, verdict, retry_at)
), a AS (
	INSERT INTO attempts (job_id, number, started_at, duration_us, status_code, exit_code, error, response, verdict)
	SELECT job_id, number, started_at, duration_us, status_code, exit_code, error, response, verdict FROM v
), j AS (
	UPDATE jobs SET state = CASE v.verdict WHEN 'retry' THEN jobs.state ELSE v.verdict END,
		next_at = CASE v.verdict WHEN 'retry' THEN v.retry_at ELSE jobs.next_at END,
		leased_until = NULL,
		last_error = CASE v.verdict WHEN 'delivered' THEN NULL ELSE v.error END,
		finished_at = CASE v.verdict WHEN 'retry' THEN jobs.finished_at ELSE COALESCE($11::timestamptz, now()) END,
		dead_count = jobs.dead_count + CASE v.verdict WHEN 'dead' THEN 1 ELSE 0 END
	FROM v WHERE jobs.id = v.job_id AND jobs.state = 'pending' AND jobs.attempts = v.number
	RETURNING 1
)
SELECT count(*) FROM j`

// finishMany writes batch's attempts and verdicts: finishSQL for one,
// finishManySQL for more. Either way one statement, its own transaction:
// all of them are written or none.
func (s *Store) finishMany(ctx context.Context, batch []*finishCall) error {
	if len(batch) > 1 {
		ctx = context.WithoutCancel(ctx) // not one caller's to cancel: Options.Timeout bounds it
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	start := time.Now()
	var err error
	if len(batch) == 1 {
		sql, args := s.finishStatement(batch[0].a, false)
		_, err = s.pool.Exec(ctx, sql, args...)
	} else {
		batch = slices.SortedFunc(slices.Values(batch), func(x, y *finishCall) int {
			return cmp.Or(cmp.Compare(x.a.JobID, y.a.JobID), cmp.Compare(x.a.Number, y.a.Number))
		})
		n := len(batch)
		var (
			jobs      = make([]int64, n)
			numbers   = make([]int32, n)
			started   = make([]time.Time, n)
			durations = make([]int64, n)
			statuses  = make([]*int32, n)
			exits     = make([]*int32, n)
			errs      = make([]*string, n)
			responses = make([][]byte, n)
			verdicts  = make([]string, n)
			retries   = make([]*time.Time, n)
		)
		for i, c := range batch {
			a := c.a
			jobs[i], numbers[i], started[i] = a.JobID, int32(a.Number), a.StartedAt.UTC()
			durations[i], responses[i], verdicts[i] = a.Duration.Microseconds(), a.Response, string(a.Verdict)
			if a.StatusCode != 0 {
				v := int32(a.StatusCode)
				statuses[i] = &v
			}
			if a.ExitCode >= 0 {
				v := int32(a.ExitCode)
				exits[i] = &v
			}
			if a.Error != "" {
				v := cleanText(a.Error)
				errs[i] = &v
			}
			if a.Verdict == hookwarden.Retry {
				v := a.RetryAt.UTC()
				retries[i] = &v
			}
		}
		_, err = s.pool.Exec(ctx, finishManySQL, jobs, numbers, started, durations, statuses, exits, errs, responses,
			verdicts, retries, s.now())
	}
	s.committed(len(batch), time.Since(start), err)
	if err != nil {
		return fmt.Errorf("finish %d jobs: %w", len(batch), err)
	}
	return nil
}

// cleanText is s as a text column takes it: SQLite keeps what PostgreSQL
// refuses (NUL, bytes that are not UTF-8), an error quoting a response.
func cleanText(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}
