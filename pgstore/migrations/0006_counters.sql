-- Hookwarden PostgreSQL schema, version 6: counts that follow the work, not
-- the history (issue 18); SQLite's schema 12, the same tables and columns
-- plus a shard.
--
-- Triggers keep the counts in the same transaction as the rows they count,
-- so every path that writes those rows (Record, Finish, Replay, Prune,
-- release, drop, and whatever comes later) keeps them without knowing they
-- exist. Several instances commit at once: one row per count would make
-- every transaction that counts the same thing wait for the row lock of the
-- one before it until it commits. Each count is spread over 16 rows
-- (shard: the server process's pid modulo 16, so a pooled connection keeps
-- writing its own row) and a read sums them.

-- counters: rows of each kind now in the database, per source (accepted:
-- events rows; duplicate, divergent: repeat receipts, direct or in a batch;
-- quarantined: the sum of quarantine.count) or destination (pending,
-- delivered, dead: jobs by state). Inserts add, deletes subtract; what
-- retention removed is in pruned_totals.
CREATE TABLE counters (
    name  text     NOT NULL,
    kind  text     NOT NULL,
    shard smallint NOT NULL,
    n     bigint   NOT NULL,
    PRIMARY KEY (name, kind, shard)
);

-- hourly: per source and UTC hour, new events claimed and repeats received
-- (the dashboard's chart, GET /api/stats' hourly, the recent windows).
-- Only inserts count; rows older than the claims cutoff go with
-- retention.claims. first_ref: the lowest events.id claimed in the hour.
CREATE TABLE hourly (
    source     text        NOT NULL,
    hour       timestamptz NOT NULL,
    shard      smallint    NOT NULL,
    accepted   bigint      NOT NULL DEFAULT 0,
    duplicates bigint      NOT NULL DEFAULT 0,
    first_ref  bigint,
    PRIMARY KEY (source, hour, shard)
);

-- Listings by source and type read this index in id order.
CREATE INDEX events_source_type ON events (source, event_type);

