package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
)

// StartRun records the start of a serve process. Its heartbeats and clean stop
// let `gaps` tell outage windows from the file alone.
func (s *Store) StartRun(ctx context.Context, version string) (int64, error) {
	var id int64
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		t := s.now()
		now := fmtTime(t)
		s.runStart.Store(t.UnixNano())
		return tx.QueryRowContext(ctx,
			`INSERT INTO runs (started_at, heartbeat_at, version, pid) VALUES (?, ?, ?, ?) RETURNING id`,
			now, now, version, os.Getpid()).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("record run start: %w", err)
	}
	return id, nil
}

// Heartbeat records that the run is alive now. It goes through the writer, so
// a successful heartbeat also proves the writer and the disk work.
func (s *Store) Heartbeat(ctx context.Context, run int64) error {
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE runs SET heartbeat_at = ? WHERE id = ?`, fmtTime(s.now()), run)
		return err
	})
	if err != nil {
		return fmt.Errorf("record heartbeat: %w", err)
	}
	return nil
}

// StopRun records a clean stop.
func (s *Store) StopRun(ctx context.Context, run int64) error {
	err := s.write(ctx, true, func(ctx context.Context, tx *sql.Tx) error {
		now := fmtTime(s.now())
		_, err := tx.ExecContext(ctx, `UPDATE runs SET heartbeat_at = ?, stopped_at = ? WHERE id = ?`, now, now, run)
		return err
	})
	if err != nil {
		return fmt.Errorf("record run stop: %w", err)
	}
	return nil
}
