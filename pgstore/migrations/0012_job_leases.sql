-- Hookwarden PostgreSQL schema, version 12: the leases in flight, kept
-- where a count of them reads them alone (issue 18).
--
-- A lease is a HOT update of jobs.leased_until, a column no index holds
-- (an index on it would make every lease write an entry in each of the
-- table's indexes). So counting a destination's leases in flight read its
-- whole backlog: 136 ms a call with 300,000 jobs parked, paid by every
-- lease under a concurrency that is not a chained swap, by Record's
-- hand-over, and by the dashboard's destinations (171 ms a load).
--
-- job_leases mirrors the jobs that are pending and leased: one row per
-- such job with its destination and lease end, written by row triggers on
-- jobs in the same transaction as the lease, the finish, the release, the
-- unlease, the replay or the hand-over's insert, so every path that leases
-- or ends a lease keeps it without knowing it exists, and an update of
-- jobs stays HOT. A count of the leases in flight is a range of
-- job_leases_live (destination, leased_until > now): what is in flight,
-- plus nothing. A lease that expired without a finish keeps its row until
-- the job is leased again or finished; the range steps over it.
CREATE TABLE job_leases (
    job_id       bigint      PRIMARY KEY,
    destination  text        NOT NULL,
    leased_until timestamptz NOT NULL
);
CREATE INDEX job_leases_live ON job_leases (destination, leased_until);

CREATE FUNCTION hw_job_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'DELETE' AND NEW.state = 'pending' AND NEW.leased_until IS NOT NULL THEN
        INSERT INTO job_leases (job_id, destination, leased_until)
        VALUES (NEW.id, NEW.destination, NEW.leased_until)
        ON CONFLICT (job_id) DO UPDATE SET destination = excluded.destination, leased_until = excluded.leased_until;
    ELSE
        DELETE FROM job_leases WHERE job_id = OLD.id;
    END IF;
    RETURN NULL;
END $$;

-- WHEN keeps the function from running for the writes that touch no
-- lease: a job recorded without a hand-over, a prune of finished jobs.
CREATE TRIGGER job_leases_insert AFTER INSERT ON jobs FOR EACH ROW
    WHEN (NEW.state = 'pending' AND NEW.leased_until IS NOT NULL)
    EXECUTE FUNCTION hw_job_lease();
CREATE TRIGGER job_leases_update AFTER UPDATE OF state, leased_until ON jobs FOR EACH ROW
    WHEN ((OLD.state = 'pending' AND OLD.leased_until IS NOT NULL) OR (NEW.state = 'pending' AND NEW.leased_until IS NOT NULL))
    EXECUTE FUNCTION hw_job_lease();
CREATE TRIGGER job_leases_delete AFTER DELETE ON jobs FOR EACH ROW
    WHEN (OLD.state = 'pending' AND OLD.leased_until IS NOT NULL)
    EXECUTE FUNCTION hw_job_lease();

-- The leases in flight when the store is migrated: the triggers take
-- every one after it, whichever binary writes it.
INSERT INTO job_leases (job_id, destination, leased_until)
SELECT id, destination, leased_until FROM jobs WHERE state = 'pending' AND leased_until IS NOT NULL;
