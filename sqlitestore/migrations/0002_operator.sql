-- Hookwarden schema, version 2: what the operator commands need (replay,
-- retention, forensics). Additive only: a version-1 reader still works.

-- jobs.replayed_at: when an operator last reset the job to pending (replay).
-- Attempt numbers start again at 1 after a replay; attempts started after
-- this time belong to the replay.
ALTER TABLE jobs ADD COLUMN replayed_at TEXT;

-- Payload retention walks the receipts that still hold a body, oldest first.
-- The index shrinks as bodies are pruned, so each pass costs what is left to do.
CREATE INDEX receipts_unpruned ON receipts (received_at) WHERE body IS NOT NULL;

-- Batch receipts are found from their links (events show, claims retention).
CREATE INDEX receipt_events_receipt ON receipt_events (receipt_id);
