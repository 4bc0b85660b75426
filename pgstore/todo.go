package pgstore

// Methods of hookwarden.Store not yet built on PostgreSQL. Each is removed
// from this file as it is implemented; the file goes when it is empty.

import (
	"context"
	"errors"

	"github.com/hookwarden/hookwarden"
)

var _ hookwarden.Store = (*Store)(nil)

var errNotYet = errors.New("pgstore: not built yet")

func (s *Store) Replay(ctx context.Context, sel hookwarden.ReplaySelector, opt hookwarden.ReplayOptions) (hookwarden.ReplayResult, error) {
	return hookwarden.ReplayResult{}, errNotYet
}

func (s *Store) Prune(ctx context.Context, opt hookwarden.PruneOptions) (hookwarden.PruneResult, error) {
	return hookwarden.PruneResult{}, errNotYet
}

func (s *Store) Audit(ctx context.Context, e hookwarden.AuditEntry) (int64, error) {
	return 0, errNotYet
}

func (s *Store) ReleaseQuarantined(ctx context.Context, rel hookwarden.Release) (hookwarden.Released, error) {
	return hookwarden.Released{}, errNotYet
}

func (s *Store) DropQuarantined(ctx context.Context, receiptID int64, audit *hookwarden.AuditEntry) error {
	return errNotYet
}

func (s *Store) Healthy() error { return errNotYet }

func (s *Store) Ping(ctx context.Context) error { return errNotYet }

func (s *Store) Backup(ctx context.Context, dest string, progress func(written, total int64)) error {
	return errNotYet
}
