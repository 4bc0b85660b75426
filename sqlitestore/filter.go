package sqlitestore

// A Bloom filter over the keys of both levels of the dedup memory, in
// serve's writer (Options.Fold). Every new claim must first know its id is
// in neither level: two look-ups in the log's in-memory index and one in
// claims, which with an id in no order reads a random leaf of a table of
// hundreds of MB. After schema 16 those look-ups were the largest part of
// what a 10 M-claim store still paid per acknowledgement over a fresh one
// (docs/performance.md). The filter answers "in neither" for all but about
// one new id in a hundred, which then skip both look-ups.
//
// It must never say "in neither" for a key either level holds: that would
// accept a duplicate. Every claim enters the log first (the events insert
// trigger); claims only receives keys from the log (the fold, serve only,
// one serve per file) and, before the store opens, from the migrations. So
// the filter holds every key that
//
//   - claims held when the build read its range (a reader, a range of keys
//     per snapshot), or
//   - the index held when the build began (the writer adds them all), or
//   - entered the index since: the writer's own claims (added as they are
//     inserted, before the commit) and those of other processes (added
//     when the writer catches up with the log).
//
// A key the fold moves into claims after the build read its range came
// from the log, so the second or third case holds it. A bulk move into
// claims (FillHistory, the benchmark's history) throws the filter away and
// builds it anew. Until a filter is installed, and after a failed build,
// the writer looks in both levels, as a store that does not fold always
// does. A claim retention deletes stays in the filter (a "maybe": one
// look-up more); the filter is built anew once it holds twice the keys it
// was sized for.

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
)

const (
	// filterBitsPerKey: with blocks of 256 bits and 8 bits a key, about
	// 1 % of "maybe" for a key never added, at the size it was made for.
	filterBitsPerKey = 10
	// filterMinKeys: a filter is sized for at least this many keys, and
	// for twice the keys both levels hold when it is built.
	filterMinKeys = 1 << 20
	// filterRange is the keys of claims a build reads per snapshot: short
	// snapshots, so that checkpoints go on beside it.
	filterRange = 16384
	// filterPace: after each range the build sleeps this many times what
	// the range took, so that it takes a share of a core beside the load.
	filterPace = 1
)

// filterSalts spread one 32-bit hash over the eight words of a block (the
// split-block Bloom filter of Apache Parquet): one cache line per key.
var filterSalts = [8]uint32{0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d, 0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31}

// filterBlock's words are read and set with sync/atomic's functions once
// the filter is shared; a filter read back from the file is filled with
// plain stores before it is (atomic stores cost 140 ms at 10 M claims).
type filterBlock [8]uint32

// claimFilter is safe for concurrent adds and look-ups: the build adds
// beside the writer.
type claimFilter struct {
	blocks []filterBlock
	keys   atomic.Int64 // keys added (those that set no bit aside)
	size   int64        // keys it was sized for
}

func newClaimFilter(size int64) *claimFilter {
	size = max(size, filterMinKeys)
	return &claimFilter{blocks: make([]filterBlock, filterBlocks(size)), size: size}
}

func filterBlocks(size int64) int64 { return (size*filterBitsPerKey + 255) / 256 }

// filterHash names the hash of the keys in a kept filter (claims_filter):
// a hash with no per-process seed, so that the next process reads the same
// bits. Ids chosen to collide cost look-ups, never a wrong answer.
const filterHash = "xxh64"

// hash is the hash of a key as the index spells it (claimKeyOf), without
// building the string.
func (f *claimFilter) hash(source, id string) uint64 {
	var h xxhash.Digest
	h.Reset()
	_, _ = h.WriteString(source)
	_, _ = h.Write([]byte{0})
	_, _ = h.WriteString(id)
	return h.Sum64()
}

// block and mask: the high half of the hash picks the block, the low half
// one bit in each of its words.
func (f *claimFilter) block(sum uint64) *filterBlock {
	hi, _ := bits.Mul64(sum, uint64(len(f.blocks)))
	return &f.blocks[hi]
}

