-- Hookwarden schema 17: serve's claims filter kept across a clean stop
-- (issue 18).
--
-- serve's writer keeps a Bloom filter over the keys of both levels of the
-- dedup memory (filter.go). Built from claims it takes 18-20 s at 10 M
-- claims, and the first seconds after a start, when providers' retries
-- arrive at once, acknowledged a quarter fewer requests beside the build.
-- Now serve writes the filter here when it stops cleanly and takes it (reads
-- and deletes the row) when it starts, so a crash leaves no row and the
-- next start builds.
--
-- The row holds every key claims held when it was written; serve adds the
-- log's keys (claims_log, which it reads into memory at every start) when
-- it takes it. A key entering claims by any other way than serve's fold
-- (FillHistory, a migration, a hand-made insert) would be missing from it,
-- so every insert into claims deletes the row. While serve runs there is
-- no row, and the trigger deletes nothing.
CREATE TABLE claims_filter (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    hash  TEXT    NOT NULL, -- how a key is hashed: 'xxh64' of source, NUL, event id
    size  INTEGER NOT NULL, -- keys it was sized for (10 bits a key)
    keys  INTEGER NOT NULL, -- keys added
    bits  BLOB    NOT NULL  -- its 32-byte blocks, words little-endian
) STRICT;
CREATE TRIGGER claims_filter_stale AFTER INSERT ON claims BEGIN
    DELETE FROM claims_filter;
END;
