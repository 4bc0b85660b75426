-- Hookwarden schema 22: the sequence values of sources with sequence:
-- (SPEC 12, issue 48), kept as the receipts arrive.
--
-- A source's values are kept as ranges of consecutive values received,
-- merged in the receipt's transaction as values arrive: a hole is the
-- space between two ranges of one epoch, so listing holes reads as many
-- rows as there are holes (plus one an epoch), never the history. A value
-- that fills a hole merges its neighbours and the hole is gone. An epoch
-- starts where the sequence jumps backwards or forwards by more than the
-- source's sequence_reset (Telegram re-randomises update_id after a week
-- without updates); lo and hi are its span, started_at its first receipt.
CREATE TABLE seq_epochs (
    source     TEXT    NOT NULL,
    epoch      INTEGER NOT NULL,
    lo         INTEGER NOT NULL,
    hi         INTEGER NOT NULL,
    started_at TEXT    NOT NULL,
    PRIMARY KEY (source, epoch)
) STRICT, WITHOUT ROWID;
CREATE TABLE seq_ranges (
    source TEXT    NOT NULL,
    epoch  INTEGER NOT NULL,
    lo     INTEGER NOT NULL,
    hi     INTEGER NOT NULL,
    lo_at  TEXT    NOT NULL, -- when the value lo was received
    hi_at  TEXT    NOT NULL, -- when the value hi was received
    PRIMARY KEY (source, epoch, lo)
) STRICT, WITHOUT ROWID;
-- Late arrivals: the events that arrived at least hookwarden.LateMin after
-- their own time (event_time), received live (not by a backfill). Live
-- traffic writes nothing here; after an outage, the platform's retries do,
-- and gaps counts those whose time lies inside the window with a range of
-- late_events_time.
CREATE TABLE late_events (
    source      TEXT NOT NULL,
    event_at    TEXT NOT NULL, -- the event's own time
    received_at TEXT NOT NULL,
    lag         REAL NOT NULL  -- seconds
) STRICT;
CREATE INDEX late_events_time ON late_events (source, event_at);
