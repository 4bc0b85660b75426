-- Hookwarden schema 19: serve keeps its claims filter in the file while it
-- runs, not only at a clean stop (issue 18).
--
-- With schema 17 a crash left no filter, and the next start built one from
-- claims beside the traffic that a restart after an outage meets: at 10 M
-- claims 18-21 s of half a core, and a p99 of 33-44 ms for the first 10 s
-- after a kill -9 against 18-22 ms warm. Now the writer writes the filter
-- in parts of 256 KiB, one in each of its idle steps, whenever no
-- generation is being folded, and the header row (claims_filter) last:
-- a header names a complete filter. It holds every key claims held when its
-- first part was written (a key's bits are all in one part, and bits are
-- only ever set); a key entering claims since then deletes the header
-- (claims_filter_stale, unchanged), and the writer starts again once the
-- generation is folded. So a crash leaves a filter the next start can
-- trust, unless it came while a generation was being folded.
--
-- parts = 0 is a header with its bits inline, as schema 17 wrote them.
ALTER TABLE claims_filter ADD COLUMN parts INTEGER NOT NULL DEFAULT 0;
CREATE TABLE claims_filter_parts (
    part INTEGER PRIMARY KEY,
    bits BLOB    NOT NULL -- the filter's bytes from part * 256 KiB on
) STRICT;
