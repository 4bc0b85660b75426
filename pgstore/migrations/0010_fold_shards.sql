-- Hookwarden PostgreSQL schema, version 10: an idle prune's fold of the
-- count rows (hw_fold_counts, version 7) reads what it folds, not the
-- counts (issue 18).
--
-- Version 7's fold read counters and hourly whole to find the rows of
-- backends that are gone: hourly holds a row per source and hour of the
-- claims retention (shard 0, once folded), so every pass read them all
-- and, after a fold, the versions it had just deleted. These partial
-- indexes hold the unfolded rows only (shard 0 is left out): the live
-- backends' and the gone ones'. A count's upsert changes no indexed
-- column, so it stays a HOT update; a new row (a new hour, a new backend)
-- adds one entry.
CREATE INDEX counters_shard ON counters (shard) WHERE shard <> 0;
CREATE INDEX hourly_shard ON hourly (shard) WHERE shard <> 0;

-- The shards written into, one probe of each index per shard (a skip
-- scan); those no live backend has are folded, as in version 7. With none,
-- the fold ends there.
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
    )
    SELECT array_agg(u.shard) INTO gone FROM (SELECT shard FROM c UNION SELECT shard FROM h) u
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
END $$;
