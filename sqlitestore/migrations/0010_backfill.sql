-- Hookwarden schema, version 10: backfill (docs/backfill.md).
-- 1. A receipt recovered from a provider's API by a backfill run is stored
--    like a received one (kind accepted, or duplicate when a live copy got
--    there first) with origin 'backfill'; `events show` names its kind
--    "backfill". NULL: received over HTTP.
ALTER TABLE receipts ADD COLUMN origin TEXT;

-- 2. backfill_runs: every run with its window, so that gaps can say whether
--    a window was recovered, and so that an automatic run of a window
--    happens once. Times are UTC, fixed width, like every time column.
CREATE TABLE backfill_runs (
    id              INTEGER PRIMARY KEY,
    source          TEXT    NOT NULL,
    window_from     TEXT    NOT NULL,
    window_to       TEXT    NOT NULL,
    auto            INTEGER NOT NULL DEFAULT 0, -- 1: serve found the outage and ran it
    origin          TEXT,                       -- cli | api | dashboard (NULL for auto)
    actor           TEXT,
    dry_run         INTEGER NOT NULL DEFAULT 0,
    method          TEXT    NOT NULL,           -- list (Stripe, Paddle) | redeliver (GitHub, Svix)
    started_at      TEXT    NOT NULL,
    touched_at      TEXT    NOT NULL,           -- last progress; a run untouched for 5 minutes is abandoned
    finished_at     TEXT,                       -- NULL while running, or abandoned
    listed          INTEGER,                    -- NULL when the provider does not say (Svix)
    already_claimed INTEGER,
    recovered       INTEGER NOT NULL DEFAULT 0,
    requested       INTEGER NOT NULL DEFAULT 0,
    failed          INTEGER NOT NULL DEFAULT 0,
    beyond_from     TEXT,                       -- the part of the window beyond history, if any
    beyond_to       TEXT,
    error           TEXT    NOT NULL DEFAULT ''
) STRICT;
-- One automatic run per window, whoever tries first.
CREATE UNIQUE INDEX backfill_runs_auto ON backfill_runs (source, window_from, window_to) WHERE auto = 1;
CREATE INDEX backfill_runs_source ON backfill_runs (source, window_to);
