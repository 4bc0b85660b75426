package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SeenToken returns the body hash a one-time token was recorded with, if
// its row expires after at (receiver.TokenReader): a read on the readers'
// pool, so the receiver can refuse a known replay before extracting
// anything. The insert in the receipt's transaction still decides.
func (s *Store) SeenToken(ctx context.Context, source string, token [32]byte, at time.Time) ([32]byte, bool, error) {
	var sum []byte
	err := s.rdb.QueryRowContext(ctx, `SELECT body_sha256 FROM seen_tokens WHERE source = ? AND token_sha256 = ? AND expires_at > ?`,
		source, token[:], fmtTime(at)).Scan(&sum)
	if errors.Is(err, sql.ErrNoRows) {
		return [32]byte{}, false, nil
	}
	if err != nil {
		return [32]byte{}, false, fmt.Errorf("read seen token: %w", err)
	}
	var out [32]byte
	copy(out[:], sum)
	return out, len(sum) == len(out), nil
}
