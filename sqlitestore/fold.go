package sqlitestore

// The dedup memory has two levels (schema 16): new claims are appended to
// claims_log in arrival order, and serve folds them into claims a
// generation at a time. Why: a claim with an id in no order (a UUID) lands
// on a random leaf of a key-ordered index. In one index of millions of
// claims those leaves lie all over the file and every new claim dirtied
// one of them; the log writes its last leaf only. The fold then brings a
// generation's claims to claims in key order, 512 a transaction, each
// chunk writing the leaves of claims its key range covers once for all the
// claims it brings (at the default sizes some ten claims a leaf). The key
// order comes from the in-memory index (claimindex.go), which is ordered
// as claims arrive: nothing is sorted.
//
// A generation:
//  1. cut: when the log holds more than max(FoldMin, claims/8) and no
//     generation is being folded, every row up to the log's top becomes
//     the generation (claim_fold.gen_max), and the index's filling tree
//     becomes its frozen one;
//  2. fold: chunks in key order into claims, the last key folded committed
//     with each chunk (a restart resumes after it), each chunk leaving the
//     frozen tree once committed;
//  3. drop: the generation leaves the log in ranges of sequence numbers.
// Each step is its own transaction. The writer takes them while it has
// nothing else to write (FoldIdle of quiet), with a pause as long as the
// step between two, in which other processes' writes take the lock: the fold
// of a chunk costs some 14 µs of CPU a claim, and at twice the rate claims
// arrive beside a burst it cost the burst a fifth of its acks on two cores
// (docs/performance.md). Only once the log holds twice its limit does it
// also fold beside the load, at twice the rate new claims arrive, one step
// per commit at most, so that the log stays bounded under a load that
// never pauses and a commit waits behind one step at most.

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"
)

const (
	// foldRatio: a generation is cut once the log holds more than
	// 1/foldRatio of the claims already folded. The more claims a
	// generation has against claims, the more each leaf of claims that a
	// chunk writes receives.
	foldRatio = 8
	// defaultFoldMin: below this many claims in the log none is folded.
	defaultFoldMin = 1 << 20
	// defaultFoldChunk is the claims one fold transaction moves: short, so
	// the commits queued behind it wait little.
	defaultFoldChunk = 512
	// dropPerChunk: a drop deletes this many fold chunks' worth of log rows
	// at once; they are consecutive rows, on few pages.
	dropPerChunk = 4
)

// defaultFoldIdle: the quiet after which the writer takes a fold step.
const defaultFoldIdle = 20 * time.Millisecond

// foldState is the writer's: only its goroutine touches it.
type foldState struct {
	stmts      foldStmts
	cursor     claimItem // the last key folded of the generation
	lastRecent int64     // the log's rows after the last commit
	folded     int64     // claims only in claims, after the last commit
	credit     int64     // claims to fold before the next chunk is due
	retryAt    time.Time // after a failed idle step, none before this
}

type foldStmts struct {
	levels, insertTo, cursor, drop, cut *sql.Stmt
}

func (f *foldStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		// The folded claims are the events less the log's: the counters
		// already hold the events per source.
		{&f.levels, `SELECT recent, (SELECT coalesce(sum(n), 0) FROM counters WHERE kind = 'accepted') - recent FROM claim_levels`},
		// A chunk, by events row: a row retention deleted is gone from the
		// log too, and one whose id came back is past the generation.
		{&f.insertTo, `INSERT INTO claims (source, event_id, event_ref) SELECT source, event_id, event_ref FROM claims_log
			WHERE event_ref IN (SELECT value FROM json_each(?1)) AND seq <= ?2 ORDER BY source, event_id`},
		{&f.cursor, `UPDATE claim_fold SET source = ?, event_id = ?`},
		{&f.drop, `DELETE FROM claims_log WHERE seq <= min(?1, (SELECT min(seq) FROM claims_log) + ?2 - 1)`},
		{&f.cut, `UPDATE claim_fold SET gen_max = ?, source = '', event_id = ''`},
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
	for _, st := range []*sql.Stmt{f.levels, f.insertTo, f.cursor, f.drop, f.cut} {
		if st != nil {
			st.Close()
		}
	}
}

// foldMin is the log's claims below which no generation is cut.
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

func (s *Store) foldIdle() time.Duration {
	if s.opts.FoldIdle > 0 {
		return s.opts.FoldIdle
	}
	return defaultFoldIdle
}

// foldLimit is the log's claims above which a generation is cut.
func (s *Store) foldLimit() int64 {
	return max(s.foldMin(), s.fold.folded/foldRatio)
}

// foldCursor is the cursor claim_fold keeps: the last key folded, or
// empty ones before the first, which sort before every key.
func foldCursor(source, id string) claimItem {
	if source == "" && id == "" {
		return claimItem{}
	}
	return claimItem{key: claimKeyOf(source, id)}
}

// startFold reads where the fold stands (serve's Open, after the index).
func (s *Store) startFold(ctx context.Context) error {
	f := &s.fold
	var source, id string
	if err := s.wdb.QueryRowContext(ctx, `SELECT source, event_id FROM claim_fold`).Scan(&source, &id); err != nil {
		return err
	}
	f.cursor = foldCursor(source, id)
	return f.stmts.levels.QueryRowContext(ctx).Scan(&f.lastRecent, &f.folded)
}

