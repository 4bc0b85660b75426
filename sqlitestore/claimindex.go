package sqlitestore

// The recent level of the dedup memory is claims_log (schema 16), appended
// in the order claims arrive and with no index by key, so that a new claim
// writes the log's last leaf instead of a random one. Its look-up by key is
// claimIndex, in this process's memory:
//
//   - It is read from the log once (at Open in serve, before the first
//     claim elsewhere), and from then on it knows every row up to lastSeq.
//     At the first claim of each write transaction, which holds SQLite's
//     write lock, the writer reads the rows past lastSeq: the claims other
//     processes committed (backfill and quarantine release run from the
//     command line). Sequence numbers never come back (AUTOINCREMENT).
//   - The transaction's own claims are seen at once by the rest of it
//     (pending) and join the index only once it commits.
//   - An entry is a candidate, never the answer: a hit counts once the
//     events row it names has that source and event id. Retention (from
//     any process) deletes claims without telling the index, and an events
//     row id can be reused after the newest row is deleted.
//   - It is ordered by key, so that serve folds a generation into claims in
//     key order without sorting it (a sort of a million claims beside the
//     load tripled the bench's p99 on two cores).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
)

// claimItem is one claim of the log: its key and its events row. The key
// is the source, a NUL and the event id in one string: in the order of
// claims' (source, event_id) (a source name has no NUL), and one
// allocation a claim instead of two (83 heap bytes a claim against 108,
// BenchmarkClaimIndex).
type claimItem struct {
	key string
	ref int64
}

func claimKeyOf(source, id string) string { return source + "\x00" + id }

// split is the item's source and event id.
func (it claimItem) split() (source, id string) {
	source, id, _ = strings.Cut(it.key, "\x00")
	return source, id
}

func claimLess(a, b claimItem) bool { return a.key < b.key }

// claimTree is an ordered set of claims by key. Degree 32: nodes of up to
// 63 items, which keeps a look-up to a few cache lines per level.
type claimTree = btree.BTreeG[claimItem]

func newClaimTree() *claimTree { return btree.NewG(32, claimLess) }

// claimIndex is the in-memory look-up of claims_log. The writer goroutine
// is its only mutator and changes it under mu; readers hold mu for reading.
type claimIndex struct {
	buildMu sync.Mutex  // one build
	built   atomic.Bool // filled and frozen hold every row up to lastSeq
	lastSeq atomic.Int64

	mu sync.RWMutex
	// filling holds the log's rows past genMax. frozen holds those up to
	// genMax not yet folded into claims (serve folds them in key order and
	// removes each chunk once it has committed).
	filling, frozen *claimTree
	genMax          int64

	// The writer's current transaction.
	tx struct {
		caughtUp bool
		base     int64            // the log's top sequence number when it caught up
		inserted int64            // claims it inserted: log rows base+1..base+inserted
		pending  map[string]int64 // by claimKeyOf
	}

	// filters is the writer's filter over both levels (filter.go).
	filters filterState

	// startHashes are the filter hashes of the keys buildClaimIndex put
	// in, taken as it read them, while the index still holds exactly those
	// (lastSeq at startSeq): the first filter of serve adds them instead of
	// walking the trees and hashing each key again (addIndexKeys).
	startHashes []uint64
	startSeq    int64
}

// add puts a row of the log into the index; the caller holds mu.
func (x *claimIndex) add(seq int64, it claimItem) {
	if seq <= x.genMax {
		x.frozen.ReplaceOrInsert(it)
		return
	}
	x.filling.ReplaceOrInsert(it)
}

// candidates returns the events rows the index knows for a key, newest
// first; pending adds the writer's current transaction's own claims. The
// writer calls it without mu (it is the only mutator); readers with mu
// held for reading.
func (x *claimIndex) candidates(dst []int64, source, id string, pending bool) []int64 {
	k := claimItem{key: claimKeyOf(source, id)}
	if pending {
		if ref, ok := x.tx.pending[k.key]; ok {
			dst = append(dst, ref)
		}
	}
	if it, ok := x.filling.Get(k); ok {
		dst = append(dst, it.ref)
	}
	if x.frozen != nil {
		if it, ok := x.frozen.Get(k); ok {
			dst = append(dst, it.ref)
		}
	}
	return dst
}

// ClaimsInMemory is the number of claims this process holds in memory: the
// newest claims (claims_log), read at Open in serve and kept as they come.
// Their memory grows with it (about 83 bytes a claim with ids as long as
// UUIDs), and so does the next start's read.
func (s *Store) ClaimsInMemory() int { return s.claims.size() }

// size is the number of claims the index holds.
func (x *claimIndex) size() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	n := 0
	if x.filling != nil {
		n += x.filling.Len()
	}
	if x.frozen != nil {
		n += x.frozen.Len()
	}
	return n
}

