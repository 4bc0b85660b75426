-- Hookwarden schema 14: the dashboard's last-hour and last-day windows
-- by whole minutes (issue 18).
--
-- A window's whole hours come from hourly; the part of its first hour was
-- counted from rows: up to an hour of the source's traffic per window and
-- load (0.5 µs a claim on PostgreSQL: 102 ms for 200,000 claims in that
-- hour, whatever the history). minutely holds the same counts per UTC
-- minute ("2006-01-02T15:04"), kept by the same kind of triggers, so that
-- part is at most 60 rows. Only inserts count, as in hourly. Retention
-- keeps the last 26 hours of it (the day window's first hour is 24-25
-- hours old), whatever retention.claims says.
CREATE TABLE minutely (
    source     TEXT    NOT NULL,
    minute     TEXT    NOT NULL,
    accepted   INTEGER NOT NULL DEFAULT 0,
    duplicates INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (source, minute)
) STRICT, WITHOUT ROWID;
-- Retention's delete of the old minutes; an entry per new minute row
-- (an upsert of a count leaves it alone).
CREATE INDEX minutely_minute ON minutely (minute);

-- The minutes are one more statement in each counting trigger of schema
-- 12 (a trigger of their own cost the writer 5 µs more a request than
-- this: each trigger runs as a program of its own).
DROP TRIGGER count_event_insert;
CREATE TRIGGER count_event_insert AFTER INSERT ON events BEGIN
    INSERT INTO counters (name, kind, n) VALUES (NEW.source, 'accepted', 1)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
    INSERT INTO hourly (source, hour, accepted, first_ref) VALUES (NEW.source, substr(NEW.claimed_at, 1, 13), 1, NEW.id)
        ON CONFLICT (source, hour) DO UPDATE SET accepted = accepted + 1, first_ref = COALESCE(first_ref, excluded.first_ref);
    INSERT INTO minutely (source, minute, accepted) VALUES (NEW.source, substr(NEW.claimed_at, 1, 16), 1)
        ON CONFLICT (source, minute) DO UPDATE SET accepted = accepted + 1;
END;
DROP TRIGGER count_receipt_insert;
CREATE TRIGGER count_receipt_insert AFTER INSERT ON receipts WHEN NEW.kind IN ('duplicate', 'divergent') BEGIN
    INSERT INTO counters (name, kind, n) VALUES (NEW.source, NEW.kind, 1)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
    INSERT INTO hourly (source, hour, duplicates) VALUES (NEW.source, substr(NEW.received_at, 1, 13), 1)
        ON CONFLICT (source, hour) DO UPDATE SET duplicates = duplicates + 1;
    INSERT INTO minutely (source, minute, duplicates) VALUES (NEW.source, substr(NEW.received_at, 1, 16), 1)
        ON CONFLICT (source, minute) DO UPDATE SET duplicates = duplicates + 1;
END;
DROP TRIGGER count_link_insert;
CREATE TRIGGER count_link_insert AFTER INSERT ON receipt_events WHEN NEW.kind IN ('duplicate', 'divergent') BEGIN
    INSERT INTO counters (name, kind, n) SELECT source, NEW.kind, 1 FROM receipts WHERE id = NEW.receipt_id
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
    INSERT INTO hourly (source, hour, duplicates) SELECT source, substr(received_at, 1, 13), 1 FROM receipts WHERE id = NEW.receipt_id
        ON CONFLICT (source, hour) DO UPDATE SET duplicates = duplicates + 1;
    INSERT INTO minutely (source, minute, duplicates) SELECT source, substr(received_at, 1, 16), 1 FROM receipts WHERE id = NEW.receipt_id
        ON CONFLICT (source, minute) DO UPDATE SET duplicates = duplicates + 1;
END;

-- The minutes of the last 26 hours already in the file (by the wall
-- clock): the claims from the first one of those hours (hourly's
-- first_ref) on, and the receipts on (source, received_at) per source
-- that hourly knows.
INSERT INTO minutely (source, minute, accepted, duplicates)
SELECT source, minute, sum(a), sum(d) FROM (
    SELECT source, substr(claimed_at, 1, 16) AS minute, count(*) AS a, 0 AS d FROM events
        WHERE id >= COALESCE((SELECT min(first_ref) FROM hourly WHERE hour >= strftime('%Y-%m-%dT%H', 'now', '-26 hours')), 1 << 62)
            AND claimed_at >= strftime('%Y-%m-%dT%H:%M', 'now', '-26 hours') GROUP BY 1, 2
    UNION ALL SELECT source, substr(received_at, 1, 16), 0, count(*) FROM receipts
        WHERE source IN (SELECT DISTINCT source FROM hourly) AND received_at >= strftime('%Y-%m-%dT%H:%M', 'now', '-26 hours')
            AND kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    UNION ALL SELECT r.source, substr(r.received_at, 1, 16), 0, count(*) FROM receipts r JOIN receipt_events re ON re.receipt_id = r.id
        WHERE r.source IN (SELECT DISTINCT source FROM hourly) AND r.received_at >= strftime('%Y-%m-%dT%H:%M', 'now', '-26 hours')
            AND re.kind IN ('duplicate', 'divergent') GROUP BY 1, 2)
WHERE true GROUP BY source, minute;
