package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/hookwarden/hookwarden"
	"time"
)

// Runs lists every recorded serve process in start order. Instance is set
// on the runs an export or migrate-store copied from PostgreSQL (schema 11);
// the file's own runs have none.
func (s *Store) Runs(ctx context.Context) ([]hookwarden.Run, error) {
	// A read-only open may hold an older schema, without runs.instance.
	var withInstance bool
	if err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pragma_table_info('runs') WHERE name = 'instance')`).
		Scan(&withInstance); err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	instance := `''`
	if withInstance {
		instance = `COALESCE(instance, '')`
	}
	var runs []hookwarden.Run
	err := eachRow(ctx, s.rdb, `SELECT id, started_at, heartbeat_at, stopped_at, version, pid, `+instance+` FROM runs ORDER BY started_at, id`,
		func(rows *sql.Rows) error {
			var r hookwarden.Run
			var start, beat string
			var stop sql.NullString
			if err := rows.Scan(&r.ID, &start, &beat, &stop, &r.Version, &r.PID, &r.Instance); err != nil {
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

// Gaps lists the outage windows and restarts found in the run history
// (hookwarden.Outages) and the silences of sources with an expect_within.
// The clock is the store's (Options.Now).
func (s *Store) Gaps(ctx context.Context, opt hookwarden.GapOptions) (hookwarden.GapReport, error) {
	now := s.now().UTC()
	runs, err := s.Runs(ctx)
	if err != nil {
		return hookwarden.GapReport{Now: now, Outages: []hookwarden.Outage{}, Silences: []hookwarden.Silence{}}, err
	}
	rep := hookwarden.GapsOf(runs, now, opt)
	un, err := s.unavailableMinutes(ctx, opt.Since)
	if err != nil {
		return rep, err
	}
	rep.AddUnavailable(un, opt.Since, opt.Sources)
	first := now
	if len(runs) > 0 {
		first = runs[0].StartedAt
	}
	err = rep.AddSilences(opt, func(p hookwarden.SourcePolicy) ([]hookwarden.Silence, error) {
		return s.silences(ctx, p, opt.Since, first, now)
	})
	return rep, err
}

// silences finds gaps between consecutive requests of one source longer than
// its expect_within, and the silence since its last request.
//
// retention.payloads deletes the receipts of pruned events; pruned_totals
// keeps the time of the last one it deleted per source. Every request after
// that time is still in the file, so silences are computed from there on;
// before it only some receipts remain (held events, quarantined requests),
// and the gaps between them are not silences: they are not reported.
func (s *Store) silences(ctx context.Context, p hookwarden.SourcePolicy, since, firstRun, now time.Time) ([]hookwarden.Silence, error) {
	var out []hookwarden.Silence
	add := func(start, end time.Time, open bool) {
		l := end.Sub(start)
		if l <= p.ExpectWithin {
			return
		}
		sl := hookwarden.Silence{Source: p.Name, Start: start, Open: open, Length: l, LengthSeconds: l.Seconds(),
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
	first, last, err := s.requestGaps(ctx, p, from, now, add)
	if err != nil {
		return nil, fmt.Errorf("silences of %s: %w", p.Name, err)
	}
	prev := last
	if !seed.IsZero() {
		if !first.IsZero() {
			add(seed, first, false) // from the last pruned request to the first kept one
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

// maxGapSeeks bounds requestGaps' jumps; a window longer than this many
// expect_within is read request by request instead.
const maxGapSeeks = 20000

// requestGaps calls add for every gap longer than p.ExpectWithin between
// consecutive requests of p's source received at or after from, and
// returns the first and last of them (zero: none). It never reads each
// request: with expect_within an hour or more it reads a row an hour of
// the window (requestGapsByHour); under an hour it jumps on the (source,
// received_at) index (requestGapsWalk), one seek per expect_within; only a
// window of more than maxGapSeeks expect_within reads every request.
func (s *Store) requestGaps(ctx context.Context, p hookwarden.SourcePolicy, from string, now time.Time, add func(start, end time.Time, open bool)) (first, last time.Time, err error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return first, last, err
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	var at sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT min(received_at) FROM receipts WHERE source = ? AND received_at >= ?`, p.Name, from).
		Scan(&at); err != nil {
		return first, last, err
	}
	if first, err = parseNullTime(at); err != nil || first.IsZero() {
		return first, last, err
	}
	if p.ExpectWithin >= time.Hour {
		last, ok, err := requestGapsByHour(ctx, tx, p, first, add)
		if err != nil || ok {
			return first, last, err
		}
	}
	fromT := first
	if t, perr := parseTime(from); perr == nil {
		fromT = t
	}
	if now.Sub(fromT)/max(p.ExpectWithin, time.Nanosecond) > maxGapSeeks {
		return s.requestGapsByRow(ctx, tx, p, from, add)
	}
	last, err = requestGapsWalk(ctx, tx, p, first, add)
	return first, last, err
}

