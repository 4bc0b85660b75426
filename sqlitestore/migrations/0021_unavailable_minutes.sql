-- Hookwarden schema 21: the minutes in which a source was answered 503
-- (issue 46).
--
-- A receiver that answers 503 to a provider is down for it although serve
-- runs: gaps lists the minutes in which most of a source's requests were
-- answered 503 as outages of kind "unavailable". serve counts its answers
-- in memory and adds them here every few seconds, only for minutes with a
-- 503 (a row per source and such minute, with all that minute's requests),
-- so the table grows with the outages, not with the traffic. Rows before
-- the claims cutoff go with retention.claims, as hourly's.
CREATE TABLE unavailable_minutes (
    source      TEXT    NOT NULL,
    minute      TEXT    NOT NULL, -- the minute's start, the store's time format
    requests    INTEGER NOT NULL,
    unavailable INTEGER NOT NULL,
    PRIMARY KEY (source, minute)
) STRICT, WITHOUT ROWID;
