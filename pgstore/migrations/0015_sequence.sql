-- Hookwarden PostgreSQL schema, version 15: the sequence values of sources
-- with sequence: (SPEC 12, issue 48); SQLite's schema 20.
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
