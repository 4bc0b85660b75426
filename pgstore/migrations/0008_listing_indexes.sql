-- Hookwarden PostgreSQL schema, version 8: the listings' indexes in the shape
-- SQLite's give for free (issue 18). SQLite's index on (source, event_type)
-- ends in the rowid, the event's id, so a (source, type) pair reads in id
-- order; a PostgreSQL btree does not, so the id is spelled out and a page of
-- one pair is a backward range of this index, not a sort of the pair.
DROP INDEX events_source_type;
CREATE INDEX events_source_type ON events (source, event_type, id);

-- --since (where the window's first hour begins: min(first_ref) of the
-- hours from it on) and the claims tier of a prune pass (the hours before
-- its cutoff) seek hourly by hour across sources.
CREATE INDEX hourly_hour ON hourly (hour);
