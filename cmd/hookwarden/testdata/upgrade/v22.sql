-- Schema 22: a source's sequence (an epoch and two ranges: one hole between)
-- and an event timed inside an outage that arrived after it.
INSERT INTO seq_epochs (source, epoch, lo, hi, started_at) VALUES ('tg', 1, 1000, 1006, '2026-12-01T10:00:00.000000Z');
INSERT INTO seq_ranges (source, epoch, lo, hi, lo_at, hi_at) VALUES
    ('tg', 1, 1000, 1001, '2026-12-01T10:00:00.000000Z', '2026-12-01T10:00:01.000000Z'),
    ('tg', 1, 1003, 1006, '2026-12-01T10:00:02.000000Z', '2026-12-01T10:00:05.000000Z');
INSERT INTO late_events (source, event_at, received_at, lag) VALUES ('tg', '2026-12-01T09:00:00.000000Z', '2026-12-01T10:00:00.000000Z', 3600);
