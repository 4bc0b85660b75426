-- Hookwarden PostgreSQL schema, version 13: the dashboard's last-hour and
-- last-day windows by whole minutes (issue 18); SQLite's schema 14, plus a
-- shard as in hourly.
--
-- A window's whole hours come from hourly; the part of its first hour was
-- counted from rows: 102 ms for 200,000 claims in that hour, a cost that
-- followed the source's traffic. minutely holds the same counts per UTC
-- minute, kept by the statement triggers that keep hourly (one upsert per
-- statement, source and minute), so that part is at most 60 minutes of
-- shard rows. Only inserts count, as in hourly. Retention keeps the last
-- 26 hours of it; its shards are not folded (they go with their minute).
CREATE TABLE minutely (
    source     text        NOT NULL,
    minute     timestamptz NOT NULL,
    shard      integer     NOT NULL,
    accepted   bigint      NOT NULL DEFAULT 0,
    duplicates bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (source, minute, shard)
);
CREATE INDEX minutely_minute ON minutely (minute);

-- The minutes are one more statement in each counting function of
-- versions 7 and 9 (triggers of their own cost 7 % of Record's throughput:
-- each trigger is a function call and a read of the transition table).
CREATE OR REPLACE FUNCTION hw_count_events_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT source, 'accepted', pg_backend_pid(), count(*) FROM new_rows GROUP BY source
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    INSERT INTO hourly (source, hour, shard, accepted, duplicates, first_ref)
    SELECT source, date_trunc('hour', claimed_at, 'UTC'), pg_backend_pid(), count(*), 0, min(id) FROM new_rows GROUP BY 1, 2
    ON CONFLICT (source, hour, shard) DO UPDATE SET accepted = hourly.accepted + excluded.accepted,
        first_ref = LEAST(hourly.first_ref, excluded.first_ref);
    INSERT INTO minutely (source, minute, shard, accepted)
    SELECT source, date_trunc('minute', claimed_at, 'UTC'), pg_backend_pid(), count(*) FROM new_rows GROUP BY 1, 2
    ON CONFLICT (source, minute, shard) DO UPDATE SET accepted = minutely.accepted + excluded.accepted;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION hw_count_receipts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT source, kind, pg_backend_pid(), count(*) FROM new_rows WHERE kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    INSERT INTO hourly (source, hour, shard, duplicates)
    SELECT source, date_trunc('hour', received_at, 'UTC'), pg_backend_pid(), count(*)
    FROM new_rows WHERE kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (source, hour, shard) DO UPDATE SET duplicates = hourly.duplicates + excluded.duplicates;
    INSERT INTO minutely (source, minute, shard, duplicates)
    SELECT source, date_trunc('minute', received_at, 'UTC'), pg_backend_pid(), count(*)
    FROM new_rows WHERE kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (source, minute, shard) DO UPDATE SET duplicates = minutely.duplicates + excluded.duplicates;
    RETURN NULL;
END $$;

-- A batch's repeats are its links; the receipt names the source and time.
CREATE OR REPLACE FUNCTION hw_count_links_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT r.source, l.kind, pg_backend_pid(), count(*) FROM new_rows l JOIN receipts r ON r.id = l.receipt_id
    WHERE l.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    INSERT INTO hourly (source, hour, shard, duplicates)
    SELECT r.source, date_trunc('hour', r.received_at, 'UTC'), pg_backend_pid(), count(*)
    FROM new_rows l JOIN receipts r ON r.id = l.receipt_id WHERE l.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (source, hour, shard) DO UPDATE SET duplicates = hourly.duplicates + excluded.duplicates;
    INSERT INTO minutely (source, minute, shard, duplicates)
    SELECT r.source, date_trunc('minute', r.received_at, 'UTC'), pg_backend_pid(), count(*)
    FROM new_rows l JOIN receipts r ON r.id = l.receipt_id WHERE l.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (source, minute, shard) DO UPDATE SET duplicates = minutely.duplicates + excluded.duplicates;
    RETURN NULL;
END $$;

-- The minutes of the last 26 hours already in the store, in shard 0: the
-- claims from the first one of those hours (hourly's first_ref) on, the
-- receipts on (source, received_at) per source that hourly knows.
INSERT INTO minutely (source, minute, shard, accepted, duplicates)
SELECT source, minute, 0, sum(a), sum(d) FROM (
    SELECT source, date_trunc('minute', claimed_at, 'UTC') AS minute, count(*) AS a, 0 AS d FROM events
        WHERE id >= COALESCE((SELECT min(first_ref) FROM hourly WHERE hour >= date_trunc('hour', now() - interval '26 hours', 'UTC')),
                9223372036854775807)
            AND claimed_at >= now() - interval '26 hours' GROUP BY 1, 2
    UNION ALL SELECT source, date_trunc('minute', received_at, 'UTC'), 0, count(*) FROM receipts
        WHERE source IN (SELECT DISTINCT source FROM hourly) AND received_at >= now() - interval '26 hours'
            AND kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    UNION ALL SELECT r.source, date_trunc('minute', r.received_at, 'UTC'), 0, count(*) FROM receipts r
        JOIN receipt_events re ON re.receipt_id = r.id
        WHERE r.source IN (SELECT DISTINCT source FROM hourly) AND r.received_at >= now() - interval '26 hours'
            AND re.kind IN ('duplicate', 'divergent') GROUP BY 1, 2) c
GROUP BY source, minute;
