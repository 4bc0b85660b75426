-- Hookwarden schema, version 12: counts that follow the work, not the history
-- (issue 18). Additive only.
--
-- The operator's reads (stats, /api/stats, the dashboard, /metrics) used to
-- count rows with GROUP BY over the whole file: seconds at a few million
-- events. Triggers now keep the counts in the same transaction as the rows
-- they count, on every path that writes them (record, finish, replay,
-- quarantine, release, drop, both retention tiers, and any added later), so
-- a read sums a few small rows.

-- 1. counters: how many rows of each kind the file holds now, per source or
--    destination. A pure function of the live rows (inserts add, deletes
--    subtract, a job's state change moves it), so it always equals a full
--    count; what retention removed is in pruned_totals, as before.
--    name is a source for the kinds accepted (events rows), duplicate and
--    divergent (repeat receipts, direct or inside a batch) and quarantined
--    (the sum of quarantine.count); a destination ("source/name") for the
--    kinds pending, delivered and dead (jobs by state).
CREATE TABLE counters (
    name TEXT    NOT NULL,
    kind TEXT    NOT NULL,
    n    INTEGER NOT NULL,
    PRIMARY KEY (name, kind)
) STRICT, WITHOUT ROWID;

-- 2. hourly: per source and UTC hour ("2006-01-02T15"), new events claimed
--    and repeats received, for the dashboard's chart, GET /api/stats'
--    hourly and the dashboard's last-hour and last-day windows. Only
--    inserts count: retention deleting a receipt does not take it off the
--    chart. first_ref is the lowest events.id claimed in that hour, so a
--    listing --since finds where its window begins without a walk. Rows
--    older than the claims cutoff go with retention.claims.
CREATE TABLE hourly (
    source     TEXT    NOT NULL,
    hour       TEXT    NOT NULL,
    accepted   INTEGER NOT NULL DEFAULT 0,
    duplicates INTEGER NOT NULL DEFAULT 0,
    first_ref  INTEGER,
    PRIMARY KEY (source, hour)
) STRICT, WITHOUT ROWID;

-- 3. Event listings by source and type (--source, --type) read this index
--    in id order per (source, type) instead of walking every event.
CREATE INDEX events_source_type ON events (source, event_type);

-- 4. The triggers. Each is one or two statements on a small table whose
--    pages stay cached.
CREATE TRIGGER count_event_insert AFTER INSERT ON events BEGIN
    INSERT INTO counters (name, kind, n) VALUES (NEW.source, 'accepted', 1)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
    INSERT INTO hourly (source, hour, accepted, first_ref) VALUES (NEW.source, substr(NEW.claimed_at, 1, 13), 1, NEW.id)
        ON CONFLICT (source, hour) DO UPDATE SET accepted = accepted + 1, first_ref = COALESCE(first_ref, excluded.first_ref);
END;
CREATE TRIGGER count_event_delete AFTER DELETE ON events BEGIN
    UPDATE counters SET n = n - 1 WHERE name = OLD.source AND kind = 'accepted';
END;

CREATE TRIGGER count_receipt_insert AFTER INSERT ON receipts WHEN NEW.kind IN ('duplicate', 'divergent') BEGIN
    INSERT INTO counters (name, kind, n) VALUES (NEW.source, NEW.kind, 1)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
    INSERT INTO hourly (source, hour, duplicates) VALUES (NEW.source, substr(NEW.received_at, 1, 13), 1)
        ON CONFLICT (source, hour) DO UPDATE SET duplicates = duplicates + 1;
END;
CREATE TRIGGER count_receipt_delete AFTER DELETE ON receipts WHEN OLD.kind IN ('duplicate', 'divergent') BEGIN
    UPDATE counters SET n = n - 1 WHERE name = OLD.source AND kind = OLD.kind;
END;

-- A batch's repeats are its links; the receipt (inserted first, deleted
-- last) names the source and the time.
CREATE TRIGGER count_link_insert AFTER INSERT ON receipt_events WHEN NEW.kind IN ('duplicate', 'divergent') BEGIN
    INSERT INTO counters (name, kind, n) SELECT source, NEW.kind, 1 FROM receipts WHERE id = NEW.receipt_id
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
    INSERT INTO hourly (source, hour, duplicates) SELECT source, substr(received_at, 1, 13), 1 FROM receipts WHERE id = NEW.receipt_id
        ON CONFLICT (source, hour) DO UPDATE SET duplicates = duplicates + 1;
