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

func (s *Store) Healthy() error { return errNotYet }

func (s *Store) Ping(ctx context.Context) error { return errNotYet }

func (s *Store) Backup(ctx context.Context, dest string, progress func(written, total int64)) error {
	return errNotYet
}
