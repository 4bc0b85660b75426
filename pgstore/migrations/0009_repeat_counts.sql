-- Hookwarden PostgreSQL schema, version 9: repeat receipts counted once per
-- statement. Record's batches (pgstore/batch.go) insert the repeats of
-- many requests in one statement; counted per row, each repeat ran two
-- upserts of its own (and left a dead version of its count rows behind
-- for the next). From the statement's transition table, one upsert per
-- source and kind (per source and hour) whatever the rows. The trigger
-- now fires for every insert into receipts, accepted ones included: an
-- accepted-only statement aggregates no row and writes nothing.

DROP TRIGGER count_receipts_insert ON receipts;
DROP FUNCTION hw_count_receipts();

CREATE FUNCTION hw_count_receipts_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO counters (name, kind, shard, n)
    SELECT source, kind, pg_backend_pid(), count(*) FROM new_rows WHERE kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n;
    INSERT INTO hourly (source, hour, shard, duplicates)
    SELECT source, date_trunc('hour', received_at, 'UTC'), pg_backend_pid(), count(*)
    FROM new_rows WHERE kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    ON CONFLICT (source, hour, shard) DO UPDATE SET duplicates = hourly.duplicates + excluded.duplicates;
    RETURN NULL;
END $$;
CREATE TRIGGER count_receipts_insert AFTER INSERT ON receipts REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hw_count_receipts_insert();
