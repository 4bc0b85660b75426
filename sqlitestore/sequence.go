package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
)

// seqTx records a newly claimed event's sequence value (schema 20) in the
// claim's transaction: into the epoch whose span holds it, else the last
// epoch when hookwarden.Seq.SeqPlace says it belongs there, else a new
// epoch; then merged with the ranges either side. The writer is the only
// writer, so nothing else runs between the reads and the writes.
func seqTx(ctx context.Context, tx *sql.Tx, source string, q *hookwarden.Seq, at string) error {
	if err := seqRecord(ctx, tx, source, q, at); err != nil {
		return fmt.Errorf("record sequence value: %w", err)
	}
	return nil
}

func seqRecord(ctx context.Context, tx *sql.Tx, source string, q *hookwarden.Seq, at string) error {
	v := q.Value
	var epoch int64
	err := tx.QueryRowContext(ctx, `SELECT epoch FROM seq_epochs WHERE source = ? AND lo <= ?2 AND hi >= ?2 ORDER BY epoch DESC LIMIT 1`,
		source, v).Scan(&epoch)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		var lo, hi int64
		var started string
		err := tx.QueryRowContext(ctx, `SELECT epoch, lo, hi, started_at FROM seq_epochs WHERE source = ? ORDER BY epoch DESC LIMIT 1`,
			source).Scan(&epoch, &lo, &hi, &started)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err == nil {
			st, perr := parseTime(started)
			now, perr2 := parseTime(at)
			if perr == nil && perr2 == nil && q.SeqPlace(lo, hi, st, now) {
				if _, err := tx.ExecContext(ctx, `UPDATE seq_epochs SET lo = min(lo, ?3), hi = max(hi, ?3) WHERE source = ?1 AND epoch = ?2`,
					source, epoch, v); err != nil {
					return err
				}
				break
			}
		}
		epoch++ // a new epoch (the first is 1)
		if _, err := tx.ExecContext(ctx, `INSERT INTO seq_epochs (source, epoch, lo, hi, started_at) VALUES (?1, ?2, ?3, ?3, ?4)`,
			source, epoch, v, at); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO seq_ranges (source, epoch, lo, hi, lo_at, hi_at) VALUES (?1, ?2, ?3, ?3, ?4, ?4)`,
			source, epoch, v, at)
		return err
	case err != nil:
		return err
	}
	// prev: the range starting at or below v; next: the one starting at v+1.
	var pLo, pHi, nHi int64
	var nHiAt string
	havePrev, haveNext := true, true
	if err := tx.QueryRowContext(ctx, `SELECT lo, hi FROM seq_ranges WHERE source = ? AND epoch = ? AND lo <= ? ORDER BY lo DESC LIMIT 1`,
		source, epoch, v).Scan(&pLo, &pHi); errors.Is(err, sql.ErrNoRows) {
		havePrev = false
	} else if err != nil {
		return err
	}
	if havePrev && pHi >= v {
		return nil // received already (under another event id)
	}
	if err := tx.QueryRowContext(ctx, `SELECT hi, hi_at FROM seq_ranges WHERE source = ? AND epoch = ? AND lo = ?`,
		source, epoch, v+1).Scan(&nHi, &nHiAt); errors.Is(err, sql.ErrNoRows) {
		haveNext = false
	} else if err != nil {
		return err
	}
	joinPrev := havePrev && pHi == v-1
	switch {
	case joinPrev && haveNext: // the hole was one value: the two ranges become one
		if _, err := tx.ExecContext(ctx, `DELETE FROM seq_ranges WHERE source = ? AND epoch = ? AND lo = ?`, source, epoch, v+1); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE seq_ranges SET hi = ?, hi_at = ? WHERE source = ? AND epoch = ? AND lo = ?`,
			nHi, nHiAt, source, epoch, pLo)
	case joinPrev:
		_, err = tx.ExecContext(ctx, `UPDATE seq_ranges SET hi = ?, hi_at = ? WHERE source = ? AND epoch = ? AND lo = ?`,
			v, at, source, epoch, pLo)
	case haveNext:
		_, err = tx.ExecContext(ctx, `UPDATE seq_ranges SET lo = ?, lo_at = ? WHERE source = ? AND epoch = ? AND lo = ?`,
			v, at, source, epoch, v+1)
	default:
		_, err = tx.ExecContext(ctx, `INSERT INTO seq_ranges (source, epoch, lo, hi, lo_at, hi_at) VALUES (?1, ?2, ?3, ?3, ?4, ?4)`,
			source, epoch, v, at)
	}
	return err
}

