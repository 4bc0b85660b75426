package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// The warm-up reads the pages of the dedup memory's large level (claims,
// schema 16), and only those: a test checks the plans. The log, the recent
// level, is read whole into memory when serve opens the store
// (claimindex.go), and counted here from claim_levels. warmClaimsSQL reads
// all of claims, warmSourceSQL one source's part.
const (
	warmClaimsSQL     = `SELECT (SELECT recent FROM claim_levels) + (SELECT count(*) FROM claims WHERE source >= '')`
	warmLogSQL        = `SELECT recent FROM claim_levels`
	warmSourceSQL     = `SELECT count(*) FROM claims WHERE source = ?1`
	warmNextSourceSQL = `SELECT s FROM (SELECT min(source) AS s FROM claims WHERE source > ?1) WHERE s IS NOT NULL`
	warmNewestSQL     = `SELECT source, event_id FROM events WHERE id > (SELECT max(id) FROM events) - ? ORDER BY id`
)

// The newest warmSample claims tell, per source, whether new ids land in
// order: the source has at least warmMinClaims of them, and nine in ten of
// its newest third sort after every id of its oldest third. Concurrent
// deliveries commit a little out of order, so consecutive claims are not
// compared, and the middle third keeps the stragglers of the oldest apart
// from the newest; an id in no order sorts after a third's every id with a
// chance of one in the third's size.
const (
	warmSample    = 1024
	warmMinClaims = 32
)

// WarmUpNeeded says whether serve should read the claim index at start
// (WarmClaims), and if not, why. Not when Open read the claims filter the
// file kept (at a clean stop, or by the writer while it was idle): a new
// id, "in neither" for all but about 1 % of them, reads no page of the
// index, and reading it beside the first seconds' traffic only cost them
// (on the 10 M-claim file evicted from the page cache, a p99 for the first
// 10 s of 1.33-1.39 × warm with the read, 0.99 and 1.14 × without). With
// none kept (the first start; a crash before the first was complete) the
// filter is built beside the traffic and, until it is, each new id is
// looked up in the index: the warm-up then runs as before.
func (s *Store) WarmUpNeeded() (bool, string) {
	if s.filterKept {
		return false, "the claims filter kept in the file answers for new ids"
	}
	return true, ""
}

// WarmClaims reads the claim index, so that its pages are in the page
// cache, and returns the claims it read. A new claim whose id is random (a
// UUID, as GitHub's and Shopify's are) lands on a random page of that
// index: after a reboot, every such claim was a read from the disk until
// the index was cached (a 10 M-claim file with the file out of the cache:
// 543 acks/s and a p99 of 1.2 s for the first 10 s, against 6,500/s and 19
// ms cached). Reading the index in key order takes seconds (at 10 M claims:
// 4.5-6.7 s cold and 0.4 s cached, 11.5 s cold under load for one built
// from ids in no order) and runs beside the traffic, on a read connection;
// while it reads, a checkpoint cannot pass its snapshot.
//
// A source whose ids arrive in order (ULIDs, KSUIDs: they lead with their
// time) claims on the last pages of its part of the index only, and
// reading the rest competes with the commits for the disk for nothing (the
// 10 M file with ids in order, evicted: p99 of the first 10 s 15.7-16.5 ms
// with the whole index read against 9.2 without, 9.0 warm). Such sources
// are told from their newest claims and skipped; a store where none is in
// order reads the whole index in one statement, as before.
func (s *Store) WarmClaims(ctx context.Context) (int64, error) {
	ordered, err := s.orderedSources(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the newest claims: %w", err)
	}
	var n int64
	if len(ordered) == 0 {
		if err := s.rdb.QueryRowContext(ctx, warmClaimsSQL).Scan(&n); err != nil {
			return 0, fmt.Errorf("read the claim index: %w", err)
		}
		return n, nil
	}
	s.log.Info("claim index: sources whose new ids come in order are not read", "sources", slices.Sorted(maps.Keys(ordered)))
	if err := s.rdb.QueryRowContext(ctx, warmLogSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the claim index: %w", err)
	}
	source := ""
	for {
		err := s.rdb.QueryRowContext(ctx, warmNextSourceSQL, source).Scan(&source)
		if errors.Is(err, sql.ErrNoRows) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read the claim index: %w", err)
		}
		if ordered[source] {
			continue
		}
		var c int64
		if err := s.rdb.QueryRowContext(ctx, warmSourceSQL, source).Scan(&c); err != nil {
			return n, fmt.Errorf("read the claim index of source %s: %w", source, err)
		}
		n += c
	}
}

// orderedSources is the sources whose newest claims came with ids in
// order (warmSample, warmMinClaims).
func (s *Store) orderedSources(ctx context.Context) (map[string]bool, error) {
	by := map[string][]string{}
	err := eachRow(ctx, s.rdb, warmNewestSQL, func(rows *sql.Rows) error {
		var source, id string
		if err := rows.Scan(&source, &id); err != nil {
			return err
		}
		by[source] = append(by[source], id)
		return nil
	}, warmSample)
	if err != nil {
		return nil, err
	}
	ordered := map[string]bool{}
	for source, ids := range by {
		if len(ids) < warmMinClaims {
			continue
		}
		third := len(ids) / 3
		older, newer := ids[:third], ids[len(ids)-third:]
		top := slices.Max(older)
		after := 0
		for _, id := range newer {
			if id > top {
				after++
			}
		}
		if 10*after >= 9*len(newer) {
			ordered[source] = true
		}
	}
	return ordered, nil
}
