-- Hookwarden schema, version 4: a replayed job waits since its replay, not
-- since the event first arrived; the oldest-pending gauge must not jump to a
-- dead letter's original age when it is replayed. The covering index follows
-- the expression OutboxStats reads. Additive only.
DROP INDEX IF EXISTS jobs_pending_age;
CREATE INDEX jobs_pending_age ON jobs (destination, COALESCE(replayed_at, created_at)) WHERE state = 'pending';
