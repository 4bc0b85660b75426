package sqlitestore

// Counts over the whole file (stats, /api/stats) and over recent windows
// (the dashboard, the metrics' absence clock). Reads only.

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// The reads of this file, named so that a test can check their plans
// (EXPLAIN QUERY PLAN): each reads small tables or seeks an index.
const (
	statsCountersSQL = `
SELECT name, kind, n, NULL FROM counters WHERE n != 0
UNION ALL SELECT name, 'pruned-' || kind, n, at FROM pruned_totals
ORDER BY 1`
	lastReceivedSQL = `SELECT max(
	COALESCE((SELECT max(received_at) FROM receipts WHERE source = ?1), ''),
	COALESCE((SELECT max(last_at) FROM quarantine WHERE source = ?1), ''))`
	oldestPendingSQL = `SELECT min(COALESCE(replayed_at, created_at)) FROM jobs
	WHERE state = 'pending' AND destination = ?`
	hourlySQL      = `SELECT hour, accepted, duplicates FROM hourly WHERE source = ? AND hour >= ? ORDER BY hour`
	windowHoursSQL = `SELECT COALESCE(sum(accepted), 0), COALESCE(sum(duplicates), 0)
	FROM hourly WHERE source = ? AND hour >= ?`
	windowMinutesSQL = `SELECT COALESCE(sum(accepted), 0), COALESCE(sum(duplicates), 0)
	FROM minutely WHERE source = ? AND minute >= ? AND minute < ?`
)

// Stats counts per source and per destination over the whole file. The
// counts are the counters table (kept by triggers in the same transaction as
// the rows they count, schema 12) plus pruned_totals (what retention
// removed), so the read costs the same at ten million events as at ten
// thousand. The last request's time and the oldest pending job are one
// index seek per name. The names given come first, with zeros, then any
// other name found in the file, in name order.
func (s *Store) Stats(ctx context.Context, sources, destinations []string) (hookwarden.Stats, error) {
	st := hookwarden.Stats{At: s.now().UTC()}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	c := hookwarden.NewStatsCounter(st.At, sources, destinations)
	err = eachRow(ctx, tx, statsCountersSQL,
		func(rows *sql.Rows) error {
			var name, kind string
			var n int
			var at sql.NullString
			if err := rows.Scan(&name, &kind, &n, &at); err != nil {
				return err
			}
			t, err := parseNullTime(at)
			if err != nil {
				return err
			}
			c.Add(name, kind, n, t)
			return nil
		})
	if err == nil {
		var refused []hookwarden.RefusalCount
		refused, err = refusals(ctx, tx, hookwarden.RefusalsSince(st.At))
		c.AddRefusals(refused)
	}
	st = c.Stats
	if err != nil {
		return st, fmt.Errorf("stats: %w", err)
	}
	for i := range st.Sources {
		ss := &st.Sources[i]
		// max on the (source, received_at) index is one seek; the
		// quarantine holds one row per distinct held body.
		var last sql.NullString
		if err := tx.QueryRowContext(ctx, lastReceivedSQL, ss.Source).Scan(&last); err != nil {
			return st, fmt.Errorf("stats of %s: %w", ss.Source, err)
		}
		if last.String != "" {
			if t, err := parseNullTime(last); err == nil && t.After(ss.LastReceivedAt) {
				ss.LastReceivedAt = t
			}
		}
	}
	for i := range st.Destinations {
		ds := &st.Destinations[i]
		if ds.Pending == 0 {
			continue
		}
		oldest, err := oldestPending(ctx, tx, ds.Destination)
		if err != nil {
			return st, fmt.Errorf("stats of %s: %w", ds.Destination, err)
		}
		if !oldest.IsZero() {
			ds.OldestPendingAge = max(st.At.Sub(oldest), 0)
			ds.OldestPendingSeconds = ds.OldestPendingAge.Seconds()
		}
	}
	return st, nil
}

// oldestPending is when the destination's oldest pending job was created or
// last replayed (zero: none): one seek on jobs_pending_age.
func oldestPending(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, dest string) (time.Time, error) {
	var oldest sql.NullString
	if err := q.QueryRowContext(ctx, oldestPendingSQL, dest).Scan(&oldest); err != nil {
		return time.Time{}, err
	}
	return parseNullTime(oldest)
}

