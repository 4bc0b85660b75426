-- Hookwarden schema, version 5: database size (issue 8).
--
-- 1. Two indexes leave the insert path. Every new event and receipt paid for
--    them (one more b-tree insert each, on the single writer), and only
--    retention and a few operator reads used them. Those now walk events and
--    receipts in rowid order: one writer assigns the ids in commit order, so
--    id order is receive order to within one writer batch (milliseconds).
DROP INDEX IF EXISTS events_claimed;
DROP INDEX IF EXISTS receipts_unpruned;

-- 2. The payload tier of retention folds a finished event into its claim:
--    its receipts (bodies and headers), batch links, jobs and attempts are
--    deleted, and what an operator still wants to know stays on the events
--    row, as integers (Unix seconds). NULL on every event not pruned so far.
--    A pruned event also has body_sha256 = x'' (unknown) and body NULL.
ALTER TABLE events ADD COLUMN pruned_at INTEGER;        -- when the payload tier folded it
ALTER TABLE events ADD COLUMN receipts INTEGER;         -- requests that carried it (1 + duplicates)
ALTER TABLE events ADD COLUMN jobs INTEGER;             -- destinations it was delivered to
ALTER TABLE events ADD COLUMN attempts INTEGER;         -- delivery attempts over all its jobs
ALTER TABLE events ADD COLUMN last_received_at INTEGER; -- its last receipt
ALTER TABLE events ADD COLUMN delivered_at INTEGER;     -- its last job's delivery

-- 3. Where the pruning walks stand: the highest events.id (and receipts.id)
--    already looked at. Each pass starts there, so its cost follows the
--    work left, not the history.
CREATE TABLE prune_cursor (
    name TEXT    PRIMARY KEY, -- 'events' | 'receipts'
    id   INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO prune_cursor (name, id) VALUES ('events', 0), ('receipts', 0);

-- Events the walk passed but could not prune yet (a job dead, pending or
-- delivered after the cutoff, or a receipt newer than it): looked at again
-- on every pass until they are pruned or deleted. Holds the unfinished
-- backlog, not the history.
CREATE TABLE prune_held (
    event_ref INTEGER PRIMARY KEY REFERENCES events (id)
) STRICT;

-- 4. What retention removed, so that counts survive it (stats, /api/stats,
--    the dashboard). name is a source for the kinds accepted (claims deleted
--    by retention.claims), duplicate, divergent, last_received and
--    last_accepted (the last two: Unix seconds, a maximum, not a count), and
--    a destination ("source/name") for the kind delivered.
CREATE TABLE pruned_totals (
    name TEXT    NOT NULL,
    kind TEXT    NOT NULL,
    n    INTEGER NOT NULL,
    PRIMARY KEY (name, kind)
) STRICT, WITHOUT ROWID;
