-- Hookwarden schema, version 9: flow control per destination (issue 17).
--
-- destination_flow: one row per destination that was ever paused, failed,
-- rate-limited or probed; no row is the same as a row of defaults. Shared
-- by every process on the file (serve, and the pause/resume commands), so
-- a pause survives restarts and reloads.
CREATE TABLE destination_flow (
    destination   TEXT    PRIMARY KEY,           -- "source/name"
    pause         TEXT    CHECK (pause IN ('auto', 'manual')), -- NULL: not paused
    paused_at     TEXT,
    failures      INTEGER NOT NULL DEFAULT 0,    -- consecutive retryable failures
    next_probe_at TEXT,                          -- auto pause: no probe before this
    tokens        REAL,                          -- rate: tokens in the bucket at tokens_at
    tokens_at     TEXT
) STRICT, WITHOUT ROWID;

-- order_key: the event's order_by key at this destination (NULL: not
-- ordered). Of a key's pending jobs one is its head, the others wait with
-- next_at '9999-12-31T00:00:00.000000Z' until the head is delivered or
-- dead, when the oldest waiting one becomes due.
ALTER TABLE jobs ADD COLUMN order_key TEXT;
CREATE INDEX jobs_order ON jobs (destination, order_key, id) WHERE state = 'pending' AND order_key IS NOT NULL;