func mask(sum uint64, i int) uint32 { return 1 << ((uint32(sum) * filterSalts[i]) >> 27) }

// addHash counts a key only when it set a bit: a key added twice (a
// claim in both levels, the log's keys again at each start) counts once.
func (f *claimFilter) addHash(sum uint64) {
	b := f.block(sum)
	set := false
	for i := range b {
		m := mask(sum, i)
		if atomic.OrUint32(&b[i], m)&m == 0 {
			set = true
		}
	}
	if set {
		f.keys.Add(1)
	}
}

// addKey adds a key spelt as the index spells it.
func (f *claimFilter) addKey(key string) { f.addHash(keyHash(key)) }

// keyHash is the filter's hash of a key spelt as the index spells it.
func keyHash(key string) uint64 { return xxhash.Sum64String(key) }

// mayHold is false only for a key never added.
func (f *claimFilter) mayHold(source, id string) bool {
	sum := f.hash(source, id)
	b := f.block(sum)
	for i := range b {
		if atomic.LoadUint32(&b[i])&mask(sum, i) == 0 {
			return false
		}
	}
	return true
}

// full says it holds so many keys that its "maybe" rate has grown (about
// 1 % at its size, 8 % at twice it).
func (f *claimFilter) full() bool { return f.keys.Load() > 2*f.size }

func (f *claimFilter) bytes() int { return len(f.blocks) * 32 }

// filterState is the writer's: only its goroutine touches it, but for
// built, which the build sends on.
type filterState struct {
	cur, next *claimFilter // installed; being built
	gen       int          // builds started or thrown away
	stop      context.CancelFunc
	built     chan builtFilter
	retryAt   time.Time // after a failed build, none before this
	// hold, in tests, keeps a build after its first range until closed.
	hold chan struct{}
	kept keptState // what the file keeps of cur
}

// keptState is what the file keeps of the filters (claims_filter, two
// slots; claims_filter_parts): the writer's view, which the trigger
// claims_filter_stale can only make more careful than the file.
type keptState struct {
	has    bool  // a slot holds a complete filter
	logSeq int64 // its log_seq: it holds every key claimed up to it
	force  bool  // cur must be kept though has (a new build: the kept one was full)
	// The keep under way: slot is the one being written (the other holds
	// the complete one, if has), next its next part (0: none begun), seq
	// the log_seq its first part wrote.
	slot, next int
	seq        int64
	retryAt    time.Time     // after a failed step, none before this
	spent      time.Duration // in the steps of the keep under way so far (the log's)
}

// covers says whether the complete kept filter survives the fold's
// inserts of generation genMax (claims_filter_stale).
func (k *keptState) covers(genMax int64) bool { return k.has && genMax > 0 && k.logSeq >= genMax }

// folded is what the fold's insert of generation genMax did to the file
// (claims_filter_stale): it deleted each header, complete or being
// written, whose log_seq is below genMax.
func (k *keptState) folded(genMax int64) {
	if !k.covers(genMax) {
		k.has = false
	}
	if k.next > 0 && k.seq < genMax {
		k.next = 0
	}
}

type builtFilter struct {
	gen  int
	err  error
	took time.Duration
}

// noteClaim adds a key entering the log to the filters. Writer only.
func (x *claimIndex) noteClaim(key string) {
	for _, f := range []*claimFilter{x.filters.cur, x.filters.next} {
		if f != nil {
			f.addKey(key)
		}
	}
}

// absent says a key is in neither level as of the writer's catch-up:
// true only with a filter installed that never saw it. Writer only.
func (x *claimIndex) absent(source, id string) bool {
	f := x.filters.cur
	return f != nil && !f.mayHold(source, id)
}

