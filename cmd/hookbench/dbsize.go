package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the same driver as hookwarden
)

// dbReport is what the database costs per event.
type dbReport struct {
	BodyBytes       int              `json:"body_bytes"`
	FileBytes       int64            `json:"file_bytes"` // database + WAL after a clean stop
	Events          int64            `json:"events"`     // claims
	Receipts        map[string]int64 `json:"receipts"`   // by kind
	Jobs            int64            `json:"jobs"`
	Attempts        int64            `json:"attempts"`
	BytesPerEvent   float64          `json:"bytes_per_accepted_event"`
	OverBody        float64          `json:"bytes_per_event_over_body"`
	PrunedFileBytes int64            `json:"pruned_file_bytes"`
	PrunedPerEvent  float64          `json:"pruned_bytes_per_claimed_event"`
	// PruneMethod says how the pruned size was obtained.
	PruneMethod string `json:"prune_method"`
	// Tables is the space of each table and index (dbstat), before and after
	// pruning, in bytes per claimed event.
	Tables       map[string]float64 `json:"tables_bytes_per_event"`
	PrunedTables map[string]float64 `json:"pruned_tables_bytes_per_event"`
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func openDB(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// measureDB measures a database that no process has open. The pruned figure
// comes from a copy: bodies of finished events set to NULL, as the payload
// retention does, then VACUUM.
func measureDB(ctx context.Context, path string, bodySize int, workDir string) (*dbReport, error) {
	r := &dbReport{BodyBytes: bodySize, Receipts: map[string]int64{}}
	r.FileBytes = fileSize(path) + fileSize(path+"-wal")
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	for q, dst := range map[string]*int64{
		`SELECT count(*) FROM events`:   &r.Events,
		`SELECT count(*) FROM jobs`:     &r.Jobs,
		`SELECT count(*) FROM attempts`: &r.Attempts,
	} {
		if err := db.QueryRowContext(ctx, q).Scan(dst); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	rows, err := db.QueryContext(ctx, `SELECT kind, count(*) FROM receipts GROUP BY kind`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			rows.Close()
			return nil, err
		}
		r.Receipts[k] = n
	}
	rows.Close()
	if r.Events == 0 {
		return r, nil
	}
	r.BytesPerEvent = float64(r.FileBytes) / float64(r.Events)
	r.OverBody = r.BytesPerEvent - float64(bodySize)
	if r.Tables, err = tableSizes(ctx, db, r.Events); err != nil {
		return nil, err
	}

	pruned := filepath.Join(workDir, "pruned.db")
	os.Remove(pruned)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, pruned); err != nil {
		return nil, fmt.Errorf("copy database: %w", err)
	}
	defer os.Remove(pruned)
	pdb, err := openDB(pruned)
	if err != nil {
		return nil, err
	}
	defer pdb.Close()
	// Finished events only: the payload of a pending or dead job is kept.
	const prune = `UPDATE receipts SET body = NULL, pruned_at = ?
WHERE body IS NOT NULL AND event_ref IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = receipts.event_ref AND j.state <> 'delivered')`
	if _, err := pdb.ExecContext(ctx, prune, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")); err != nil {
		return nil, fmt.Errorf("prune copy: %w", err)
	}
	if _, err := pdb.ExecContext(ctx, `VACUUM`); err != nil {
		return nil, fmt.Errorf("vacuum copy: %w", err)
	}
	r.PruneMethod = "copy (VACUUM INTO) + UPDATE receipts SET body = NULL for delivered events + VACUUM (equivalent of payload retention; no prune command used)"
	if r.PrunedTables, err = tableSizes(ctx, pdb, r.Events); err != nil {
		return nil, err
	}
	pdb.Close()
	r.PrunedFileBytes = fileSize(pruned) + fileSize(pruned+"-wal")
	r.PrunedPerEvent = float64(r.PrunedFileBytes) / float64(r.Events)
	return r, nil
}

func tableSizes(ctx context.Context, db *sql.DB, events int64) (map[string]float64, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, sum(pgsize) FROM dbstat GROUP BY name`)
	if err != nil {
		return nil, fmt.Errorf("dbstat: %w", err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		if v := float64(n) / float64(events); v >= 1 {
			out[name] = float64(int(v*10)) / 10
		}
	}
	return out, rows.Err()
}
