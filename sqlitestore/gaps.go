package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"
)

// SourcePolicy is what gaps needs to know of a configured source.
type SourcePolicy struct {
	Name string
	// RetryHorizon is how long the provider keeps retrying an undelivered
	// event; a window longer than this may have lost events for good.
	RetryHorizon time.Duration
	// ExpectWithin: silence longer than this is reported (0: not checked).
	ExpectWithin time.Duration
}

// GapOptions tune Gaps.
type GapOptions struct {
	// Since drops windows that ended before it (zero: all history).
	Since time.Time
	// MinClean hides windows after a clean stop shorter than this: a restart
	// (deploy) is not an outage worth a line. Windows after a crash are
	// always listed. Default 5s.
	MinClean time.Duration
	// Stale is how old the heartbeat of the last run may be before that run
	// counts as dead: a little more than the heartbeat period (default 10s).
	Stale time.Duration
	// Sources are the configured sources; without them only outages are
	// listed and none is flagged.
	Sources []SourcePolicy
}

// Outage is a window in which no serve process was running on the file.
type Outage struct {
	Start time.Time `json:"start"`
	// End is the start of the next run; zero while the window is open (no
	// run since, or the last run died): then Length runs to now.
	End           time.Time     `json:"end,omitzero"`
	Open          bool          `json:"open,omitempty"`
	Length        time.Duration `json:"-"`
	LengthSeconds float64       `json:"length_seconds"`
	// Crash is set when the run before the window ended without a clean
	// stop: Start is its last heartbeat, up to one heartbeat period before
	// it died.
	Crash bool `json:"crash"`
	// BeyondRetryHorizon lists the sources whose retry_horizon is shorter
	// than the window: events they sent in it may be lost for good.
	BeyondRetryHorizon []string `json:"beyond_retry_horizon,omitempty"`
	RunBefore          int64    `json:"run_before,omitempty"`
	RunAfter           int64    `json:"run_after,omitempty"`
}

// Silence is a window longer than a source's expect_within with no request
// from it (of any kind: accepted, duplicate, quarantined).
type Silence struct {
	Source string `json:"source"`
	// Start is the last request before the silence (or Since / the first
	// run, when there was none); End the first request after it, zero if
	// none yet (Open).
	Start         time.Time     `json:"start"`
	End           time.Time     `json:"end,omitzero"`
	Open          bool          `json:"open,omitempty"`
	Length        time.Duration `json:"-"`
	LengthSeconds float64       `json:"length_seconds"`
	ExpectWithin  time.Duration `json:"-"`
	ExpectSeconds float64       `json:"expect_within_seconds"`
	// BeyondRetryHorizon: longer than the source's retry_horizon.
	BeyondRetryHorizon bool `json:"beyond_retry_horizon"`
}

// GapReport is the answer of Gaps.
type GapReport struct {
	Now      time.Time `json:"now"`
	Runs     int       `json:"runs"`
	Outages  []Outage  `json:"outages"`
	Silences []Silence `json:"silences"`
}

// Run is one serve process's record.
type Run struct {
	ID          int64
	StartedAt   time.Time
	HeartbeatAt time.Time
	StoppedAt   time.Time // zero: no clean stop (crashed, or still running)
	Version     string
	PID         int
}

