-- Hookwarden's PostgreSQL schema, version 3: flow control per destination
-- (issue 17), as SQLite's version 9.
--
-- destination_flow: one row per destination whose flow state was ever
-- written. A lease locks its destination's row (SELECT ... FOR UPDATE), so
-- concurrency, the rate's bucket and probes hold across every instance.
CREATE TABLE destination_flow (
    destination   text        PRIMARY KEY,          -- "source/name"
    pause         text        CHECK (pause IN ('auto', 'manual')), -- NULL: not paused
    paused_at     timestamptz,
    failures      integer     NOT NULL DEFAULT 0,   -- consecutive retryable failures
    next_probe_at timestamptz,                      -- auto pause: no probe before this
    tokens        double precision,                 -- rate: tokens in the bucket at tokens_at
    tokens_at     timestamptz
);

-- order_key: the event's order_by key at this destination (NULL: not
-- ordered). Of a key's pending jobs one is its head, the others wait with
-- next_at '9999-12-31 00:00:00+00' until the head is delivered or dead.
-- Record and Finish take a transaction advisory lock on (destination, key)
-- so instances agree on the head.
ALTER TABLE jobs ADD COLUMN order_key text;
CREATE INDEX jobs_order ON jobs (destination, order_key, id) WHERE state = 'pending' AND order_key IS NOT NULL;
