-- Hookwarden PostgreSQL schema, version 17: the sequence values of sources
-- with sequence: (SPEC 12, issue 48); SQLite's schema 22.
--
-- Values are kept as ranges of consecutive values received, merged in the
-- receipt's transaction under a transaction advisory lock per source, so
-- two instances' receipts of one source are merged one after the other and
-- the ranges are those of every committed value, whatever the order: a
-- hole (the space between two ranges of an epoch) is one only if no
-- committed receipt holds its values. Listing holes reads a row per hole
-- and per epoch, never the history.
CREATE TABLE seq_epochs (
    source     text        NOT NULL,
    epoch      bigint      NOT NULL,
    lo         bigint      NOT NULL,
    hi         bigint      NOT NULL,
    started_at timestamptz NOT NULL,
    PRIMARY KEY (source, epoch)
);
CREATE TABLE seq_ranges (
    source text        NOT NULL,
    epoch  bigint      NOT NULL,
    lo     bigint      NOT NULL,
    hi     bigint      NOT NULL,
    lo_at  timestamptz NOT NULL, -- when the value lo was received
    hi_at  timestamptz NOT NULL, -- when the value hi was received
    PRIMARY KEY (source, epoch, lo)
);
-- Late arrivals: the events that arrived at least hookwarden.LateMin after
-- their own time (event_time), received live (not by a backfill). Live
-- traffic writes nothing here; after an outage the platform's retries do,
-- and gaps counts those timed inside the window with a range of
-- late_events_time.
CREATE TABLE late_events (
    source      text             NOT NULL,
    event_at    timestamptz      NOT NULL,
    received_at timestamptz      NOT NULL,
    lag         double precision NOT NULL -- seconds
);
CREATE INDEX late_events_time ON late_events (source, event_at);
