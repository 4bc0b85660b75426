package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookwarden/hookwarden"
	"github.com/jackc/pgx/v5"
)

// seq records a newly claimed event's sequence value (schema 15) in the
// claim's transaction. The source's transaction advisory lock makes the
// merges of concurrent receipts (this instance's or another's) run one
// after the other, each seeing every value committed before it (READ
// COMMITTED: each statement after the lock reads the latest commits).
func (rc *recording) seq(ctx context.Context, q *hookwarden.Seq) error {
	if err := seqRecord(ctx, rc.tx, rc.r.Source, q, rc.at); err != nil {
		return fmt.Errorf("record sequence value: %w", err)
	}
	return nil
}

func seqRecord(ctx context.Context, tx pgx.Tx, source string, q *hookwarden.Seq, at time.Time) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('hookwarden seq ' || $1, 0))`, source); err != nil {
		return err
	}
	v := q.Value
	var epoch int64
	err := tx.QueryRow(ctx, `SELECT epoch FROM seq_epochs WHERE source = $1 AND lo <= $2 AND hi >= $2 ORDER BY epoch DESC LIMIT 1`,
		source, v).Scan(&epoch)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var lo, hi int64
		var started time.Time
		err := tx.QueryRow(ctx, `SELECT epoch, lo, hi, started_at FROM seq_epochs WHERE source = $1 ORDER BY epoch DESC LIMIT 1`,
			source).Scan(&epoch, &lo, &hi, &started)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err == nil && q.SeqPlace(lo, hi, started, at) {
			_, err := tx.Exec(ctx, `UPDATE seq_epochs SET lo = least(lo, $3), hi = greatest(hi, $3) WHERE source = $1 AND epoch = $2`,
				source, epoch, v)
			if err != nil {
				return err
			}
			break
		}
		epoch++ // a new epoch (the first is 1)
		if _, err := tx.Exec(ctx, `INSERT INTO seq_epochs (source, epoch, lo, hi, started_at) VALUES ($1, $2, $3, $3, $4)`,
			source, epoch, v, at); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO seq_ranges (source, epoch, lo, hi, lo_at, hi_at) VALUES ($1, $2, $3, $3, $4, $4)`,
			source, epoch, v, at)
		return err
	case err != nil:
		return err
	}
	// prev: the range starting at or below v; next: the one starting at v+1.
	var pLo, pHi, nHi int64
	var nHiAt time.Time
	havePrev, haveNext := true, true
	if err := tx.QueryRow(ctx, `SELECT lo, hi FROM seq_ranges WHERE source = $1 AND epoch = $2 AND lo <= $3 ORDER BY lo DESC LIMIT 1`,
		source, epoch, v).Scan(&pLo, &pHi); errors.Is(err, pgx.ErrNoRows) {
		havePrev = false
	} else if err != nil {
		return err
	}
	if havePrev && pHi >= v {
		return nil // received already (under another event id)
	}
	if err := tx.QueryRow(ctx, `SELECT hi, hi_at FROM seq_ranges WHERE source = $1 AND epoch = $2 AND lo = $3`,
		source, epoch, v+1).Scan(&nHi, &nHiAt); errors.Is(err, pgx.ErrNoRows) {
		haveNext = false
	} else if err != nil {
		return err
	}
	joinPrev := havePrev && pHi == v-1
	switch {
	case joinPrev && haveNext: // the hole was one value: the two ranges become one
		_, err = tx.Exec(ctx, `WITH d AS (DELETE FROM seq_ranges WHERE source = $1 AND epoch = $2 AND lo = $3)
			UPDATE seq_ranges SET hi = $4, hi_at = $5 WHERE source = $1 AND epoch = $2 AND lo = $6`,
			source, epoch, v+1, nHi, nHiAt, pLo)
	case joinPrev:
		_, err = tx.Exec(ctx, `UPDATE seq_ranges SET hi = $4, hi_at = $5 WHERE source = $1 AND epoch = $2 AND lo = $3`,
			source, epoch, pLo, v, at)
	case haveNext:
		_, err = tx.Exec(ctx, `UPDATE seq_ranges SET lo = $4, lo_at = $5 WHERE source = $1 AND epoch = $2 AND lo = $3`,
			source, epoch, v+1, v, at)
	default:
		_, err = tx.Exec(ctx, `INSERT INTO seq_ranges (source, epoch, lo, hi, lo_at, hi_at) VALUES ($1, $2, $3, $3, $4, $4)`,
			source, epoch, v, at)
	}
	return err
}

// SequenceRanges returns the source's stored ranges by epoch and value
// (hookwarden.SequenceLog): a row per hole and epoch.
func (s *Store) SequenceRanges(ctx context.Context, source string) ([]hookwarden.SeqRange, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT r.epoch, r.lo, r.hi, r.lo_at, r.hi_at, e.started_at
		FROM seq_ranges r JOIN seq_epochs e ON e.source = r.source AND e.epoch = r.epoch
		WHERE r.source = $1 ORDER BY r.epoch, r.lo`, source)
	if err != nil {
		return nil, fmt.Errorf("read sequence of %s: %w", source, err)
	}
	defer rows.Close()
	var out []hookwarden.SeqRange
	for rows.Next() {
		var r hookwarden.SeqRange
		if err := rows.Scan(&r.Epoch, &r.Lo, &r.Hi, &r.LoAt, &r.HiAt, &r.EpochStarted); err != nil {
			return nil, fmt.Errorf("read sequence of %s: %w", source, err)
		}
		r.LoAt, r.HiAt, r.EpochStarted = r.LoAt.UTC(), r.HiAt.UTC(), r.EpochStarted.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
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

// late keeps a newly claimed event timed before this run began
// (hookwarden.Late; schema 15).
func (rc *recording) late(ctx context.Context, ev *hookwarden.Event) error {
	if !hookwarden.Late(ev, rc.r.Backfill, rc.s.since()) {
		return nil
	}
	lag := rc.at.Sub(ev.EventTime)
	if _, err := rc.tx.Exec(ctx, `INSERT INTO late_events (source, event_at, received_at, lag) VALUES ($1, $2, $3, $4)`,
		rc.r.Source, ev.EventTime, rc.at, lag.Seconds()); err != nil {
		return fmt.Errorf("record late arrival: %w", err)
	}
	return nil
}

// LateArrivals counts the source's events timed in [from, to] that arrived
// after to (hookwarden.LateLog): a range of late_events_time.
func (s *Store) LateArrivals(ctx context.Context, source string, from, to time.Time) (hookwarden.LateCount, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var c hookwarden.LateCount
	var last *time.Time
	var lag *float64
	if err := s.pool.QueryRow(ctx, `SELECT count(*), max(received_at), max(lag) FROM late_events
		WHERE source = $1 AND event_at >= $2 AND event_at <= $3 AND received_at > $3`, source, from, to).
		Scan(&c.N, &last, &lag); err != nil {
		return c, fmt.Errorf("late arrivals of %s: %w", source, err)
	}
	if last != nil {
		c.Last = last.UTC()
	}
	if lag != nil {
		c.Max = time.Duration(*lag * float64(time.Second))
	}
	return c, nil
}
