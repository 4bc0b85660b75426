-- Hookwarden PostgreSQL schema, version 7: the counts of version 6, kept
-- at a lower cost on the ack path.
--
-- Shard: the server process's pid itself, not modulo 16. No two live
-- backends share a pid, so no two concurrent transactions ever write the
-- same counter row: a transaction holds its count rows' locks until its
-- COMMIT returns, and with shared rows every commit waited for the one
-- before it to reach the disk (no group commit). A backend that is gone
-- leaves its rows behind: hw_fold_counts, run by Prune, folds them into
-- shard 0 (no backend has pid 0), so the table stays about as small as the
-- number of connections. Folding is right at any time, even of a live
-- backend's row: the DELETE returns the row's last committed value and
-- the same transaction adds it to shard 0; reads sum every shard.
--
-- The triggers run their upserts as their own statements, not through the
-- SQL functions of version 6: plpgsql keeps a statement's plan for the
-- session, while a SQL function called from a trigger was parsed and
-- planned again in every transaction. Inserts and deletes of events, jobs
-- and batch links, and deletes of receipts, are counted once per statement
-- from its transition table: a statement of many rows (a prune batch, a
-- batch receipt, a backfill, a copy) makes one upsert per count, not one
-- per row, each of which left a dead version of the count's row behind.
-- Repeat receipts are inserted one at a time and counted per row (most
-- receipts are 'accepted': a WHEN clause keeps the trigger from firing),
-- as are changes of a job's state (a lease or a retry changes none).

ALTER TABLE counters ALTER COLUMN shard TYPE integer;
ALTER TABLE hourly ALTER COLUMN shard TYPE integer;

DROP TRIGGER count_events ON events;
DROP TRIGGER count_receipts_delete ON receipts;
DROP TRIGGER count_links_insert ON receipt_events;
DROP TRIGGER count_links_delete ON receipt_events;
DROP TRIGGER count_jobs ON jobs;
DROP FUNCTION hw_count_events();
DROP FUNCTION hw_count_links();

CREATE FUNCTION hw_count_events_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT source, 'accepted', pg_backend_pid(), count(*) FROM new_rows GROUP BY source
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    INSERT INTO hourly (source, hour, shard, accepted, duplicates, first_ref)
    SELECT source, date_trunc('hour', claimed_at, 'UTC'), pg_backend_pid(), count(*), 0, min(id) FROM new_rows GROUP BY 1, 2
    ON CONFLICT (source, hour, shard) DO UPDATE SET accepted = hourly.accepted + excluded.accepted,
        first_ref = LEAST(hourly.first_ref, excluded.first_ref);
    RETURN NULL;
END $$;
CREATE TRIGGER count_events_insert AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hw_count_events_insert();

CREATE FUNCTION hw_count_events_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT source, 'accepted', pg_backend_pid(), -count(*) FROM old_rows GROUP BY source
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    RETURN NULL;
END $$;
CREATE TRIGGER count_events_delete AFTER DELETE ON events REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hw_count_events_delete();

-- A repeat receipt, one row at a time.
CREATE OR REPLACE FUNCTION hw_count_receipts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n) VALUES (NEW.source, NEW.kind, pg_backend_pid(), 1)
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + 1;
    INSERT INTO hourly (source, hour, shard, duplicates)
    VALUES (NEW.source, date_trunc('hour', NEW.received_at, 'UTC'), pg_backend_pid(), 1)
    ON CONFLICT (source, hour, shard) DO UPDATE SET duplicates = hourly.duplicates + 1;
    RETURN NULL;
END $$;

CREATE FUNCTION hw_count_receipts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT source, kind, pg_backend_pid(), -count(*) FROM old_rows WHERE kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    RETURN NULL;
END $$;
CREATE TRIGGER count_receipts_delete AFTER DELETE ON receipts REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hw_count_receipts_delete();