// readLogRows reads the log's rows with lo < seq <= hi into the index, a
// few thousand at a time under mu so that readers are not held up long.
// The rows are put into the trees by a second goroutine while this one
// reads on: at serve's start SQLite's decoding and the trees' inserts were
// each about half of reading a large log (1.1 M claims), one after the
// other on one core. The inserts keep the log's order (a key claimed again
// after retention deleted it is replaced by its later row), and
// readLogRows returns only once every row it read is in.
func (x *claimIndex) readLogRows(ctx context.Context, q querier, lo, hi int64, skip func(seq int64, it claimItem) bool) error {
	// The key is put together by SQLite: one string for the driver to
	// copy instead of two and a concatenation.
	rows, err := q.QueryContext(ctx, `SELECT seq, source || char(0) || event_id, event_ref FROM claims_log WHERE seq > ? AND seq <= ? ORDER BY seq`, lo, hi)
	if err != nil {
		return err
	}
	defer rows.Close()
	type row struct {
		seq int64
		it  claimItem
	}
	const batchRows = 4096
	full, free := make(chan []row, 2), make(chan []row, 3)
	for range cap(free) {
		free <- make([]row, 0, batchRows)
	}
	inserted := make(chan struct{})
	go func() {
		defer close(inserted)
		for batch := range full {
			x.mu.Lock()
			for _, r := range batch {
				x.add(r.seq, r.it)
			}
			x.mu.Unlock()
			free <- batch[:0]
		}
	}()
	batch := <-free
	readErr := func() error {
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.seq, &r.it.key, &r.it.ref); err != nil {
				return err
			}
			if skip != nil && skip(r.seq, r.it) {
				continue
			}
			if batch = append(batch, r); len(batch) == batchRows {
				full <- batch
				batch = <-free
			}
		}
		return rows.Err()
	}()
	if readErr == nil && len(batch) > 0 {
		full <- batch
	}
	close(full)
	<-inserted
	return readErr
}

const logTopSQL = `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'claims_log'), 0)`

