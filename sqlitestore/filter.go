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
}

// takeFilter takes the filter a clean stop kept (claims_filter), reading
// and deleting the row in one transaction, so that a crash from here on
// leaves none; nil when there is none or it cannot be read (the writer
// then builds one). Open, before the writer starts, with the log's index
// read: its keys, which the kept filter may lack, are added.
func (s *Store) takeFilter(ctx context.Context) (*claimFilter, error) {
	start := time.Now()
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("take the kept claims filter: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	var hash string
	var size, keys int64
	var raw []byte
	err = tx.QueryRowContext(ctx, `SELECT hash, size, keys, bits FROM claims_filter`).Scan(&hash, &size, &keys, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take the kept claims filter: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM claims_filter`); err != nil {
		return nil, fmt.Errorf("take the kept claims filter: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("take the kept claims filter: %w", err)
	}
	f, err := decodeFilter(hash, size, keys, raw)
	if err != nil {
		s.log.Warn("the kept claims filter is unreadable; building one", "err", err)
		return nil, nil
	}
	s.claims.addIndexKeys(f)
	s.log.Info("claims filter loaded", "keys", f.keys.Load(), "bytes", f.bytes(), "seconds", time.Since(start).Seconds())
	return f, nil
}

// keepFilter writes the installed filter for the next start (Close, after
// the writer stopped). None is kept while the first is still being built,
// nor a full one (the next start builds anew).
func (s *Store) keepFilter(ctx context.Context) error {
	f := s.claims.filters.cur
	if f == nil || f.full() {
		return nil
	}
	start := time.Now()
	raw := make([]byte, 0, f.bytes())
	for i := range f.blocks {
		for j := range f.blocks[i] {
			raw = binary.LittleEndian.AppendUint32(raw, atomic.LoadUint32(&f.blocks[i][j]))
		}
	}
	if _, err := s.wdb.ExecContext(ctx, `INSERT OR REPLACE INTO claims_filter (id, hash, size, keys, bits) VALUES (1, ?, ?, ?, ?)`,
		filterHash, f.size, f.keys.Load(), raw); err != nil {
		return fmt.Errorf("keep the claims filter: %w", err)
	}
	s.log.Info("claims filter kept for the next start", "keys", f.keys.Load(), "bytes", len(raw), "seconds", time.Since(start).Seconds())
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