// startFilterBuild begins a new filter, sized for twice the keys of both
// levels: the writer adds the index's keys now and every key entering the
// log from now on; a reader adds claims'. Writer goroutine only.
func (s *Store) startFilterBuild() {
	x := &s.claims
	fs := &x.filters
	var recent, folded int64
	if err := s.fold.stmts.levels.QueryRowContext(context.Background()).Scan(&recent, &folded); err != nil {
		s.log.Error("read the claim levels", "err", err)
		fs.retryAt = time.Now().Add(time.Minute)
		return
	}
	fs.gen++
	next := newClaimFilter(2 * (recent + folded))
	fs.next = next
	x.addIndexKeys(next)
	gen, hold := fs.gen, fs.hold
	ctx, stop := context.WithCancel(s.bgCtx)
	fs.stop = stop
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		start := time.Now()
		err := s.fillFilter(ctx, next, hold, filterPace)
		select {
		case fs.built <- builtFilter{gen: gen, err: err, took: time.Since(start)}:
		case <-ctx.Done():
		}
	}()
}

// fillFilter adds every key of claims to f, a range at a time, sleeping
// pace times what each range took after it.
func (s *Store) fillFilter(ctx context.Context, f *claimFilter, hold chan struct{}, pace time.Duration) error {
	after := ""
	for first := true; ; first = false {
		began := time.Now()
		n, last, err := s.filterRange(ctx, f, after)
		if err != nil {
			return err
		}
		if first && hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if n < filterRange {
			return nil
		}
		after = last
		select {
		case <-time.After(pace * time.Since(began)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// filterRange adds the keys of claims after a key (as claimKeyOf spells
// it; "" before the first), filterRange of them at most, from one
// snapshot, and returns how many and the last.
func (s *Store) filterRange(ctx context.Context, f *claimFilter, after string) (int, string, error) {
	source, id := claimItem{key: after}.split()
	rows, err := s.rdb.QueryContext(ctx, `SELECT source || char(0) || event_id FROM claims
		WHERE (source, event_id) > (?, ?) ORDER BY source, event_id LIMIT ?`, source, id, filterRange)
	if err != nil {
		return 0, after, fmt.Errorf("read claims: %w", err)
	}
	defer rows.Close()
	var key sql.RawBytes // no copy of each key but the last
	n := 0
	for rows.Next() {
		if err := rows.Scan(&key); err != nil {
			return n, after, fmt.Errorf("read claims: %w", err)
		}
		f.addHash(xxhash.Sum64(key))
		if n++; n == filterRange {
			after = string(key)
		}
	}
	if err := rows.Err(); err != nil {
		return n, after, fmt.Errorf("read claims: %w", err)
	}
	return n, after, nil
}

// installFilter installs a finished build. Writer goroutine only.
func (s *Store) installFilter(b builtFilter) {
	fs := &s.claims.filters
	if b.gen != fs.gen || fs.next == nil {
		return // thrown away since it began
	}
	next := fs.next
	fs.next = nil
	fs.stop()
	if b.err != nil {
		s.log.Error("build the claims filter; new claims look in both levels", "err", b.err)
		fs.retryAt = time.Now().Add(time.Minute)
		return
	}
	fs.cur = next
	fs.kept.force = true // the file's, if any, is the last filter's, full or none
	fs.kept.next = 0
	s.log.Info("claims filter built", "keys", next.keys.Load(), "bytes", next.bytes(), "seconds", b.took.Seconds())
}

// filterDue says the writer should start a build: none installed or the
// installed one full, none under way, no failure within the minute.
func (s *Store) filterDue() bool {
	fs := &s.claims.filters
	return s.opts.Fold && fs.next == nil && (fs.cur == nil || fs.cur.full()) &&
		(fs.retryAt.IsZero() || time.Now().After(fs.retryAt))
}

// forgetFilter throws the filter and any build under way away: a bulk move
// into claims is coming that the fold does not make. Writer goroutine only.
func (s *Store) forgetFilter() {
	fs := &s.claims.filters
	if fs.stop != nil {
		fs.stop()
	}
	fs.cur, fs.next = nil, nil
	fs.gen++
	fs.kept.has, fs.kept.next = false, 0 // the caller deletes the file's
}

// readKeptFilter reads the filter the file keeps (the complete slot of
// claims_filter), nil when there is none or it cannot be read (the writer
// then builds one). Open, before the writer starts, with the log's index
// read: its keys, which the kept filter may lack, are added. The row stays:
// a crash from here on leaves it to the next start.
func (s *Store) readKeptFilter(ctx context.Context) (*claimFilter, error) {
	start := time.Now()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("read the kept claims filter: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	var hash string
	var slot, size, keys, logSeq, parts int64
	var raw []byte
	err = tx.QueryRowContext(ctx, `SELECT slot, hash, size, keys, log_seq, parts, bits FROM claims_filter
		WHERE parts >= 0 ORDER BY log_seq DESC LIMIT 1`).Scan(&slot, &hash, &size, &keys, &logSeq, &parts, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the kept claims filter: %w", err)
	}
	if parts > 0 {
		if raw, err = readFilterParts(ctx, tx, slot, parts, filterBlocks(size)*32); err != nil {
			return nil, fmt.Errorf("read the kept claims filter: %w", err)
		}
	}
	f, err := decodeFilter(hash, size, keys, raw)
	if err != nil {
		s.log.Warn("the kept claims filter is unreadable; building one", "err", err)
		return nil, nil
	}
	s.claims.addIndexKeys(f)
	s.claims.filters.kept = keptState{has: true, logSeq: logSeq, slot: 1 - int(slot)}
	s.log.Info("claims filter loaded", "keys", f.keys.Load(), "bytes", f.bytes(), "seconds", time.Since(start).Seconds())
	return f, nil
}

// readFilterParts reads slot's parts, up to want bytes (parts past the
// header's are another filter's, left behind).
func readFilterParts(ctx context.Context, tx *sql.Tx, slot, parts, want int64) ([]byte, error) {
	rows, err := tx.QueryContext(ctx, `SELECT part, bits FROM claims_filter_parts WHERE slot = ? AND part < ? ORDER BY part`, slot, parts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	raw := make([]byte, 0, want)
	var n int64
	for rows.Next() {
		var part int64
		var bits sql.RawBytes
		if err := rows.Scan(&part, &bits); err != nil {
			return nil, err
		}
		if part != n || int64(len(raw)+len(bits)) > want {
			return nil, nil // decodeFilter refuses the length
		}
		raw = append(raw, bits...)
		n++
	}
	return raw, rows.Err()
}

// filterPartBlocks is how many of a filter's 32-byte blocks one part of
// the kept filter holds (256 KiB): what one idle step of the writer
// writes. The whole filter in one transaction (25 MB at 10 M claims) held
// the write lock for 0.3-2.3 s at a clean stop.
const filterPartBlocks = 8192

// partBlocks is filterPartBlocks, or a test's.
func (s *Store) partBlocks() int { return cmp.Or(s.opts.partBlocks, filterPartBlocks) }

// parts is how many parts of per blocks f is kept in.
func (f *claimFilter) parts(per int) int { return (len(f.blocks) + per - 1) / per }

// partBytes is part i of f as kept: its blocks' words, little-endian.
func (f *claimFilter) partBytes(i, per int) []byte {
	blocks := f.blocks[i*per : min((i+1)*per, len(f.blocks))]
	raw := make([]byte, 0, len(blocks)*32)
	for b := range blocks {
		for j := range blocks[b] {
			raw = binary.LittleEndian.AppendUint32(raw, atomic.LoadUint32(&blocks[b][j]))
		}
	}
	return raw
}

// keepNeeded says whether cur must be written into the file: none kept;
// a new build; or a generation cut past what the kept one holds, whose
// first fold insert will delete it (so the writer keeps cur before it
// folds: a crash then finds the one or the other).
func (s *Store) keepNeeded() bool {
	k := &s.claims.filters.kept
	return !k.has || k.force || (s.claims.genMax > 0 && !k.covers(s.claims.genMax))
}

// keepDue says the writer should write the next part of cur into the file
// while it is idle: a filter installed and not full, no build under way,
// and a keep needed.
func (s *Store) keepDue() bool {
	fs := &s.claims.filters
	return s.opts.Fold && fs.cur != nil && !fs.cur.full() && fs.next == nil && s.keepNeeded() &&
		(fs.kept.retryAt.IsZero() || time.Now().After(fs.kept.retryAt))
}

// keepStep writes the next part of cur into the slot being written, and
// after the last completes it, in a transaction of its own. Writer
// goroutine only.
func (s *Store) keepStep(ctx context.Context) error {
	fs := &s.claims.filters
	k := &fs.kept
	start := time.Now()
	defer func() { k.spent += time.Since(start) }()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	s.keepResume()
	logSeq, last, err := s.keepParts(ctx, tx, fs.cur, k.slot, k.seq, k.next, k.next+1)
	if errors.Is(err, errKeepAgain) {
		s.log.Warn("the claims filter is kept anew: a generation past its first part was folded")
		k.next = 0
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	k.next++
	if last {
		s.kept(logSeq)
		s.log.Info("claims filter kept in the file", "keys", fs.cur.keys.Load(), "bytes", fs.cur.bytes(),
			"parts", fs.cur.parts(s.partBlocks()), "seconds", (k.spent + time.Since(start)).Seconds()) // the steps', not the pauses between
		k.spent = 0
	}
	return nil
}

// keepResume says where the keep under way goes on: from its next part,
// unless what it would keep does not hold the generation being folded
// (its log_seq is below it: the fold's first insert would delete it), or
// none is under way; then from the first, with the writer's log_seq.
// Between the writer's transactions every key claimed up to lastSeq is in
// cur (claimindex.go).
func (s *Store) keepResume() {
	k := &s.claims.filters.kept
	if g := s.claims.genMax; k.next > 0 && g > 0 && k.seq < g {
		k.next = 0
	}
	if k.next == 0 {
		k.seq = s.claims.lastSeq.Load()
	}
}

// kept records a complete keep in slot kept.slot: the next goes into the
// other slot.
func (s *Store) kept(logSeq int64) {
	k := &s.claims.filters.kept
	k.has, k.logSeq, k.force = true, logSeq, false
	k.slot, k.next = 1-k.slot, 0
}

// idleKeep takes one keepStep while the writer has nothing to write.
func (s *Store) idleKeep() {
	kept := &s.claims.filters.kept
	if err := s.keepStep(context.Background()); err != nil {
		s.log.Error("keep the claims filter in the file", "err", err)
		kept.retryAt = time.Now().Add(time.Minute)
		return
	}
	kept.retryAt = time.Time{}
}

// errKeepAgain: the header of the slot being written was deleted since its
// first part (claims_filter_stale): a generation past its log_seq was
// folded, whose keys its parts written so far may lack.
var errKeepAgain = errors.New("a generation past the kept filter's first part was folded")

// keepParts writes parts [from, to) of f into slot in tx and, once the
// last is written, completes the slot and returns its log_seq. The first
// part replaces the slot's header with one in progress (parts -1, which no
// start trusts) holding logSeq: every key claimed up to it is in f now,
// and bits are only ever set. The last part turns that header into f's and
// deletes the other slot's; if a fold deleted it meanwhile, errKeepAgain,
// whatever the writer believed.
func (s *Store) keepParts(ctx context.Context, tx *sql.Tx, f *claimFilter, slot int, logSeq int64, from, to int) (int64, bool, error) {
	per := s.partBlocks()
	if from == 0 {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO claims_filter (slot, hash, size, keys, log_seq, parts, bits)
			VALUES (?, ?, ?, 0, ?, -1, x'')`, slot, filterHash, f.size, logSeq); err != nil {
			return 0, false, err
		}
	}
	n := f.parts(per)
	for i := from; i < min(to, n); i++ {
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO claims_filter_parts (slot, part, bits) VALUES (?, ?, ?)`,
			slot, i, f.partBytes(i, per)); err != nil {
			return 0, false, err
		}
	}
	if to < n {
		return 0, false, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM claims_filter_parts WHERE slot = ? AND part >= ?`, slot, n); err != nil {
		return 0, false, err
	}
	err := tx.QueryRowContext(ctx, `UPDATE claims_filter SET keys = ?, parts = ? WHERE slot = ? AND parts = -1 RETURNING log_seq`,
		f.keys.Load(), n, slot).Scan(&logSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, errKeepAgain
	}
	if err != nil {
		return 0, false, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM claims_filter WHERE slot <> ?`, slot); err != nil {
		return 0, false, err
	}
	return logSeq, true, nil
}

// keepFilter completes a keep at Close (after the writer stopped) in one
// transaction, when one is needed: nothing when the file's holds what the
// fold will insert. None is kept while the first is still being built, nor
// a full one (the next start builds anew).
func (s *Store) keepFilter(ctx context.Context) error {
	fs := &s.claims.filters
	f := fs.cur
	if f == nil || f.full() || !s.keepNeeded() {
		return nil
	}
	start := time.Now()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keep the claims filter: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	n := f.parts(s.partBlocks())
	k := &fs.kept
	s.keepResume()
	logSeq, _, err := s.keepParts(ctx, tx, f, k.slot, k.seq, k.next, n)
	if errors.Is(err, errKeepAgain) {
		k.next = 0
		s.keepResume()
		logSeq, _, err = s.keepParts(ctx, tx, f, k.slot, k.seq, 0, n) // nothing else writes now
	}
	if err != nil {
		return fmt.Errorf("keep the claims filter: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keep the claims filter: %w", err)
	}
	s.kept(logSeq)
	s.log.Info("claims filter kept for the next start", "keys", f.keys.Load(), "bytes", f.bytes(), "seconds", time.Since(start).Seconds())
	return nil
}

// decodeFilter checks a kept filter's row and rebuilds it.
func decodeFilter(hash string, size, keys int64, raw []byte) (*claimFilter, error) {
	if hash != filterHash {
		return nil, fmt.Errorf("its keys are hashed with %q, this build's with %q", hash, filterHash)
	}
	if size < filterMinKeys || keys < 0 || int64(len(raw)) != filterBlocks(size)*32 {
		return nil, fmt.Errorf("%d bytes for %d keys (sized for %d)", len(raw), keys, size)
	}
	f := newClaimFilter(size)
	for i := range f.blocks {
		w, b := raw[i*32:i*32+32], &f.blocks[i]
		for j := range b {
			b[j] = binary.LittleEndian.Uint32(w[j*4:]) // not shared yet
		}
	}
	f.keys.Store(keys)
	return f, nil
}

// addIndexKeys adds every key of the log's in-memory index to f. The
// writer is the index's only mutator: no lock to read it. The first call
// after the build, with nothing added since, takes the hashes the build
// kept (a walk of 1.1 M keys, each hashed again, held serve's start or its
// writer's first request some 0.3-0.7 s here); they are dropped then.
func (x *claimIndex) addIndexKeys(f *claimFilter) {
	hashes := x.startHashes
	x.startHashes = nil
	if hashes != nil && x.lastSeq.Load() == x.startSeq && len(x.tx.pending) == 0 {
		for _, h := range hashes {
			f.addHash(h)
		}
		return
	}
	for _, t := range []*claimTree{x.filling, x.frozen} {
		if t != nil {
			t.Ascend(func(it claimItem) bool {
				f.addKey(it.key)
				return true
			})
		}
	}
}