// foldDue says whether the writer has a fold step to take when idle.
func (s *Store) foldDue() bool {
	return s.opts.Fold && (s.claims.genMax != 0 || s.fold.lastRecent > s.foldLimit()) &&
		(s.fold.retryAt.IsZero() || time.Now().After(s.fold.retryAt))
}

// afterCommit runs in the writer after each transaction, in a store that
// folds: it cuts a generation when the log is above its limit, and takes
// a fold step beside the load when one is due and the log holds twice
// its limit.
func (s *Store) afterCommit() {
	if !s.opts.Fold {
		return
	}
	f := &s.fold
	ctx := context.Background()
	var recent int64
	if err := f.stmts.levels.QueryRowContext(ctx).Scan(&recent, &f.folded); err != nil {
		s.log.Error("read the claim levels", "err", err)
		return
	}
	grew := recent - f.lastRecent
	f.lastRecent = recent
	x := &s.claims
	limit := s.foldLimit()
	if x.genMax == 0 {
		f.credit = 0
		if recent > limit {
			if err := s.cutGeneration(ctx); err != nil {
				s.log.Error("fold recent claims: cut a generation", "err", err)
			}
		}
		return
	}
	if recent <= 2*limit {
		f.credit = 0
		return // the idle steps will do
	}
	chunk := s.foldChunkSize()
	if grew > 0 {
		f.credit = min(f.credit+2*grew, 4*chunk)
	}
	if f.credit < chunk {
		return
	}
	f.credit -= chunk
	if err := s.foldStep(ctx, int(chunk)); err != nil {
		s.log.Error("fold recent claims", "err", err)
		f.credit = 0
	}
}

// idleFold takes one fold step while the writer has nothing to write: the
// cut of a generation when one is due, or its next step.
func (s *Store) idleFold() {
	ctx := context.Background()
	var err error
	if s.claims.genMax == 0 {
		err = s.cutGeneration(ctx)
	} else {
		err = s.foldStep(ctx, int(s.foldChunkSize()))
	}
	if err != nil {
		s.log.Error("fold recent claims", "err", err)
		s.fold.retryAt = time.Now().Add(time.Second) // not every FoldIdle while it fails
		return
	}
	s.fold.retryAt = time.Time{}
	var recent int64
	if err := s.fold.stmts.levels.QueryRowContext(ctx).Scan(&recent, &s.fold.folded); err != nil {
		s.log.Error("read the claim levels", "err", err)
		return
	}
	s.fold.lastRecent = recent
}

// cutGeneration makes every row of the log the generation to fold.
func (s *Store) cutGeneration(ctx context.Context) (err error) {
	x := &s.claims
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	x.claimsBegin()
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
		x.claimsBegin()
	}()
	if err = s.catchUp(ctx, tx); err != nil {
		return err
	}
	top := x.lastSeq.Load()
	if _, err = tx.StmtContext(ctx, s.fold.stmts.cut).ExecContext(ctx, top); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return err
	}
	x.mu.Lock()
	x.frozen, x.filling, x.genMax = x.filling, newClaimTree(), top
	x.mu.Unlock()
	s.fold.cursor = claimItem{}
	return nil
}

// foldStep folds the generation's next chunk of keys after the cursor, or,
// once none is left, drops the next range of it from the log, or, once
// none of it is left, ends it. Each in a transaction of its own.
func (s *Store) foldStep(ctx context.Context, chunk int) (err error) {
	x := &s.claims
	f := &s.fold
	// Only this goroutine changes the trees: it reads them without mu.
	items := make([]claimItem, 0, chunk)
	if x.frozen != nil {
		x.frozen.AscendGreaterOrEqual(f.cursor, func(it claimItem) bool {
			if it.key == f.cursor.key && it.key != "" {
				return true // the cursor's own key was folded
			}
			items = append(items, it)
			return len(items) < chunk
		})
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if len(items) > 0 {
		refs := make([]byte, 0, 12*len(items))
		refs = append(refs, '[')
		for i, it := range items {
			if i > 0 {
				refs = append(refs, ',')
			}
			refs = strconv.AppendInt(refs, it.ref, 10)
		}
		refs = append(refs, ']')
		if _, err = tx.StmtContext(ctx, f.stmts.insertTo).ExecContext(ctx, string(refs), x.genMax); err != nil {
			return err
		}
		last := items[len(items)-1]
		source, id := last.split()
		if _, err = tx.StmtContext(ctx, f.stmts.cursor).ExecContext(ctx, source, id); err != nil {
			return err
		}
		if err = tx.Commit(); err != nil {
			return err
		}
		// In claims now: readers and the writer find them there.
		x.filters.kept.folded(x.genMax)
		x.mu.Lock()
		for _, it := range items {
			x.frozen.Delete(it)
		}
		x.mu.Unlock()
		f.cursor = last
		return nil
	}
	res, err := tx.StmtContext(ctx, f.stmts.drop).ExecContext(ctx, x.genMax, dropPerChunk*chunk)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n > 0 {
		if _, err = tx.ExecContext(ctx, `UPDATE claim_levels SET recent = recent - ?`, n); err != nil {
			return err
		}
		return tx.Commit()
	}
	// The generation is in claims and out of the log.
	if _, err = tx.StmtContext(ctx, f.stmts.cut).ExecContext(ctx, 0); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return err
	}
	x.mu.Lock()
	x.frozen, x.genMax = nil, 0
	x.mu.Unlock()
	f.cursor = claimItem{}
	return nil
}