// requestGapsWalk is requestGaps' jump along receipts_source_time from the
// window's first request: from a request at a, the last request within
// (a, a+expect_within] is one seek and no gap before it can be a silence;
// when there is none, the next request ends a silence. The cost follows the
// window divided by expect_within, not the traffic.
func requestGapsWalk(ctx context.Context, tx *sql.Tx, p hookwarden.SourcePolicy, first time.Time,
	add func(start, end time.Time, open bool)) (last time.Time, err error) {
	// The walk runs inside SQLite (a recursive query: two seeks a step, no
	// round trip). a + expect_within is computed to the millisecond, at or
	// before the exact bound: a request it misses is taken as the next
	// step's start instead, and add, which measures exactly, drops a gap
	// that is not longer than expect_within.
	var prev time.Time
	err = eachRow(ctx, tx, `
WITH RECURSIVE walk(a) AS (
	SELECT ?2
	UNION ALL
	SELECT COALESCE(
		(SELECT max(received_at) FROM receipts WHERE source = ?1 AND received_at > walk.a
			AND received_at <= strftime('%Y-%m-%dT%H:%M:%f', walk.a, ?3) || '000Z'),
		(SELECT min(received_at) FROM receipts WHERE source = ?1 AND received_at > walk.a))
	FROM walk WHERE walk.a IS NOT NULL)
SELECT a FROM walk WHERE a IS NOT NULL`,
		func(rows *sql.Rows) error {
			var at string
			if err := rows.Scan(&at); err != nil {
				return err
			}
			t, err := parseTime(at)
			if err != nil {
				return err
			}
			if !prev.IsZero() && t.Sub(prev) > p.ExpectWithin {
				add(prev, t, false)
			}
			prev = t
			return nil
		}, p.Name, fmtTime(first), fmt.Sprintf("+%.6f seconds", p.ExpectWithin.Seconds()))
	return prev, err
}

// errStop ends an eachRow early.
var errStop = errors.New("stop")

// requestGapsByHour is requestGaps for an expect_within of an hour or
// more, on request_hours (schema 18): no silence that long fits inside a
// clock hour, so the gaps that can be silences are those between one hour's
// last request and the next hour's first, a row an hour of the window.
// first is the window's first request; only the last request of its hour
// counts, as that hour's row may remember requests before the window that
// retention has deleted since (see silences). ok is false when the table
// does not tell first's hour (a read-only open of an older schema, or an
// hour retention.claims deleted while its receipts stay), and nothing was
// added: the caller walks the receipts instead.
func requestGapsByHour(ctx context.Context, tx *sql.Tx, p hookwarden.SourcePolicy, first time.Time,
	add func(start, end time.Time, open bool)) (last time.Time, ok bool, err error) {
	var have bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'request_hours')`).
		Scan(&have); err != nil || !have {
		return last, false, err
	}
	at := fmtTime(first)
	prev := first
	err = eachRow(ctx, tx, `SELECT hour, first_at, last_at FROM request_hours WHERE source = ? AND hour >= ? ORDER BY hour`,
		func(rows *sql.Rows) error {
			var hour, a, b string
			if err := rows.Scan(&hour, &a, &b); err != nil {
				return err
			}
			if !ok {
				// first's own hour, or the table missed first.
				if ok = hour == at[:13] && a <= at && at <= b; !ok {
					return errStop
				}
				if b > at {
					return parseInto(&prev, b)
				}
				return nil
			}
			start, err := parseTime(a)
			if err != nil {
				return err
			}
			if start.Sub(prev) > p.ExpectWithin {
				add(prev, start, false)
			}
			return parseInto(&prev, b)
		}, p.Name, at[:13])
	if errors.Is(err, errStop) {
		err = nil
	}
	return prev, ok, err
}

// requestGapsByRow is requestGaps for a short expect_within: LAG over the
// (source, received_at) index, every request of the window read.
func (s *Store) requestGapsByRow(ctx context.Context, tx *sql.Tx, p hookwarden.SourcePolicy, from string, add func(start, end time.Time, open bool)) (first, last time.Time, err error) {
	err = eachRow(ctx, tx, `
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
		return first, last, err
	}
	var f, l sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT min(received_at), max(received_at) FROM receipts WHERE source = ? AND received_at >= ?`,
		p.Name, from).Scan(&f, &l); err != nil {
		return first, last, err
	}
	if first, err = parseNullTime(f); err != nil {
		return first, last, err
	}
	last, err = parseNullTime(l)
	return first, last, err
}
