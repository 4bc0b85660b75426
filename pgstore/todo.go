package pgstore

// Methods of hookwarden.Store not yet built on PostgreSQL. Each is removed
// from this file as it is implemented; the file goes when it is empty.

import (
	"context"
	"errors"
	"time"

	"github.com/hookwarden/hookwarden"
)

var _ hookwarden.Store = (*Store)(nil)

var errNotYet = errors.New("pgstore: not built yet")

func (s *Store) ListEvents(ctx context.Context, f hookwarden.EventFilter) ([]hookwarden.EventSummary, int64, error) {
	return nil, 0, errNotYet
}

func (s *Store) ShowEvent(ctx context.Context, source, eventID string) (*hookwarden.EventDetail, error) {
	return nil, errNotYet
}

func (s *Store) EventAudit(ctx context.Context, source, eventID string) ([]hookwarden.AuditEntry, error) {
	return nil, errNotYet
}

func (s *Store) ListDead(ctx context.Context, f hookwarden.DeadFilter) ([]hookwarden.DeadLetter, int64, error) {
	return nil, 0, errNotYet
}

func (s *Store) Stats(ctx context.Context, sources, destinations []string) (hookwarden.Stats, error) {
	return hookwarden.Stats{}, errNotYet
}

func (s *Store) RecentCounts(ctx context.Context, sources []string, hour, day time.Time) (map[string][2]hookwarden.WindowCounts, error) {
	return nil, errNotYet
}

func (s *Store) LastAccepted(ctx context.Context, sources []string) (map[string]time.Time, error) {
	return nil, errNotYet
}

func (s *Store) ListQuarantine(ctx context.Context, f hookwarden.QuarantineFilter) ([]hookwarden.Held, int64, error) {
	return nil, 0, errNotYet
}

func (s *Store) ShowQuarantined(ctx context.Context, receiptID int64) (*hookwarden.HeldDetail, error) {
	return nil, errNotYet
}

func (s *Store) QuarantinedReceipt(ctx context.Context, source string, id int64) (bool, error) {
	return false, errNotYet
}

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
