-- Hookwarden PostgreSQL schema, version 18: the requests refused at the
-- door per source, reason and hour (issue 46); SQLite's schema 23.
--
-- stats lists each source's refusals of the last 24 hours by reason from
-- here. Each serve counts them in memory (known sources only) and adds them
-- every few seconds and at stop, as for unavailable_minutes: a flood of
-- forged requests is an upsert per source and reason every few seconds per
-- instance, not a write per request, so instances adding to the same row
-- need no shard. Rows before the claims cutoff go with retention.claims.
CREATE TABLE refusal_hours (
    source text        NOT NULL,
    hour   timestamptz NOT NULL,
    reason text        NOT NULL,
    n      bigint      NOT NULL,
    PRIMARY KEY (source, hour, reason)
);
CREATE INDEX refusal_hours_hour ON refusal_hours (hour);
