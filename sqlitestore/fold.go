package sqlitestore

// The dedup memory has two levels (schema 15): new claims go into
// claims_recent, and the writer folds them into claims a key range at a
// time. Why: a claim with an id in no order (a UUID) lands on a random leaf
// of its index. In one index of millions of claims those leaves lie all
// over the file and every new claim dirtied one of them; in claims_recent
// the leaves are few and stay cached, and a fold of a key range writes
// each leaf of claims that the range covers once for all the claims it
// brings (at the default sizes some ten claims a leaf).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

const (
	// foldRatio: claims_recent is folded down to 1/foldRatio of the claims
	// already folded. A fold of a key range writes each leaf of claims
	// that the range covers; the larger claims_recent is against claims,
	// the more claims each of those leaves receives.
	foldRatio = 8
	// defaultFoldMin: below this many recent claims nothing is folded.
	defaultFoldMin = 1 << 20
	// defaultFoldChunk is the claims one fold transaction moves: short, so
	// the commits queued behind it wait little.
	defaultFoldChunk = 512
)

// foldState is the writer's: only its goroutine touches it.
type foldState struct {
	stmts      foldStmts
	source, id string // the last key folded; "" from the start
	lastRecent int64  // claims_recent's rows after the last commit
	credit     int64  // claims to fold before the next chunk is due
}

type foldStmts struct {
	levels, bound, insertTo, deleteTo, moved *sql.Stmt
}

func (f *foldStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		// The folded claims are the events less the recent ones: the
		// counters already hold the events per source.
		{&f.levels, `SELECT recent, (SELECT coalesce(sum(n), 0) FROM counters WHERE kind = 'accepted') - recent FROM claim_levels`},
		// The last key of the next chunk: of the (at most ?3) keys after
		// ?1, ?2, the greatest.
		{&f.bound, `SELECT source, event_id FROM (SELECT source, event_id FROM claims_recent
			WHERE (source, event_id) > (?1, ?2) ORDER BY source, event_id LIMIT ?3)
			ORDER BY source DESC, event_id DESC LIMIT 1`},
		{&f.insertTo, `INSERT INTO claims (source, event_id, event_ref) SELECT source, event_id, event_ref FROM claims_recent
			WHERE (source, event_id) > (?1, ?2) AND (source, event_id) <= (?3, ?4) ORDER BY source, event_id`},
		{&f.deleteTo, `DELETE FROM claims_recent WHERE (source, event_id) > (?1, ?2) AND (source, event_id) <= (?3, ?4)`},
		{&f.moved, `UPDATE claim_levels SET recent = recent - ?`},
	} {
		st, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			f.close()
			return fmt.Errorf("prepare statement: %w", err)
		}
		*p.dst = st
	}
	return nil
}

func (f *foldStmts) close() {
	for _, st := range []*sql.Stmt{f.levels, f.bound, f.insertTo, f.deleteTo, f.moved} {
		if st != nil {
			st.Close()
		}
	}
}

// foldMin is the recent claims below which nothing is folded.
func (s *Store) foldMin() int64 {
	if s.opts.FoldMin > 0 {
		return int64(s.opts.FoldMin)
	}
	return defaultFoldMin
}

func (s *Store) foldChunkSize() int64 {
	if s.opts.FoldChunk > 0 {
		return int64(s.opts.FoldChunk)
	}
	return defaultFoldChunk
}

// afterCommit runs in the writer after each transaction: while
// claims_recent is above its limit it folds, at twice the rate new claims
// arrive, one chunk per commit at most, so that the fold keeps pace under
// any load and a commit waits behind one chunk at most.
func (s *Store) afterCommit() {
	f := &s.fold
	ctx := context.Background()
	var recent, folded int64
	if err := f.stmts.levels.QueryRowContext(ctx).Scan(&recent, &folded); err != nil {
		s.log.Error("read the claim levels", "err", err)
		return
	}
	grew := recent - f.lastRecent
	f.lastRecent = recent
	if recent <= max(s.foldMin(), folded/foldRatio) {
		f.credit = 0
		return
	}
	chunk := s.foldChunkSize()
	if grew > 0 {
		f.credit = min(f.credit+2*grew, 4*chunk)
	}
	if f.credit < chunk {
		return
	}
	n, err := s.foldChunk(ctx, chunk)
	if err != nil {
		s.log.Error("fold recent claims", "err", err)
		f.credit = 0
		return
	}
	f.credit -= chunk
	f.lastRecent -= n
}

// foldChunk moves the next n recent claims after the cursor into claims, in
// one transaction, and advances the cursor (to the start after the last).
func (s *Store) foldChunk(ctx context.Context, n int64) (moved int64, err error) {
	f := &s.fold
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var hiSource, hiID string
	err = tx.StmtContext(ctx, f.stmts.bound).QueryRowContext(ctx, f.source, f.id, n).Scan(&hiSource, &hiID)
	if errors.Is(err, sql.ErrNoRows) { // past the last key: start again
		f.source, f.id = "", ""
		return 0, tx.Commit()
	}
	if err != nil {
		return 0, err
	}
	if _, err = tx.StmtContext(ctx, f.stmts.insertTo).ExecContext(ctx, f.source, f.id, hiSource, hiID); err != nil {
		return 0, err
	}
	res, err := tx.StmtContext(ctx, f.stmts.deleteTo).ExecContext(ctx, f.source, f.id, hiSource, hiID)
	if err != nil {
		return 0, err
	}
	if moved, err = res.RowsAffected(); err != nil {
		return 0, err
	}
	if _, err = tx.StmtContext(ctx, f.stmts.moved).ExecContext(ctx, moved); err != nil {
		return 0, err
	}
	if err = tx.Commit(); err != nil {
		return 0, err
	}
	f.source, f.id = hiSource, hiID
	if moved < n {
		f.source, f.id = "", "" // that was the last chunk
	}
	return moved, nil
}