-- A batch's repeats are its links; the receipt (inserted before its links,
-- deleted after them) names the source and the time.
CREATE FUNCTION hw_count_links_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT r.source, l.kind, pg_backend_pid(), count(*) FROM new_rows l JOIN receipts r ON r.id = l.receipt_id
    WHERE l.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    INSERT INTO hourly (source, hour, shard, duplicates)
    SELECT r.source, date_trunc('hour', r.received_at, 'UTC'), pg_backend_pid(), count(*)
    FROM new_rows l JOIN receipts r ON r.id = l.receipt_id WHERE l.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (source, hour, shard) DO UPDATE SET duplicates = hourly.duplicates + excluded.duplicates;
    RETURN NULL;
END $$;
CREATE TRIGGER count_links_insert AFTER INSERT ON receipt_events REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hw_count_links_insert();

CREATE FUNCTION hw_count_links_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT r.source, l.kind, pg_backend_pid(), -count(*) FROM old_rows l JOIN receipts r ON r.id = l.receipt_id
    WHERE l.kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    RETURN NULL;
END $$;
CREATE TRIGGER count_links_delete AFTER DELETE ON receipt_events REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hw_count_links_delete();

CREATE OR REPLACE FUNCTION hw_count_quarantine() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO counters (name, kind, shard, n) VALUES (NEW.source, 'quarantined', pg_backend_pid(), NEW.count)
        ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO counters (name, kind, shard, n) VALUES (NEW.source, 'quarantined', pg_backend_pid(), NEW.count - OLD.count)
        ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    ELSE
        INSERT INTO counters (name, kind, shard, n) VALUES (OLD.source, 'quarantined', pg_backend_pid(), -OLD.count)
        ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION hw_count_jobs_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT destination, state, pg_backend_pid(), count(*) FROM new_rows GROUP BY 1, 2
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    RETURN NULL;
END $$;
CREATE TRIGGER count_jobs_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hw_count_jobs_insert();

CREATE FUNCTION hw_count_jobs_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT destination, state, pg_backend_pid(), -count(*) FROM old_rows GROUP BY 1, 2
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    RETURN NULL;
END $$;
CREATE TRIGGER count_jobs_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hw_count_jobs_delete();

-- A change of state (count_jobs_state, per row) is one statement of two
-- rows: their keys differ, the trigger fires only when the state does.
CREATE OR REPLACE FUNCTION hw_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    VALUES (OLD.destination, OLD.state, pg_backend_pid(), -1), (NEW.destination, NEW.state, pg_backend_pid(), 1)
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    RETURN NULL;
END $$;

DROP FUNCTION hw_count(text, text, bigint);
DROP FUNCTION hw_count_hour(text, timestamptz, bigint, bigint, bigint);

-- hw_fold_counts moves the rows of backends that are gone into shard 0, in
-- one transaction (the sums never change), and drops what sums to nothing
-- there. Instances that fold at once: one folds, the others skip (the key is "hookcoun").
CREATE FUNCTION hw_fold_counts() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(7525356009379820910) THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM counters c WHERE c.shard <> 0
            AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = c.shard)
        RETURNING name, kind, n
    )
    INSERT INTO counters (name, kind, shard, n) SELECT name, kind, 0, sum(n) FROM gone GROUP BY name, kind
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    DELETE FROM counters WHERE shard = 0 AND n = 0;
    WITH gone AS (
        DELETE FROM hourly h WHERE h.shard <> 0
            AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.shard)
        RETURNING source, hour, accepted, duplicates, first_ref
    )
    INSERT INTO hourly (source, hour, shard, accepted, duplicates, first_ref)
    SELECT source, hour, 0, sum(accepted), sum(duplicates), min(first_ref) FROM gone GROUP BY source, hour
    ON CONFLICT (source, hour, shard) DO UPDATE SET accepted = hourly.accepted + excluded.accepted,
        duplicates = hourly.duplicates + excluded.duplicates, first_ref = LEAST(hourly.first_ref, excluded.first_ref);
END $$;

-- Version 6's shards 0-15 are no live backend's (those pids are the
-- kernel's): folded at once.
SELECT hw_fold_counts();
