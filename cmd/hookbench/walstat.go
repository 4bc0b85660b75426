package main

import (
	"context"
	"fmt"

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
}

func (w walStat) String() string {
	return fmt.Sprintf("WAL %.2f full-page images and %.1f KiB per ack, checkpoints %d timed + %d requested; buffers written by backends %d, bgwriter %d; autovacuum %d vacuums, %d analyzes",
		w.FPIPerAck, w.KiBPerAck, w.Timed, w.Requested, w.BackendWrites, w.CleanWrites, w.AutoVacuums, w.AutoAnalyzes)
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
	if res.Acks > 0 {
		d.FPIPerAck = round3(float64(d.FPI) / float64(res.Acks))
		d.KiBPerAck = round3(float64(d.Bytes) / 1024 / float64(res.Acks))
	}
	return res, &d, nil
}