// buildClaimIndex reads the log into memory, from one read snapshot and
// without SQLite's write lock, so that a command-line writer building its
// index does not hold up serve's commits. Rows of the generation being
// folded that are already in claims (keys up to claim_fold's) are left
// out. Safe to call from any goroutine; the first call builds.
func (s *Store) buildClaimIndex(ctx context.Context) error {
	x := &s.claims
	if x.built.Load() {
		return nil
	}
	x.buildMu.Lock()
	defer x.buildMu.Unlock()
	if x.built.Load() {
		return nil
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("read the claims log: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	var top, genMax int64
	var curSource, curID string
	if err := tx.QueryRowContext(ctx, `SELECT (`+logTopSQL+`), gen_max, source, event_id FROM claim_fold`).
		Scan(&top, &genMax, &curSource, &curID); err != nil {
		return fmt.Errorf("read the claims log: %w", err)
	}
	x.mu.Lock()
	x.filling, x.frozen, x.genMax = newClaimTree(), nil, genMax
	if genMax > 0 {
		x.frozen = newClaimTree()
	}
	x.mu.Unlock()
	cursor := foldCursor(curSource, curID)
	var hashes []uint64
	folded := func(seq int64, it claimItem) bool {
		if seq <= genMax && !claimLess(cursor, it) {
			return true
		}
		if s.opts.Fold {
			hashes = append(hashes, keyHash(it.key))
		}
		return false
	}
	if err := x.readLogRows(ctx, tx, 0, top, folded); err != nil {
		return fmt.Errorf("read the claims log: %w", err)
	}
	x.startHashes, x.startSeq = hashes, top
	x.lastSeq.Store(top)
	x.built.Store(true)
	return nil
}

// claimsBegin resets the writer's per-transaction state.
func (x *claimIndex) claimsBegin() {
	x.tx.caughtUp, x.tx.base, x.tx.inserted = false, 0, 0
	clear(x.tx.pending)
}

// catchUp, at the first claim of a write transaction, reads the rows other
// processes added to the log since the index last looked. The transaction
// holds SQLite's write lock, so nobody adds any until it ends.
func (s *Store) catchUp(ctx context.Context, tx *sql.Tx) error {
	x := &s.claims
	if x.tx.caughtUp {
		return nil
	}
	if !x.built.Load() {
		// runTx builds it before a claiming transaction begins; this is
		// the safety net for a claim it did not foresee.
		return errors.New("claim index not built")
	}
	var top int64
	if err := tx.StmtContext(ctx, s.stmts.logTop).QueryRowContext(ctx).Scan(&top); err != nil {
		return fmt.Errorf("read the claims log: %w", err)
	}
	if last := x.lastSeq.Load(); top > last {
		note := func(_ int64, it claimItem) bool {
			x.noteClaim(it.key)
			return false
		}
		if err := x.readLogRows(ctx, tx, last, top, note); err != nil {
			return fmt.Errorf("read the claims log: %w", err)
		}
		x.lastSeq.Store(top)
	}
	x.tx.caughtUp, x.tx.base = true, top
	return nil
}

// claimed notes a claim the writer's transaction inserted.
func (x *claimIndex) claimed(source, id string, ref int64) {
	if x.tx.pending == nil {
		x.tx.pending = make(map[string]int64)
	}
	key := claimKeyOf(source, id)
	x.tx.pending[key] = ref
	x.tx.inserted++
	x.noteClaim(key)
}

// claimsBeforeCommit reads the log's top inside the transaction: when the rows
// past base are exactly its own claims, the index will know every row up
// to it once they join.
func (s *Store) claimsBeforeCommit(ctx context.Context, tx *sql.Tx) (top int64, err error) {
	x := &s.claims
	if x.tx.inserted == 0 {
		return 0, nil
	}
	if err := tx.StmtContext(ctx, s.stmts.logTop).QueryRowContext(ctx).Scan(&top); err != nil {
		return 0, fmt.Errorf("read the claims log: %w", err)
	}
	return top, nil
}

// claimsAfterCommit adds a committed transaction's claims to the index.
// Only then does lastSeq move past them: a reader that loads lastSeq and
// then misses in the index looks past it in the log.
func (x *claimIndex) claimsAfterCommit(top int64) {
	if len(x.tx.pending) > 0 {
		x.mu.Lock()
		for key, ref := range x.tx.pending {
			x.filling.ReplaceOrInsert(claimItem{key: key, ref: ref})
		}
		x.mu.Unlock()
	}
	if x.tx.inserted > 0 && top == x.tx.base+x.tx.inserted && x.lastSeq.Load() == x.tx.base {
		x.lastSeq.Store(top)
	}
	x.claimsBegin()
}

const verifyClaimSQL = `SELECT body_sha256 FROM events WHERE id = ? AND source = ? AND event_id = ?`

// verifyClaim reports whether events row ref is the claim of (source, id),
// and its body hash; stmt is verifyClaimSQL prepared, or nil.
func verifyClaim(ctx context.Context, q querier, stmt *sql.Stmt, ref int64, source, id string) (sum []byte, ok bool, err error) {
	if stmt != nil {
		err = stmt.QueryRowContext(ctx, ref, source, id).Scan(&sum)
	} else {
		err = q.QueryRowContext(ctx, verifyClaimSQL, ref, source, id).Scan(&sum)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return sum, true, nil
}

// findClaimTx is the writer's look-up of a key in the log, inside its
// transaction: its own claims first, then the index, each checked against
// the events row.
func (s *Store) findClaimTx(ctx context.Context, tx *sql.Tx, source, id string) (ref int64, sum []byte, ok bool, err error) {
	if err := s.catchUp(ctx, tx); err != nil {
		return 0, nil, false, err
	}
	var buf [3]int64
	var verify *sql.Stmt
	for _, ref := range s.claims.candidates(buf[:0], source, id, true) {
		if verify == nil {
			verify = tx.StmtContext(ctx, s.stmts.verify)
		}
		sum, ok, err := verifyClaim(ctx, tx, verify, ref, source, id)
		if err != nil {
			return 0, nil, false, fmt.Errorf("look up claimed event: %w", err)
		}
		if ok {
			return ref, sum, true, nil
		}
	}
	return 0, nil, false, nil
}

// FindClaim returns the events row that claims (source, id), for readers.
// With the index built it looks there, then past the index's last row in
// the log, then in claims, in that order: a claim the index does not hold
// yet is past lastSeq, and one the fold removed from it is in claims
// before it leaves the index. Without the index (a read-only store, a
// command that has not claimed) it scans the log.
func (s *Store) findClaim(ctx context.Context, source, id string) (int64, bool, error) {
	x := &s.claims
	if !x.built.Load() {
		var ref int64
		err := s.rdb.QueryRowContext(ctx, `SELECT event_ref FROM claim_refs WHERE source = ? AND event_id = ?`, source, id).Scan(&ref)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		return ref, err == nil, err
	}
	seen := x.lastSeq.Load()
	var buf [2]int64
	x.mu.RLock()
	cands := x.candidates(buf[:0], source, id, false)
	x.mu.RUnlock()
	for _, ref := range cands {
		_, ok, err := verifyClaim(ctx, s.rdb, nil, ref, source, id)
		if err != nil || ok {
			return ref, ok, err
		}
	}
	var ref int64
	err := s.rdb.QueryRowContext(ctx, `SELECT event_ref FROM claims_log WHERE seq > ? AND source = ? AND event_id = ?
		UNION ALL SELECT event_ref FROM claims WHERE source = ? AND event_id = ? LIMIT 1`, seen, source, id, source, id).Scan(&ref)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return ref, err == nil, err
}
