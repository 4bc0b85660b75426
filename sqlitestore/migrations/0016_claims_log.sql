-- Hookwarden schema 16: the recent level of the dedup memory in arrival
-- order (issue 18).
--
-- In schema 15 a new claim with an id in no order (a UUID) still dirtied a
-- random leaf of claims_recent, some 10,000 of them at 10 M claims, and
-- every checkpoint wrote those leaves back far apart: 0.73-0.81 of a fresh
-- store's acks/s on disk. Now the recent claims are a log appended in the
-- order they arrive, so a claim writes the log's last leaf:
--
-- claims_log  the newest claims, by sequence number. It has no index by
--             key: the store's process looks a key up in memory (an
--             ordered index it reads from this table and keeps up to date
--             by sequence number, claimindex.go). AUTOINCREMENT, because
--             a sequence number must never come back after retention
--             deletes the newest claim: processes read new rows by it.
-- claims      all the others, folded in by serve a generation at a time:
--             every row up to claim_fold.gen_max, in key order, 512 claims
--             a transaction, then the generation leaves the log by
--             sequence number. Until then its folded claims are in both
--             tables with the same event_ref.
-- claim_fold  the generation being folded (gen_max, 0 when none) and the
--             last key folded, so a restart resumes where the fold stopped.
CREATE TABLE claims_log (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    source    TEXT    NOT NULL,
    event_id  TEXT    NOT NULL,
    event_ref INTEGER NOT NULL -- events.id
) STRICT;
-- Retention's delete trigger finds a claim by its event; event_ref grows
-- with seq, so this index too is written at its end.
CREATE INDEX claims_log_ref ON claims_log (event_ref);
CREATE TABLE claim_fold (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    gen_max  INTEGER NOT NULL, -- claims_log.seq; 0: no generation is being folded
    source   TEXT    NOT NULL, -- the last key folded ('' before the first)
    event_id TEXT    NOT NULL
) STRICT;
INSERT INTO claim_fold (id, gen_max, source, event_id) VALUES (1, 0, '', '');

INSERT INTO claims_log (source, event_id, event_ref) SELECT source, event_id, event_ref FROM claims_recent ORDER BY event_ref;
DROP VIEW claim_refs;
DROP TABLE claims_recent;
-- claim_refs: both levels, for reading from SQL (forensics on a copy). A
-- look-up by key scans the log.
CREATE VIEW claim_refs AS
    SELECT source, event_id, event_ref FROM claims_log
    UNION ALL SELECT source, event_id, event_ref FROM claims;

DROP TRIGGER count_event_insert;
CREATE TRIGGER count_event_insert AFTER INSERT ON events BEGIN
    INSERT INTO claims_log (source, event_id, event_ref) VALUES (NEW.source, NEW.event_id, NEW.id);
    UPDATE claim_levels SET recent = recent + 1;
    INSERT INTO counters (name, kind, n) VALUES (NEW.source, 'accepted', 1)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
    INSERT INTO hourly (source, hour, accepted, first_ref) VALUES (NEW.source, substr(NEW.claimed_at, 1, 13), 1, NEW.id)
        ON CONFLICT (source, hour) DO UPDATE SET accepted = accepted + 1, first_ref = COALESCE(first_ref, excluded.first_ref);
    INSERT INTO minutely (source, minute, accepted) VALUES (NEW.source, substr(NEW.claimed_at, 1, 16), 1)
        ON CONFLICT (source, minute) DO UPDATE SET accepted = accepted + 1;
END;
DROP TRIGGER count_event_delete;
CREATE TRIGGER count_event_delete AFTER DELETE ON events BEGIN
    UPDATE counters SET n = n - 1 WHERE name = OLD.source AND kind = 'accepted';
    DELETE FROM claims_log WHERE event_ref = OLD.id;
    UPDATE claim_levels SET recent = recent - changes();
    DELETE FROM claims WHERE source = OLD.source AND event_id = OLD.event_id AND event_ref = OLD.id;
END;
