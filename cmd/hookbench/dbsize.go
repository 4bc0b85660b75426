package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// comes from a copy: `hookwarden prune` with retention.payloads 1s (every
// body of a delivered event goes; claims, headers, jobs and attempts stay),
// then VACUUM so that the freed pages leave the file. cfgPath is the
// configuration the database was served with.
func measureDB(ctx context.Context, path string, bodySize int, workDir, bin, cfgPath string) (*dbReport, error) {
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
	if n, err := prunePayloads(ctx, bin, cfgPath, pruned, workDir); err == nil {
		r.PruneMethod = fmt.Sprintf("hookwarden prune (retention.payloads 1s) on a copy: %d events folded into their claims; then VACUUM", n)
	} else {
		// An older binary without the prune command: the same change by hand.
		r.PruneMethod = "no prune command (" + err.Error() + "): UPDATE receipts SET body = NULL for delivered events on a copy, then VACUUM"
		pdb, err := openDB(pruned)
		if err != nil {
			return nil, err
		}
		const prune = `UPDATE receipts SET body = NULL, pruned_at = ?
WHERE body IS NOT NULL AND event_ref IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_ref = receipts.event_ref AND j.state <> 'delivered')`
		_, err = pdb.ExecContext(ctx, prune, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
		pdb.Close()
		if err != nil {
			return nil, fmt.Errorf("prune copy: %w", err)
		}
	}
	pdb, err := openDB(pruned)
	if err != nil {
		return nil, err
	}
	defer pdb.Close()
	if _, err := pdb.ExecContext(ctx, `VACUUM`); err != nil {
		return nil, fmt.Errorf("vacuum copy: %w", err)
	}
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

// prunePayloads runs `hookwarden prune` on a database copy with a one-second
// payload retention and returns how many bodies it removed.
func prunePayloads(ctx context.Context, bin, cfgPath, db, workDir string) (int, error) {
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		return 0, err
	}
	pcfg := filepath.Join(workDir, "prune.yaml")
	cfg = append(cfg, "retention:\n  payloads: 1s\n  claims: 90d\n"...)
	if err := os.WriteFile(pcfg, cfg, 0o600); err != nil {
		return 0, err
	}
	defer os.Remove(pcfg)
	time.Sleep(1100 * time.Millisecond) // every event is older than the retention
	// --write: the copy is ours to change (a writing command refuses a --db
	// file no serve owns without it).
	cmd := exec.CommandContext(ctx, bin, "prune", "--config", pcfg, "--db", db, "--write", "--json")
	cmd.Env = append(os.Environ(), "HOOKBENCH_SECRET=whsec_"+strings.Repeat("A", 44))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			return 0, fmt.Errorf("%s", strings.TrimSpace(string(ee.Stderr)))
		}
		return 0, err
	}
	var res struct {
		PayloadsPruned int `json:"payloads_pruned"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("prune output %q: %w", out, err)
	}
	return res.PayloadsPruned, nil
}