// Runs lists every recorded serve process in start order.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	var runs []Run
	err := eachRow(ctx, s.rdb, `SELECT id, started_at, heartbeat_at, stopped_at, version, pid FROM runs ORDER BY started_at, id`,
		func(rows *sql.Rows) error {
			var r Run
			var start, beat string
			var stop sql.NullString
			if err := rows.Scan(&r.ID, &start, &beat, &stop, &r.Version, &r.PID); err != nil {
				return err
			}
			if err := parseInto(&r.StartedAt, start); err != nil {
				return err
			}
			if err := parseInto(&r.HeartbeatAt, beat); err != nil {
				return err
			}
			if err := parseNullInto(&r.StoppedAt, stop); err != nil {
				return err
			}
			runs = append(runs, r)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return runs, nil
}

// Gaps lists the outage windows found in the run history and the silences of
// sources with an expect_within. The clock is the store's (Options.Now).
func (s *Store) Gaps(ctx context.Context, opt GapOptions) (GapReport, error) {
	if opt.MinClean <= 0 {
		opt.MinClean = 5 * time.Second
	}
	if opt.Stale <= 0 {
		opt.Stale = 10 * time.Second
	}
	now := s.now().UTC()
	rep := GapReport{Now: now, Outages: []Outage{}, Silences: []Silence{}}
	runs, err := s.Runs(ctx)
	if err != nil {
		return rep, err
	}
	rep.Runs = len(runs)
	horizon := func(o *Outage) {
		for _, p := range opt.Sources {
			if o.Length > p.RetryHorizon {
				o.BeyondRetryHorizon = append(o.BeyondRetryHorizon, p.Name)
			}
		}
		o.LengthSeconds = o.Length.Seconds()
	}
	// reach is the latest moment the file shows any run alive: runs may
	// overlap (two processes by mistake) and must not produce a window.
	var reach time.Time
	var reachRun *Run
	for i := range runs {
		r := &runs[i]
		if reachRun != nil && r.StartedAt.After(reach) {
			o := Outage{Start: reach, End: r.StartedAt, Length: r.StartedAt.Sub(reach),
				Crash: reachRun.StoppedAt.IsZero(), RunBefore: reachRun.ID, RunAfter: r.ID}
			if (o.Crash || o.Length >= opt.MinClean) && !o.End.Before(opt.Since) {
				horizon(&o)
				rep.Outages = append(rep.Outages, o)
			}
		}
		end := r.HeartbeatAt
		if !r.StoppedAt.IsZero() && r.StoppedAt.After(end) {
			end = r.StoppedAt
		}
		if reachRun == nil || end.After(reach) {
			reach, reachRun = end, r
		}
	}
	// The window since the last run, if it stopped or its heartbeat is stale.
	if reachRun != nil {
		last := reachRun
		alive := last.StoppedAt.IsZero() && now.Sub(last.HeartbeatAt) <= opt.Stale
		if !alive && now.After(reach) {
			o := Outage{Start: reach, Open: true, Length: now.Sub(reach), Crash: last.StoppedAt.IsZero(), RunBefore: last.ID}
			if o.Crash || o.Length >= opt.MinClean {
				horizon(&o)
				rep.Outages = append(rep.Outages, o)
			}
		}
	}
	first := now
	if len(runs) > 0 {
		first = runs[0].StartedAt
	}
	for _, p := range opt.Sources {
		if p.ExpectWithin <= 0 {
			continue
		}
		sil, err := s.silences(ctx, p, opt.Since, first, now)
		if err != nil {
			return rep, err
		}
		rep.Silences = append(rep.Silences, sil...)
	}
	sort.SliceStable(rep.Silences, func(i, j int) bool { return rep.Silences[i].Start.Before(rep.Silences[j].Start) })
	return rep, nil
}

// silences finds gaps between consecutive requests of one source longer than
// its expect_within, and the silence since its last request.
//
// retention.payloads deletes the receipts of pruned events; pruned_totals
// keeps the time of the last one it deleted per source. Every request after
// that time is still in the file, so silences are computed from there on;
// before it only some receipts remain (held events, quarantined requests),
// and the gaps between them are not silences: they are not reported.
func (s *Store) silences(ctx context.Context, p SourcePolicy, since, firstRun, now time.Time) ([]Silence, error) {
	var out []Silence
	add := func(start, end time.Time, open bool) {
		l := end.Sub(start)
		if l <= p.ExpectWithin {
			return
		}
		sl := Silence{Source: p.Name, Start: start, Open: open, Length: l, LengthSeconds: l.Seconds(),
			ExpectWithin: p.ExpectWithin, ExpectSeconds: p.ExpectWithin.Seconds(), BeyondRetryHorizon: l > p.RetryHorizon}
		if !open {
			sl.End = end
		}
		out = append(out, sl)
	}
	from := ""
	if !since.IsZero() {
		from = fmtTime(since)
	}
	var prunedTo sql.NullString
	if err := s.rdb.QueryRowContext(ctx, `SELECT at FROM pruned_totals WHERE name = ? AND kind = 'last_received'`,
		p.Name).Scan(&prunedTo); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	seed, err := parseNullTime(prunedTo) // the last request retention deleted
	if err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	if seed.After(since) {
		from = fmtTime(seed)
	} else {
		seed = time.Time{}
	}
	// LAG over the (source, received_at) index: only the gaps come back.
	err = eachRow(ctx, s.rdb, `
SELECT prev, received_at FROM (
	SELECT received_at, LAG(received_at) OVER (ORDER BY received_at) AS prev
	FROM receipts WHERE source = ?1 AND received_at >= ?2)
WHERE prev IS NOT NULL AND (julianday(received_at) - julianday(prev)) * 86400.0 > ?3`,
		func(rows *sql.Rows) error {
			var a, b string
			if err := rows.Scan(&a, &b); err != nil {
				return err
			}
			start, err := parseTime(a)
			if err != nil {
				return err
			}
			end, err := parseTime(b)
			if err != nil {
				return err
			}
			add(start, end, false)
			return nil
		}, p.Name, from, p.ExpectWithin.Seconds())
	if err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	var first, last sql.NullString
	if err := s.rdb.QueryRowContext(ctx, `SELECT min(received_at), max(received_at) FROM receipts WHERE source = ? AND received_at >= ?`,
		p.Name, from).Scan(&first, &last); err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	prev, err := parseNullTime(last)
	if err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	if !seed.IsZero() {
		if f, err := parseNullTime(first); err == nil && !f.IsZero() {
			add(seed, f, false) // from the last pruned request to the first kept one
		}
		if prev.Before(seed) {
			prev = seed
		}
	}
	if prev.IsZero() {
		// Never heard from in the window: silent since the window (or the
		// first run) began.
		prev = firstRun
		if since.After(prev) {
			prev = since
		}
	}
	add(prev, now, true)
	return out, nil
}