CREATE FUNCTION hw_count(p_name text, p_kind text, p_n bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO counters (name, kind, shard, n) VALUES (p_name, p_kind, pg_backend_pid() % 16, p_n)
    ON CONFLICT (name, kind, shard) DO UPDATE SET n = counters.n + excluded.n
$$;

CREATE FUNCTION hw_count_hour(p_source text, p_at timestamptz, p_accepted bigint, p_duplicates bigint, p_ref bigint)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO hourly (source, hour, shard, accepted, duplicates, first_ref)
    VALUES (p_source, date_trunc('hour', p_at, 'UTC'), pg_backend_pid() % 16, p_accepted, p_duplicates, p_ref)
    ON CONFLICT (source, hour, shard) DO UPDATE SET accepted = hourly.accepted + excluded.accepted,
        duplicates = hourly.duplicates + excluded.duplicates, first_ref = LEAST(hourly.first_ref, excluded.first_ref)
$$;

CREATE FUNCTION hw_count_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM hw_count(NEW.source, 'accepted', 1);
        PERFORM hw_count_hour(NEW.source, NEW.claimed_at, 1, 0, NEW.id);
    ELSE
        PERFORM hw_count(OLD.source, 'accepted', -1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER count_events AFTER INSERT OR DELETE ON events FOR EACH ROW EXECUTE FUNCTION hw_count_events();

CREATE FUNCTION hw_count_receipts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM hw_count(NEW.source, NEW.kind, 1);
        PERFORM hw_count_hour(NEW.source, NEW.received_at, 0, 1, NULL);
    ELSE
        PERFORM hw_count(OLD.source, OLD.kind, -1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER count_receipts_insert AFTER INSERT ON receipts FOR EACH ROW
    WHEN (NEW.kind IN ('duplicate', 'divergent')) EXECUTE FUNCTION hw_count_receipts();
CREATE TRIGGER count_receipts_delete AFTER DELETE ON receipts FOR EACH ROW
    WHEN (OLD.kind IN ('duplicate', 'divergent')) EXECUTE FUNCTION hw_count_receipts();

-- A batch's repeats are its links; the receipt (inserted before its links,
-- deleted after them) names the source and the time.
CREATE FUNCTION hw_count_links() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    src text;
    at  timestamptz;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT source, received_at INTO src, at FROM receipts WHERE id = NEW.receipt_id;
        PERFORM hw_count(src, NEW.kind, 1);
        PERFORM hw_count_hour(src, at, 0, 1, NULL);
    ELSE
        SELECT source INTO src FROM receipts WHERE id = OLD.receipt_id;
        PERFORM hw_count(src, OLD.kind, -1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER count_links_insert AFTER INSERT ON receipt_events FOR EACH ROW
    WHEN (NEW.kind IN ('duplicate', 'divergent')) EXECUTE FUNCTION hw_count_links();
CREATE TRIGGER count_links_delete AFTER DELETE ON receipt_events FOR EACH ROW
    WHEN (OLD.kind IN ('duplicate', 'divergent')) EXECUTE FUNCTION hw_count_links();

CREATE FUNCTION hw_count_quarantine() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM hw_count(NEW.source, 'quarantined', NEW.count);
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM hw_count(NEW.source, 'quarantined', NEW.count - OLD.count);
    ELSE
        PERFORM hw_count(OLD.source, 'quarantined', -OLD.count);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER count_quarantine AFTER INSERT OR DELETE ON quarantine FOR EACH ROW EXECUTE FUNCTION hw_count_quarantine();
CREATE TRIGGER count_quarantine_update AFTER UPDATE OF count ON quarantine FOR EACH ROW
    WHEN (NEW.count <> OLD.count) EXECUTE FUNCTION hw_count_quarantine();

-- Jobs: a lease or a retry does not change the state and fires nothing.
CREATE FUNCTION hw_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM hw_count(OLD.destination, OLD.state, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM hw_count(NEW.destination, NEW.state, 1);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER count_jobs AFTER INSERT OR DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION hw_count_jobs();
CREATE TRIGGER count_jobs_state AFTER UPDATE OF state ON jobs FOR EACH ROW
    WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION hw_count_jobs();

-- The counts of the rows already there, once (shard 0).
INSERT INTO counters (name, kind, shard, n)
SELECT name, kind, 0, sum(n) FROM (
    SELECT source AS name, 'accepted' AS kind, count(*) AS n FROM events GROUP BY source
    UNION ALL SELECT source, kind, count(*) FROM receipts WHERE kind IN ('duplicate', 'divergent') GROUP BY source, kind
    UNION ALL SELECT r.source, re.kind, count(*) FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
        WHERE re.kind IN ('duplicate', 'divergent') GROUP BY r.source, re.kind
    UNION ALL SELECT source, 'quarantined', sum(count) FROM quarantine GROUP BY source
    UNION ALL SELECT destination, state, count(*) FROM jobs GROUP BY destination, state) c
GROUP BY name, kind;

INSERT INTO hourly (source, hour, shard, accepted, duplicates, first_ref)
SELECT source, hour, 0, sum(a), sum(d), min(ref) FROM (
    SELECT source, date_trunc('hour', claimed_at, 'UTC') AS hour, count(*) AS a, 0 AS d, min(id) AS ref FROM events GROUP BY 1, 2
    UNION ALL SELECT source, date_trunc('hour', received_at, 'UTC'), 0, count(*), NULL FROM receipts
        WHERE kind IN ('duplicate', 'divergent') GROUP BY 1, 2
    UNION ALL SELECT r.source, date_trunc('hour', r.received_at, 'UTC'), 0, count(*), NULL
        FROM receipt_events re JOIN receipts r ON r.id = re.receipt_id
        WHERE re.kind IN ('duplicate', 'divergent') GROUP BY 1, 2) h
GROUP BY source, hour;