// Hourly lists each source's hours from since's on, from the hourly table
// (kept by triggers as events and repeats are recorded): a range of the
// primary key per source.
func (s *Store) Hourly(ctx context.Context, sources []string, since time.Time) (map[string][]hookwarden.HourCount, error) {
	out := make(map[string][]hookwarden.HourCount, len(sources))
	from := hourOf(since)
	for _, src := range sources {
		var hours []hookwarden.HourCount
		err := eachRow(ctx, s.rdb, hourlySQL,
			func(rows *sql.Rows) error {
				var h string
				var c hookwarden.HourCount
				if err := rows.Scan(&h, &c.Accepted, &c.Duplicates); err != nil {
					return err
				}
				t, err := time.Parse(hourFormat, h)
				if err != nil {
					return err
				}
				c.Hour = t
				if c.Accepted != 0 || c.Duplicates != 0 {
					hours = append(hours, c)
				}
				return nil
			}, src, from)
		if err != nil {
			return nil, fmt.Errorf("hourly counts of %s: %w", src, err)
		}
		out[src] = hours
	}
	return out, nil
}

// hourFormat is the hourly table's hour: the first 13 characters of a
// stored time.
const hourFormat = "2006-01-02T15"

func hourOf(t time.Time) string { return t.UTC().Format(hourFormat) }

// LastAccepted returns, for each source named, when it last claimed a new
// event (absent when it never did). It seeds
// hookwarden_last_accepted_timestamp_seconds at start, so a restart does not
// reset the absence alert's clock. One walk per source, newest first, on the
// (source, received_at) index of receipts, stopping at the first request
// that claimed something (duplicates in between are skipped); events already
// folded by retention.payloads are known from pruned_totals.
func (s *Store) LastAccepted(ctx context.Context, sources []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(sources))
	for _, src := range sources {
		var at, pruned sql.NullString
		err := s.rdb.QueryRowContext(ctx, `
SELECT
	(SELECT r.received_at FROM receipts r WHERE r.source = ?1
		AND (r.kind = 'accepted' OR (r.kind = 'batch'
			AND EXISTS (SELECT 1 FROM receipt_events re WHERE re.receipt_id = r.id AND re.kind = 'accepted')))
		ORDER BY r.received_at DESC LIMIT 1),
	(SELECT at FROM pruned_totals WHERE name = ?1 AND kind = 'last_accepted')`, src).Scan(&at, &pruned)
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		t, err := parseNullTime(at)
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		p, err := parseNullTime(pruned)
		if err != nil {
			return nil, fmt.Errorf("last accepted of %s: %w", src, err)
		}
		if p.After(t) {
			t = p
		}
		if !t.IsZero() {
			out[src] = t
		}
	}
	return out, nil
}

// RecentCounts counts each source's accepted events and duplicates since
// hour ([0]) and since day ([1]), for the dashboard, from the start of each
// bound's minute (hookwarden.WindowStart): the whole hours of a window from
// hourly, the minutes of its first hour from minutely (schema 14). A read
// is at most 60 minute rows and the hours per window, whatever the
// traffic in them.
func (s *Store) RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]hookwarden.WindowCounts, error) {
	out := make(map[string][2]hookwarden.WindowCounts, len(sources))
	now := s.now()
	for _, src := range sources {
		var w [2]hookwarden.WindowCounts
		for i, since := range []time.Time{hour, day} {
			c, err := s.windowCounts(ctx, src, now, since)
			if err != nil {
				return nil, fmt.Errorf("recent counts of %s: %w", src, err)
			}
			w[i] = c
		}
		out[src] = w
	}
	return out, nil
}

// windowCounts counts what src sent from since's minute on.
func (s *Store) windowCounts(ctx context.Context, src string, now, since time.Time) (hookwarden.WindowCounts, error) {
	var c hookwarden.WindowCounts
	start, whole := hookwarden.WindowStart(now, since)
	if err := s.rdb.QueryRowContext(ctx, windowHoursSQL, src, hourOf(whole)).Scan(&c.Accepted, &c.Duplicates); err != nil {
		return c, err
	}
	if start.Equal(whole) {
		return c, nil
	}
	var a, d int
	if err := s.rdb.QueryRowContext(ctx, windowMinutesSQL, src, minuteOf(start), minuteOf(whole)).Scan(&a, &d); err != nil {
		return c, err
	}
	c.Accepted += a
	c.Duplicates += d
	return c, nil
}

// minuteFormat is the minutely table's minute: the first 16 characters of
// a stored time.
const minuteFormat = "2006-01-02T15:04"

func minuteOf(t time.Time) string { return t.UTC().Format(minuteFormat) }
