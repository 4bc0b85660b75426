package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SeenToken returns the body hash a one-time token was recorded with, if
// its row expires after at (receiver.TokenReader): one read outside any
// transaction, so the receiver can refuse a known replay before extracting
// anything. The insert in the receipt's transaction still decides.
func (s *Store) SeenToken(ctx context.Context, source string, token [32]byte, at time.Time) ([32]byte, bool, error) {
	var sum []byte
	err := s.pool.QueryRow(ctx, `SELECT body_sha256 FROM seen_tokens WHERE source = $1 AND token_sha256 = $2 AND expires_at > $3`,
		source, token[:], at.UTC()).Scan(&sum)
	if errors.Is(err, pgx.ErrNoRows) {
		return [32]byte{}, false, nil
	}
	if err != nil {
		return [32]byte{}, false, fmt.Errorf("read seen token: %w", err)
	}
	var out [32]byte
	copy(out[:], sum)
	return out, len(sum) == len(out), nil
}
