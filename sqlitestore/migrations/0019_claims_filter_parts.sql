-- Hookwarden schema 19: serve keeps its claims filter in the file while it
-- runs, not only at a clean stop (issue 18).
--
-- With schema 17 a crash left no filter, and the next start built one from
-- claims beside the traffic that a restart after an outage meets: at 10 M
-- claims 18-21 s of half a core, and a p99 of 33-44 ms for the first 10 s
-- after a kill -9 against 18-22 ms warm. Now the writer writes the filter
-- in its idle steps, in parts of 256 KiB, into one of two slots while the
-- other keeps the last complete one; the last part completes the slot's
-- header and retires the other's.
--
-- A header holds every key of claims_log up to log_seq (the writer's, when
-- it wrote the first part: a key's bits are all in one part and bits are
-- only ever set), and every key claims held then. The fold moves into
-- claims only keys of the generation it folds (claim_fold.gen_max, seq up
-- to it): a header with log_seq >= gen_max still holds all of claims after
-- such an insert. Any other insert into claims, or a generation past a
-- header's log_seq, deletes that header (claims_filter_stale). The writer
-- keeps a filter before it folds a generation past the kept one, so a
-- crash finds one to trust unless it came before the first was complete.
-- A future migration that inserts into claims must delete claims_filter
-- itself when a generation is being folded (gen_max > 0).
--
-- parts -1: being written, never trusted; 0: the bits inline in bits, as
-- schemas 17 and 18 kept them (carried over with log_seq 0: the first fold
-- insert deletes it); n: in claims_filter_parts (slot, 0..n-1).
CREATE TABLE claims_filter_slots (
    slot    INTEGER PRIMARY KEY CHECK (slot IN (0, 1)),
    hash    TEXT    NOT NULL, -- how a key is hashed: 'xxh64' of source, NUL, event id
    size    INTEGER NOT NULL, -- keys it was sized for (10 bits a key)
    keys    INTEGER NOT NULL, -- keys added
    log_seq INTEGER NOT NULL, -- it holds every key of claims_log up to this seq
    parts   INTEGER NOT NULL,
    bits    BLOB    NOT NULL  -- with parts 0: its 32-byte blocks, words little-endian
) STRICT;
INSERT INTO claims_filter_slots (slot, hash, size, keys, log_seq, parts, bits)
    SELECT 0, hash, size, keys, 0, 0, bits FROM claims_filter;
DROP TRIGGER claims_filter_stale;
DROP TABLE claims_filter;
ALTER TABLE claims_filter_slots RENAME TO claims_filter;
CREATE TABLE claims_filter_parts (
    slot INTEGER NOT NULL,
    part INTEGER NOT NULL,
    bits BLOB    NOT NULL, -- the slot's bytes from part * 256 KiB on
    PRIMARY KEY (slot, part)
) STRICT;
CREATE TRIGGER claims_filter_stale AFTER INSERT ON claims
WHEN EXISTS (SELECT 1 FROM claims_filter
    WHERE coalesce((SELECT gen_max FROM claim_fold), 0) = 0 OR log_seq < (SELECT gen_max FROM claim_fold))
BEGIN
    DELETE FROM claims_filter
    WHERE coalesce((SELECT gen_max FROM claim_fold), 0) = 0 OR log_seq < (SELECT gen_max FROM claim_fold);
END;
