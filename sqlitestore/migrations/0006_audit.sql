-- Hookwarden schema, version 6: the audit log (issue 13).
-- Every operator action that changes state (replay, prune, quarantine
-- release and drop, pause, resume, backfill), from the CLI, the admin API or
-- the dashboard, is one row, written in the same transaction as the change
-- where the change is one transaction. Never pruned: it is small, and it is
-- what a human asks after an incident.
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY,
    at         TEXT    NOT NULL, -- UTC, fixed width, like every time column
    action     TEXT    NOT NULL, -- replay | prune | release | drop | pause | resume | backfill
    origin     TEXT    NOT NULL, -- cli | api | dashboard
    actor      TEXT    NOT NULL, -- cli: the OS user; api, dashboard: the client address
    args       TEXT    NOT NULL, -- JSON: the arguments as given
    result     TEXT,             -- JSON: what it did (counts); NULL while under way or if interrupted
    receipt_id INTEGER           -- the receipt it concerns (quarantine release, drop), if any
) STRICT;

-- The events an action changed, for `events show`. By (source, event id),
-- not by events.id: the audit outlives retention of the event it names.
CREATE TABLE audit_events (
    source   TEXT    NOT NULL,
    event_id TEXT    NOT NULL,
    audit_id INTEGER NOT NULL REFERENCES audit (id),
    PRIMARY KEY (source, event_id, audit_id)
) STRICT, WITHOUT ROWID;
