-- Hookwarden PostgreSQL schema, version 14: the first and last request of
-- each source and UTC hour (issue 18); SQLite's schema 18, plus a shard as
-- in hourly.
--
-- gaps finds silences longer than a source's expect_within between its
-- requests. It jumped along receipts_source_time, two seeks a step and a
-- step an hour with traffic: over the CLI's 30 days at an hour, some 720
-- steps, 20-25 ms of a CLI read at 10 M claims against a fresh store. With
-- expect_within at an hour or more no silence fits inside one clock hour,
-- so the first and last request of each hour are all it needs: a range of
-- this table, a row an hour (per shard not yet folded).
--
-- The receipts' statement trigger keeps it on every insert, every kind (a
-- quarantined request is a request too): one more upsert per statement,
-- source and hour, into the backend's own shard, so instances never wait
-- on each other's row. Only inserts count, as in hourly: a receipt deleted
-- later (retention, a dropped quarantined request) moves pruned_totals'
-- last_received past its time, and gaps reads from there on, where every
-- receipt is still kept. The fold merges the shards of gone backends into
-- shard 0; rows before the claims cutoff go with retention.claims, as
-- hourly's. storecopy does not copy it: the destination's trigger fills it
-- as the receipts are written.
CREATE TABLE request_hours (
    source   text        NOT NULL,
    hour     timestamptz NOT NULL,
    shard    integer     NOT NULL,
    first_at timestamptz NOT NULL,
    last_at  timestamptz NOT NULL,
    PRIMARY KEY (source, hour, shard)
);
CREATE INDEX request_hours_hour ON request_hours (hour);
CREATE INDEX request_hours_shard ON request_hours (shard) WHERE shard <> 0;

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
    INSERT INTO request_hours (source, hour, shard, first_at, last_at)
    SELECT source, date_trunc('hour', received_at, 'UTC'), pg_backend_pid(), min(received_at), max(received_at)
    FROM new_rows GROUP BY 1, 2
    ON CONFLICT (source, hour, shard) DO UPDATE SET first_at = LEAST(request_hours.first_at, excluded.first_at),
        last_at = GREATEST(request_hours.last_at, excluded.last_at);
    RETURN NULL;
END $$;

-- Version 10's fold, with request_hours' shards: those no live backend has
-- are merged into shard 0 (the earliest first, the latest last).
CREATE OR REPLACE FUNCTION hw_fold_counts() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    gone integer[];
BEGIN
    IF NOT pg_try_advisory_xact_lock(7525356009379820910) THEN
        RETURN;
    END IF;
    WITH RECURSIVE c (shard) AS (
        (SELECT shard FROM counters WHERE shard <> 0 ORDER BY shard LIMIT 1)
        UNION ALL
        SELECT (SELECT x.shard FROM counters x WHERE x.shard <> 0 AND x.shard > c.shard ORDER BY x.shard LIMIT 1)
        FROM c WHERE c.shard IS NOT NULL
    ), h (shard) AS (
        (SELECT shard FROM hourly WHERE shard <> 0 ORDER BY shard LIMIT 1)
        UNION ALL
        SELECT (SELECT x.shard FROM hourly x WHERE x.shard <> 0 AND x.shard > h.shard ORDER BY x.shard LIMIT 1)
        FROM h WHERE h.shard IS NOT NULL
    ), r (shard) AS (
        (SELECT shard FROM request_hours WHERE shard <> 0 ORDER BY shard LIMIT 1)
        UNION ALL
        SELECT (SELECT x.shard FROM request_hours x WHERE x.shard <> 0 AND x.shard > r.shard ORDER BY x.shard LIMIT 1)
        FROM r WHERE r.shard IS NOT NULL
    )
    SELECT array_agg(u.shard) INTO gone FROM (SELECT shard FROM c UNION SELECT shard FROM h UNION SELECT shard FROM r) u
    WHERE u.shard IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = u.shard);
    IF gone IS NULL THEN
        RETURN;
    END IF;
    WITH g AS (
        DELETE FROM counters c WHERE c.shard <> 0 AND c.shard = ANY (gone)
        RETURNING name, kind, n
    )
    INSERT INTO counters (name, kind, shard, n) SELECT name, kind, 0, sum(n) FROM g GROUP BY name, kind
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    -- Only a fold writes shard 0.
    DELETE FROM counters WHERE shard = 0 AND n = 0;
    WITH g AS (
        DELETE FROM hourly h WHERE h.shard <> 0 AND h.shard = ANY (gone)
        RETURNING source, hour, accepted, duplicates, first_ref
    )
    INSERT INTO hourly (source, hour, shard, accepted, duplicates, first_ref)
    SELECT source, hour, 0, sum(accepted), sum(duplicates), min(first_ref) FROM g GROUP BY source, hour
    ON CONFLICT (source, hour, shard) DO UPDATE SET accepted = hourly.accepted + excluded.accepted,
        duplicates = hourly.duplicates + excluded.duplicates, first_ref = LEAST(hourly.first_ref, excluded.first_ref);
    WITH g AS (
        DELETE FROM request_hours r WHERE r.shard <> 0 AND r.shard = ANY (gone)
        RETURNING source, hour, first_at, last_at
    )
    INSERT INTO request_hours (source, hour, shard, first_at, last_at)
    SELECT source, hour, 0, min(first_at), max(last_at) FROM g GROUP BY source, hour
    ON CONFLICT (source, hour, shard) DO UPDATE SET first_at = LEAST(request_hours.first_at, excluded.first_at),
        last_at = GREATEST(request_hours.last_at, excluded.last_at);
END $$;

-- The receipts already in the store, in shard 0: one read of
-- receipts_source_time.
INSERT INTO request_hours (source, hour, shard, first_at, last_at)
SELECT source, date_trunc('hour', received_at, 'UTC'), 0, min(received_at), max(received_at) FROM receipts
GROUP BY 1, 2;
