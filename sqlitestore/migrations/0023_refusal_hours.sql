-- Hookwarden schema 23: the requests refused at the door per source,
-- reason and hour (issue 46).
--
-- A wrong secret showed only as a WARN line and a metric a restart resets;
-- stats lists each source's refusals of the last 24 hours by reason from
-- here. serve counts them in memory (known sources only: an unknown name is
-- attacker-chosen) and adds them every few seconds and at stop, as for
-- unavailable_minutes, so a flood of forged requests is an upsert per
-- source and reason every few seconds, not a write per request. Rows
-- before the claims cutoff go with retention.claims, as hourly's.
CREATE TABLE refusal_hours (
    source TEXT    NOT NULL,
    hour   TEXT    NOT NULL, -- the hour's start, the store's time format (storecopy copies it as a time)
    reason TEXT    NOT NULL, -- missing, malformed, mismatch, stale, replayed, too_large, too_slow, forbidden, unavailable
    n      INTEGER NOT NULL,
    PRIMARY KEY (source, hour, reason)
) STRICT, WITHOUT ROWID;

CREATE INDEX refusal_hours_hour ON refusal_hours (hour);
