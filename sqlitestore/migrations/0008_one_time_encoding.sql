-- Hookwarden schema, version 8: one time encoding (issue 14).
--
-- Every time is UTC text of fixed width ("2006-01-02T15:04:05.000000Z"), as
-- in every table since schema 1. Schema 5 had stored the summary retention
-- leaves on a pruned event, and two kinds of pruned_totals, as integers
-- (Unix seconds); they become text like the rest. Integer columns that are
-- counts or durations (events.receipts, attempts.duration_us, ...) stay.

-- 1. events: the three summary times. A STRICT column cannot change type in
--    place, and DROP COLUMN rewrites every row of the table (every claim, not
--    only the pruned ones), so the integer columns are renamed and retired
--    (always NULL from now on) and text columns take their names. Only
--    pruned events have non-NULL values: the UPDATE reads the table once and
--    writes just those rows.
ALTER TABLE events RENAME COLUMN pruned_at TO retired_pruned_at;
ALTER TABLE events RENAME COLUMN last_received_at TO retired_last_received_at;
ALTER TABLE events RENAME COLUMN delivered_at TO retired_delivered_at;
ALTER TABLE events ADD COLUMN pruned_at TEXT;        -- when the payload tier folded it
ALTER TABLE events ADD COLUMN last_received_at TEXT; -- its last receipt
ALTER TABLE events ADD COLUMN delivered_at TEXT;     -- its last job's delivery
UPDATE events SET
    pruned_at        = strftime('%Y-%m-%dT%H:%M:%S.000000Z', retired_pruned_at, 'unixepoch'),
    last_received_at = strftime('%Y-%m-%dT%H:%M:%S.000000Z', retired_last_received_at, 'unixepoch'),
    delivered_at     = strftime('%Y-%m-%dT%H:%M:%S.000000Z', retired_delivered_at, 'unixepoch'),
    retired_pruned_at = NULL, retired_last_received_at = NULL, retired_delivered_at = NULL
WHERE retired_pruned_at IS NOT NULL OR retired_last_received_at IS NOT NULL OR retired_delivered_at IS NOT NULL;

-- 2. pruned_totals: the kinds last_received and last_accepted are times, a
--    maximum, not counts: they move to at; their n is 0. Counts keep n and
--    have at NULL.
ALTER TABLE pruned_totals ADD COLUMN at TEXT;
UPDATE pruned_totals SET at = strftime('%Y-%m-%dT%H:%M:%S.000000Z', n, 'unixepoch'), n = 0
WHERE kind IN ('last_received', 'last_accepted');
