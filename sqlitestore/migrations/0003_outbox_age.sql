-- Hookwarden schema, version 3: the outbox gauges read at every /metrics
-- scrape (OutboxStats: pending count and oldest pending per destination).
-- A covering partial index over pending jobs only: the scrape reads this
-- index and never the jobs table, and its cost follows the backlog, not the
-- history. Additive only.
CREATE INDEX jobs_pending_age ON jobs (destination, created_at) WHERE state = 'pending';
