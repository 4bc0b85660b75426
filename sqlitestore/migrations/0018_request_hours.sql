-- Hookwarden schema 18: the first and last request of each source and hour
-- (issue 18).
--
-- gaps finds silences longer than a source's expect_within between its
-- requests. It jumped along receipts_source_time, one seek per
-- expect_within of the window: at expect_within 1h over the 30 days of kept
-- receipts, some 720 seeks and 870 pages read by a CLI process with a cold
-- cache. With expect_within at an hour or more no silence fits inside one
-- clock hour, so the first and last request of each hour are all it needs:
-- a range of this table, a row an hour.
--
-- A trigger keeps it on every receipt insert (every kind: a quarantined
-- request is a request too). Only inserts count, as in hourly: a receipt
-- deleted later (retention, a dropped quarantined request) moves
-- pruned_totals' last_received past its time, and gaps reads from there
-- on, where every receipt is still in the file. Rows before the claims
-- cutoff go with retention.claims, as hourly's. storecopy does not copy it:
-- the destination's trigger fills it as the receipts are written.
CREATE TABLE request_hours (
    source   TEXT NOT NULL,
    hour     TEXT NOT NULL, -- "2006-01-02T15", UTC
    first_at TEXT NOT NULL,
    last_at  TEXT NOT NULL,
    PRIMARY KEY (source, hour)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER request_hour AFTER INSERT ON receipts BEGIN
    INSERT INTO request_hours (source, hour, first_at, last_at)
        VALUES (NEW.source, substr(NEW.received_at, 1, 13), NEW.received_at, NEW.received_at)
        ON CONFLICT (source, hour) DO UPDATE SET first_at = min(first_at, excluded.first_at), last_at = max(last_at, excluded.last_at);
END;

-- The receipts already in the file: one read of receipts_source_time.
INSERT INTO request_hours (source, hour, first_at, last_at)
SELECT source, substr(received_at, 1, 13), min(received_at), max(received_at) FROM receipts
GROUP BY source, substr(received_at, 1, 13);
