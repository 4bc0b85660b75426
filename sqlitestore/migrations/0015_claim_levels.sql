-- Hookwarden schema 15: the dedup memory in two levels (issue 18).
-- hookwarden: foreign_keys off
--
-- Until now the claim was events' UNIQUE (source, event_id). With event
-- ids in no order (UUIDs) every new claim dirtied a random leaf of that
-- index; on a store of millions of claims the leaves lie all over the
-- file, and every checkpoint wrote ~300 of them back far apart (the
-- history phase of make bench: 0.71-0.79 of a fresh store's acks/s at 10 M
-- claims, against 0.92-1.03 with ids in order). Now:
--
-- claims_recent  the newest claims. Small, so its leaves stay cached and a
--                checkpoint writes each of them once for many claims.
-- claims         all the others, folded in by the writer in key order, a
--                short range at a time: a range's claims land together on
--                the leaves that cover it.
-- claim_refs     both, for reading: a claim is in exactly one of them.
--
-- A claim is taken only by the store's single writer, which looks in both
-- levels and inserts the events row in one statement; the insert trigger
-- adds the claim to claims_recent, the delete trigger (retention) forgets
-- it from whichever level holds it. events keeps source and event_id, and
-- loses the unique constraint: SQLite can drop one only by rebuilding the
-- table, which this migration does (59 s for 10 M claims measured; it needs
-- as much free disk as the events table takes, and the freed pages stay
-- in the file until `hookwarden backup` compacts a copy).
CREATE TABLE claims_recent (
    source    TEXT    NOT NULL,
    event_id  TEXT    NOT NULL,
    event_ref INTEGER NOT NULL, -- events.id
    PRIMARY KEY (source, event_id)
) STRICT, WITHOUT ROWID;
CREATE TABLE claims (
    source    TEXT    NOT NULL,
    event_id  TEXT    NOT NULL,
    event_ref INTEGER NOT NULL,
    PRIMARY KEY (source, event_id)
) STRICT, WITHOUT ROWID;
CREATE VIEW claim_refs AS
    SELECT source, event_id, event_ref FROM claims_recent
    UNION ALL SELECT source, event_id, event_ref FROM claims;
-- recent: the rows of claims_recent, kept by the triggers and the fold, so
-- the writer knows when to fold without counting.
CREATE TABLE claim_levels (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    recent INTEGER NOT NULL
) STRICT;
INSERT INTO claim_levels (id, recent) VALUES (1, 0);

-- The existing claims are all folded: read in key order from the unique
-- index, they fill the leaves one after the other.
INSERT INTO claims (source, event_id, event_ref) SELECT source, event_id, id FROM events ORDER BY source, event_id;

CREATE TABLE events_new (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    event_id    TEXT NOT NULL, -- the claim is in claims_recent or claims
    event_type  TEXT NOT NULL,
    claimed_at  TEXT NOT NULL,
    body_sha256 BLOB NOT NULL, -- hash of the first copy's bytes, to flag divergent duplicates
    body        BLOB,          -- the event's own bytes when it came in a batch (SendGrid); else NULL
    retired_pruned_at INTEGER, -- schema 8 replaced these three with the text columns below
    receipts    INTEGER,
    jobs        INTEGER,
    attempts    INTEGER,
    retired_last_received_at INTEGER,
    retired_delivered_at INTEGER,
    pruned_at        TEXT,     -- when the payload tier folded it
    last_received_at TEXT,     -- its last receipt
    delivered_at     TEXT      -- its last job's delivery
) STRICT;
INSERT INTO events_new SELECT * FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_source_type ON events (source, event_type);

-- The triggers went with the old table. The claim is one more statement in
-- the counting trigger (a trigger of its own costs a program per row).
CREATE TRIGGER count_event_insert AFTER INSERT ON events BEGIN
    INSERT INTO claims_recent (source, event_id, event_ref) VALUES (NEW.source, NEW.event_id, NEW.id);
    UPDATE claim_levels SET recent = recent + 1;
    INSERT INTO counters (name, kind, n) VALUES (NEW.source, 'accepted', 1)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
    INSERT INTO hourly (source, hour, accepted, first_ref) VALUES (NEW.source, substr(NEW.claimed_at, 1, 13), 1, NEW.id)
        ON CONFLICT (source, hour) DO UPDATE SET accepted = accepted + 1, first_ref = COALESCE(first_ref, excluded.first_ref);
    INSERT INTO minutely (source, minute, accepted) VALUES (NEW.source, substr(NEW.claimed_at, 1, 16), 1)
        ON CONFLICT (source, minute) DO UPDATE SET accepted = accepted + 1;
END;
-- changes() in a trigger counts the trigger's own last statement.
CREATE TRIGGER count_event_delete AFTER DELETE ON events BEGIN
    UPDATE counters SET n = n - 1 WHERE name = OLD.source AND kind = 'accepted';
    DELETE FROM claims_recent WHERE source = OLD.source AND event_id = OLD.event_id AND event_ref = OLD.id;
    UPDATE claim_levels SET recent = recent - changes();
    DELETE FROM claims WHERE source = OLD.source AND event_id = OLD.event_id AND event_ref = OLD.id;
END;
