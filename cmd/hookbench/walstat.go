package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// walStat is what the cluster wrote to its WAL during one load round: full
// page images (a page's first change after a checkpoint writes the whole
// page), bytes, and the checkpoints that started meanwhile, timed or
// requested (max_wal_size reached). The counters are the cluster's, and
// one store is loaded at a time.
type walStat struct {
	FPI       int64 `json:"fpi"`
	Bytes     int64 `json:"bytes"`
	Timed     int64 `json:"checkpoints_timed"`
	Requested int64 `json:"checkpoints_requested"`
	// Buffers written to make room: by the backends themselves (a claim
	// waits for it), and by the background writer.
	BackendWrites int64 `json:"buffers_backend"`
	CleanWrites   int64 `json:"buffers_clean"`
	// Vacuums and analyzes autovacuum ran on the store's tables. (Not the
	// cluster's CPU: the serve process's backends exit with it, and take
	// theirs with them.)
	AutoVacuums  int64   `json:"autovacuums"`
	AutoAnalyzes int64   `json:"autoanalyzes"`
	FPIPerAck    float64 `json:"fpi_per_ack"`
	KiBPerAck    float64 `json:"wal_kib_per_ack"`
	// Top are the store's statements that took the most time in the
	// round (pg_stat_statements): what a slower round spent its time on.
	Top []stmtStat `json:"top_statements,omitempty"`
}

// stmtStat is one statement's share of a round.
type stmtStat struct {
	Query   string  `json:"query"`
	Calls   int64   `json:"calls"`
	TotalMS float64 `json:"total_ms"`
	// Buffers per call, and of them read from outside shared buffers.
	BuffersPerCall float64 `json:"buffers_per_call"`
	ReadPerCall    float64 `json:"read_per_call"`
}

func (s stmtStat) String() string {
	return fmt.Sprintf("%8.0f ms %8d calls %7.3f ms/call %7.1f buf/call (%5.1f read)  %s",
		s.TotalMS, s.Calls, s.TotalMS/float64(max(s.Calls, 1)), s.BuffersPerCall, s.ReadPerCall, s.Query)
}

func (w walStat) String() string {
	var top strings.Builder
	for _, s := range w.Top {
		top.WriteString("\n             " + s.String())
	}
	return fmt.Sprintf("WAL %.2f full-page images and %.1f KiB per ack, checkpoints %d timed + %d requested; buffers written by backends %d, bgwriter %d; autovacuum %d vacuums, %d analyzes%s",
		w.FPIPerAck, w.KiBPerAck, w.Timed, w.Requested, w.BackendWrites, w.CleanWrites, w.AutoVacuums, w.AutoAnalyzes, top.String())
}

func readWAL(ctx context.Context, url string) (walStat, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return walStat{}, err
	}
	defer conn.Close(ctx)
	var w walStat
	err = conn.QueryRow(ctx, `SELECT w.wal_fpi, w.wal_bytes::bigint, b.checkpoints_timed, b.checkpoints_req,
		b.buffers_backend, b.buffers_clean
		FROM pg_stat_wal w, pg_stat_bgwriter b`).Scan(&w.FPI, &w.Bytes, &w.Timed, &w.Requested, &w.BackendWrites, &w.CleanWrites)
	if err != nil {
		return w, err
	}
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(autovacuum_count), 0)::bigint, coalesce(sum(autoanalyze_count), 0)::bigint
		FROM pg_stat_user_tables`).Scan(&w.AutoVacuums, &w.AutoAnalyzes)
	return w, err
}

// walDuring runs load (a serve process started, loaded and stopped: its
// backends' counters are flushed when they exit) and returns what the WAL
// of the cluster holding the database at url took meanwhile, per ack of
// the result. Without a url (a SQLite store) it only runs load.
func walDuring(ctx context.Context, url string, load func() (loadResult, error)) (loadResult, *walStat, error) {
	if url == "" {
		res, err := load()
		return res, nil, err
	}
	w0, err := readWAL(ctx, url)
	if err != nil {
		return loadResult{}, nil, fmt.Errorf("pg_stat_wal: %w", err)
	}
	statements := resetStatements(ctx, url) == nil
	res, err := load()
	if err != nil {
		return res, nil, err
	}
	w1, err := readWAL(ctx, url)
	if err != nil {
		return res, nil, fmt.Errorf("pg_stat_wal: %w", err)
	}
	d := walStat{FPI: w1.FPI - w0.FPI, Bytes: w1.Bytes - w0.Bytes, Timed: w1.Timed - w0.Timed,
		Requested: w1.Requested - w0.Requested, BackendWrites: w1.BackendWrites - w0.BackendWrites,
		CleanWrites: w1.CleanWrites - w0.CleanWrites, AutoVacuums: w1.AutoVacuums - w0.AutoVacuums,
		AutoAnalyzes: w1.AutoAnalyzes - w0.AutoAnalyzes}
	if statements {
		if d.Top, err = topStatements(ctx, url, 4); err != nil {
			return res, nil, fmt.Errorf("pg_stat_statements: %w", err)
		}
	}
	if res.Acks > 0 {
		d.FPIPerAck = round3(float64(d.FPI) / float64(res.Acks))
		d.KiBPerAck = round3(float64(d.Bytes) / 1024 / float64(res.Acks))
	}
	return res, &d, nil
}

// resetStatements empties pg_stat_statements, when the cluster loads it
// (the history phase's does; a database without the extension errs).
func resetStatements(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	return err
}

// topStatements are the n statements of url's database that took the
// most time since resetStatements.
func topStatements(ctx context.Context, url string, n int) ([]stmtStat, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 110), calls, total_exec_time,
		(shared_blks_hit + shared_blks_read)::float8 / greatest(calls, 1), shared_blks_read::float8 / greatest(calls, 1)
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	var top []stmtStat
	for rows.Next() {
		var s stmtStat
		if err := rows.Scan(&s.Query, &s.Calls, &s.TotalMS, &s.BuffersPerCall, &s.ReadPerCall); err != nil {
			return nil, err
		}
		s.TotalMS, s.BuffersPerCall, s.ReadPerCall = round3(s.TotalMS), round3(s.BuffersPerCall), round3(s.ReadPerCall)
		top = append(top, s)
	}
	return top, rows.Err()
}
