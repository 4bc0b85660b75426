-- Hookwarden schema, version 11: what a file is, besides a live database
-- (issue 15). Additive only.
--
-- store_marks: at most one row per kind.
--   export: the file was written by `hookwarden export` for offline
--           forensics; since is set when it holds only what happened after
--           that time (--since: a partial copy). The --db commands read it;
--           serve refuses it.
--   moved:  `hookwarden migrate-store` copied this database into PostgreSQL
--           at target (host, port and database, never a password); serve
--           refuses it, so that two stores never accept the same events.
-- Only SQLite files carry marks: PostgreSQL's schema has no such table.
CREATE TABLE store_marks (
    kind   TEXT PRIMARY KEY CHECK (kind IN ('export', 'moved')),
    at     TEXT NOT NULL, -- when it was marked
    since  TEXT,          -- export --since: the start of what the copy holds
    origin TEXT NOT NULL, -- the store it was copied from (export) or this file (moved)
    target TEXT           -- moved: where the database went
) STRICT, WITHOUT ROWID;

-- runs.instance: the receiver a run belongs to, as on PostgreSQL, so that an
-- export of a PostgreSQL store keeps it. NULL for the appliance's own runs
-- (one instance: this file's).
ALTER TABLE runs ADD COLUMN instance TEXT;