END;
CREATE TRIGGER count_link_delete AFTER DELETE ON receipt_events WHEN OLD.kind IN ('duplicate', 'divergent') BEGIN
    UPDATE counters SET n = n - 1
    WHERE name = (SELECT source FROM receipts WHERE id = OLD.receipt_id) AND kind = OLD.kind;
END;

CREATE TRIGGER count_quarantine_insert AFTER INSERT ON quarantine BEGIN
    INSERT INTO counters (name, kind, n) VALUES (NEW.source, 'quarantined', NEW.count)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + excluded.n;
END;
CREATE TRIGGER count_quarantine_update AFTER UPDATE OF count ON quarantine WHEN NEW.count != OLD.count BEGIN
    UPDATE counters SET n = n + NEW.count - OLD.count WHERE name = NEW.source AND kind = 'quarantined';
END;
CREATE TRIGGER count_quarantine_delete AFTER DELETE ON quarantine BEGIN
    UPDATE counters SET n = n - OLD.count WHERE name = OLD.source AND kind = 'quarantined';
END;

CREATE TRIGGER count_job_insert AFTER INSERT ON jobs BEGIN
    INSERT INTO counters (name, kind, n) VALUES (NEW.destination, NEW.state, 1)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER count_job_state AFTER UPDATE OF state ON jobs WHEN NEW.state != OLD.state BEGIN
    UPDATE counters SET n = n - 1 WHERE name = OLD.destination AND kind = OLD.state;
    INSERT INTO counters (name, kind, n) VALUES (NEW.destination, NEW.state, 1)
        ON CONFLICT (name, kind) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER count_job_delete AFTER DELETE ON jobs BEGIN
    UPDATE counters SET n = n - 1 WHERE name = OLD.destination AND kind = OLD.state;
END;

-- 5. The counts of the rows already in the file: one read of each table,
--    once, at the upgrade (about a second per million rows).
INSERT INTO counters (name, kind, n)
SELECT name, kind, sum(n) FROM (
    SELECT source AS name, 'accepted' AS kind, count(*) AS n FROM events GROUP BY source
    UNION ALL SELECT source, kind, count(*) FROM receipts WHERE kind IN ('duplicate', 'divergent') GROUP BY source, kind
    UNION ALL SELECT r.source, re.kind, count(*) FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
        WHERE re.kind IN ('duplicate', 'divergent') GROUP BY r.source, re.kind
    UNION ALL SELECT source, 'quarantined', sum(count) FROM quarantine GROUP BY source
    UNION ALL SELECT destination, state, count(*) FROM jobs GROUP BY destination, state)
WHERE true GROUP BY name, kind;

INSERT INTO hourly (source, hour, accepted, duplicates, first_ref)
SELECT source, hour, sum(a), sum(d), min(ref) FROM (
    SELECT source, substr(claimed_at, 1, 13) AS hour, count(*) AS a, 0 AS d, min(id) AS ref FROM events GROUP BY 1, 2
    UNION ALL SELECT source, substr(received_at, 1, 13), 0, count(*), NULL FROM receipts
        WHERE kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    UNION ALL SELECT r.source, substr(r.received_at, 1, 13), 0, count(*), NULL FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
        WHERE re.kind IN ('duplicate', 'divergent') GROUP BY 1, 2)
WHERE true GROUP BY source, hour;
