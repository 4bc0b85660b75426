-- Hookwarden schema, version 1.
-- Times are UTC text of fixed width ("2006-01-02T15:04:05.000000Z") so they sort as text.

-- runs: one row per `serve` process; gaps between runs are outage windows.
CREATE TABLE runs (
    id           INTEGER PRIMARY KEY,
    started_at   TEXT    NOT NULL,
    heartbeat_at TEXT    NOT NULL, -- refreshed every few seconds while running
    stopped_at   TEXT,             -- set by a clean stop; NULL after a crash
    version      TEXT    NOT NULL,
    pid          INTEGER NOT NULL
) STRICT;

-- events: the claims. One row per (source, provider event id), inserted once;
-- the unique index is the dedup memory.
CREATE TABLE events (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    claimed_at  TEXT NOT NULL,
    body_sha256 BLOB NOT NULL, -- hash of the first copy's bytes, to flag divergent duplicates
    body        BLOB,          -- the event's own bytes when it came in a batch (SendGrid); else NULL
    UNIQUE (source, event_id)
) STRICT;
CREATE INDEX events_claimed ON events (claimed_at);

-- receipts: every authenticated request, raw, as received.
CREATE TABLE receipts (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    event_ref   INTEGER REFERENCES events (id), -- NULL: quarantined, or a batch (see receipt_events)
    kind        TEXT NOT NULL CHECK (kind IN ('accepted', 'duplicate', 'divergent', 'quarantined', 'batch')),
    received_at TEXT NOT NULL,
    remote_addr TEXT NOT NULL,
    headers     TEXT NOT NULL, -- HTTP wire format, one "Name: value" per line
    body        BLOB,          -- NULL for a byte-identical duplicate, or after payload pruning
    body_sha256 BLOB NOT NULL,
    pruned_at   TEXT,          -- when retention removed the body
    quarantine_reason TEXT
) STRICT;
CREATE INDEX receipts_event ON receipts (event_ref) WHERE event_ref IS NOT NULL;
CREATE INDEX receipts_source_time ON receipts (source, received_at);

-- receipt_events: which events a batch receipt carried.
CREATE TABLE receipt_events (
    event_ref  INTEGER NOT NULL REFERENCES events (id),
    receipt_id INTEGER NOT NULL REFERENCES receipts (id),
    kind       TEXT    NOT NULL, -- accepted | duplicate | divergent
    PRIMARY KEY (event_ref, receipt_id)
) STRICT, WITHOUT ROWID;

-- quarantine: authenticated requests with no event id, one row per distinct body
-- so repeats are counted instead of piling up.
CREATE TABLE quarantine (
    source      TEXT    NOT NULL,
    body_sha256 BLOB    NOT NULL,
    receipt_id  INTEGER NOT NULL REFERENCES receipts (id),
    reason      TEXT    NOT NULL,
    first_at    TEXT    NOT NULL,
    last_at     TEXT    NOT NULL,
    count       INTEGER NOT NULL,
    PRIMARY KEY (source, body_sha256)
) STRICT, WITHOUT ROWID;

-- jobs: the outbox. One row per (event, matching destination).
CREATE TABLE jobs (
    id           INTEGER PRIMARY KEY,
    event_ref    INTEGER NOT NULL REFERENCES events (id),
    destination  TEXT    NOT NULL, -- "source/name"
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0, -- attempts since the job was created or last replayed
    dead_count   INTEGER NOT NULL DEFAULT 0, -- times dead-lettered
    next_at      TEXT    NOT NULL,           -- due time; a lease moves it to the lease's end
    leased_until TEXT,                       -- non-NULL while an attempt is in flight
    last_error   TEXT,
    created_at   TEXT    NOT NULL,
    finished_at  TEXT                        -- delivered or dead-lettered at
) STRICT;
CREATE INDEX jobs_due ON jobs (destination, next_at) WHERE state = 'pending';
CREATE INDEX jobs_event ON jobs (event_ref);
CREATE INDEX jobs_dead ON jobs (destination, finished_at) WHERE state = 'dead';

-- attempts: every delivery attempt, for forensics.
CREATE TABLE attempts (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    number      INTEGER NOT NULL,
    started_at  TEXT    NOT NULL,
    duration_us INTEGER NOT NULL,
    status_code INTEGER,
    exit_code   INTEGER,
    error       TEXT,
    response    BLOB,
    verdict     TEXT    NOT NULL CHECK (verdict IN ('delivered', 'retry', 'dead'))
) STRICT;
CREATE INDEX attempts_job ON attempts (job_id);
