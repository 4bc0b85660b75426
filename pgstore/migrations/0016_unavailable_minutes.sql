-- Hookwarden PostgreSQL schema, version 16: the minutes in which a source
-- was answered 503 (issue 46); SQLite's schema 21.
--
-- gaps lists the minutes in which most of a source's requests were answered
-- 503 as outages of kind "unavailable". Each serve counts its answers in
-- memory and adds them here every few seconds, only for minutes with a 503,
-- so the table grows with the outages, not with the traffic; instances add
-- to the same row (an upsert a few times a minute each, only while they
-- refuse). Rows before the claims cutoff go with retention.claims.
CREATE TABLE unavailable_minutes (
    source      text        NOT NULL,
    minute      timestamptz NOT NULL,
    requests    bigint      NOT NULL,
    unavailable bigint      NOT NULL,
    PRIMARY KEY (source, minute)
);