// SequenceRanges returns the source's stored ranges by epoch and value
// (hookwarden.SequenceLog): a row per hole and epoch. A read-only open of
// an older schema has none.
func (s *Store) SequenceRanges(ctx context.Context, source string) ([]hookwarden.SeqRange, error) {
	var have bool
	if err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'seq_ranges')`).
		Scan(&have); err != nil || !have {
		return nil, err
	}
	var out []hookwarden.SeqRange
	err := eachRow(ctx, s.rdb, `SELECT r.epoch, r.lo, r.hi, r.lo_at, r.hi_at, e.started_at
		FROM seq_ranges r JOIN seq_epochs e ON e.source = r.source AND e.epoch = r.epoch
		WHERE r.source = ? ORDER BY r.epoch, r.lo`, func(rows *sql.Rows) error {
		var r hookwarden.SeqRange
		var loAt, hiAt, st string
		if err := rows.Scan(&r.Epoch, &r.Lo, &r.Hi, &loAt, &hiAt, &st); err != nil {
			return err
		}
		for _, p := range []struct {
			dst *time.Time
			s   string
		}{{&r.LoAt, loAt}, {&r.HiAt, hiAt}, {&r.EpochStarted, st}} {
			if err := parseInto(p.dst, p.s); err != nil {
				return err
			}
		}
		out = append(out, r)
		return nil
	}, source)
	if err != nil {
		return nil, fmt.Errorf("read sequence of %s: %w", source, err)
	}
	return out, nil
}

// since is when this process's run began (zero: none).
func (s *Store) since() time.Time {
	if n := s.runStart.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// lateTx keeps a newly claimed event timed before this run began
// (hookwarden.Late; schema 20).
func lateTx(ctx context.Context, tx *sql.Tx, source string, ev *hookwarden.Event, at string) error {
	rt, err := parseTime(at)
	if err != nil {
		return err
	}
	lag := rt.Sub(ev.EventTime)
	if _, err := tx.ExecContext(ctx, `INSERT INTO late_events (source, event_at, received_at, lag) VALUES (?, ?, ?, ?)`,
		source, fmtTime(ev.EventTime), at, lag.Seconds()); err != nil {
		return fmt.Errorf("record late arrival: %w", err)
	}
	return nil
}

// LateArrivals counts the source's events timed in [from, to] that arrived
// after to (hookwarden.LateLog): a range of late_events_time.
func (s *Store) LateArrivals(ctx context.Context, source string, from, to time.Time) (hookwarden.LateCount, error) {
	var c hookwarden.LateCount
	var have bool
	if err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'late_events')`).
		Scan(&have); err != nil || !have {
		return c, err
	}
	var last sql.NullString
	var lag sql.NullFloat64
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*), max(received_at), max(lag) FROM late_events
		WHERE source = ? AND event_at >= ? AND event_at <= ?3 AND received_at > ?3`, source, fmtTime(from), fmtTime(to)).
		Scan(&c.N, &last, &lag); err != nil {
		return c, fmt.Errorf("late arrivals of %s: %w", source, err)
	}
	t, err := parseNullTime(last)
	if err != nil {
		return c, err
	}
	c.Last, c.Max = t, time.Duration(lag.Float64*float64(time.Second))
	return c, nil
}
