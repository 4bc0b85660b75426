package storecopy

import (
	"context"
	"fmt"
	"time"
)

// Derived tables are counts the stores keep with triggers as rows are
// written (counters and hourly: SQLite's schema 12, PostgreSQL's 6 and 7). They
// are not copied row by row: their encodings differ (PostgreSQL spreads a
// count over shard rows; an hour is text on SQLite, timestamptz on
// PostgreSQL), and the destination's triggers count the rows as the copy
// writes them, so counters come out equal to a full count of what was
// copied. hourly also remembers what retention removed since (a pruned
// duplicate's receipt is gone, its hour still counts it): a whole copy
// carries the source's hours over, summed per source and hour; a copy
// --since keeps what its own rows counted.
//
// job_leases (PostgreSQL's schema 12) mirrors the jobs that are pending and
// leased, kept by triggers too: a copy into PostgreSQL fills it as it
// writes the jobs, and SQLite has no such table (its leases are counted on
// jobs_due), so an export taken while deliveries are in flight leaves it.
//
// minutely (SQLite's schema 14, PostgreSQL's 13) is counted the same way by
// the destination's triggers as the copy writes the rows; the minutes of a
// day ago and older go with the destination's next prune pass.
//
// claims_log, claims, claim_levels and claim_fold (SQLite's schema 16) are
// the dedup memory, kept from events by its triggers the same way: an
// SQLite destination claims each event as the copy writes it (in
// claims_log; its serve folds them later), and PostgreSQL's memory is
// events' own unique index.
//
// claims_filter and claims_filter_parts (SQLite's schemas 17 and 19) are
// serve's claims filter as it kept it: the destination's serve builds its
// own.
//
// request_hours (SQLite's schema 18, PostgreSQL's 14), the first and last
// request of each source and hour, is kept by a trigger on receipts: the
// destination's fills it as the copy writes them.
var derived = map[string]bool{"counters": true, "hourly": true, "job_leases": true, "minutely": true,
	"claims_log": true, "claims": true, "claim_levels": true, "claim_fold": true, "claims_filter": true,
	"claims_filter_parts": true, "request_hours": true}

// hourText is how SQLite's hourly keys an hour.
const hourText = "2006-01-02T15"

// copyHourly replaces the destination's hourly with the source's.
func copyHourly(ctx context.Context, src Source, dst Destination, to Table) (int64, error) {
	rows, err := src.Query(ctx, `SELECT source, hour, sum(accepted), sum(duplicates), min(first_ref)
		FROM hourly GROUP BY source, hour ORDER BY source, hour`)
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	defer rows.Close()
	if err := dst.Empty(ctx, "hourly"); err != nil {
		return 0, fmt.Errorf("empty: %w", err)
	}
	var cols []Column
	for _, name := range []string{"source", "hour", "accepted", "duplicates", "first_ref", "shard"} {
		if c, ok := to.column(name); ok {
			cols = append(cols, c)
		} else if name != "shard" {
			return 0, fmt.Errorf("the destination's hourly has no column %s", name)
		}
	}
	next := func() ([]any, bool, error) {
		if !rows.Next() {
			return nil, false, rows.Err()
		}
		vs, err := rows.Values()
		if err != nil {
			return nil, false, err
		}
		hour, err := hourOf(vs[1])
		if err != nil {
			return nil, false, err
		}
		out := []any{vs[0], hour, vs[2], vs[3], vs[4]}
		if cols[1].Kind != Time {
			out[1] = hour.Format(hourText)
		}
		if len(cols) == 6 {
			out = append(out, int32(0)) // one shard holds the sum (no backend's pid)
		}
		return out, true, nil
	}
	return dst.Insert(ctx, to, cols, next)
}

// hourOf reads an hour as either store keys it.
func hourOf(v any) (time.Time, error) {
	switch h := v.(type) {
	case time.Time:
		return h.UTC().Truncate(time.Hour), nil
	case string:
		t, err := time.Parse(hourText, h)
		if err != nil {
			return time.Time{}, fmt.Errorf("hour %q: %w", h, err)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("hour %v (%T): not a time", v, v)
}
