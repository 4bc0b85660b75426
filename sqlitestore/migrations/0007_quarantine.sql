-- Hookwarden schema, version 7: replays at the door (issue 13). Additive only.

-- 1. The quarantine says why a request is held and what became of it.
--    kind: 'no_event_id' or 'body_replayed' (NULL on rows older than this
--    version: no_event_id); reason stays the free-text detail.
--    candidate_event_id: the id the request carried, if any.
--    original_event_id: the claim whose signed body it repeats (body_replayed).
--    released_at, released_event_id: an operator's `quarantine release`; the
--    event then has its own receipt, a copy of the held one.
ALTER TABLE quarantine ADD COLUMN kind TEXT;
ALTER TABLE quarantine ADD COLUMN candidate_event_id TEXT;
ALTER TABLE quarantine ADD COLUMN original_event_id TEXT;
ALTER TABLE quarantine ADD COLUMN released_at TEXT;
ALTER TABLE quarantine ADD COLUMN released_event_id TEXT;
-- show, release and drop find a held request by its receipt id; listings
-- page by it.
CREATE INDEX quarantine_receipt ON quarantine (receipt_id);

-- 2. body_keys: for sources whose signature does not cover the event id, the
--    signed bodies claimed, one row per (source, body hash), inserted in the
--    claim's transaction. The unique key is what makes a second copy of a
--    body under a fresh id fail, even when both arrive at once (on
--    PostgreSQL: INSERT ... ON CONFLICT DO NOTHING). Pruned with the
--    claims (retention.claims), walking ids in insert order.
CREATE TABLE body_keys (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    body_sha256 BLOB NOT NULL,
    event_id    TEXT NOT NULL, -- the event that claimed this body first
    claimed_at  TEXT NOT NULL,
    UNIQUE (source, body_sha256)
) STRICT;

-- 3. seen_tokens: Mailgun's one-time tokens, kept until their signed
--    timestamp leaves the tolerance (expires_at), with the hash of the body
--    they came with: the same token with another body is refused (401).
--    Inserted in the receipt's transaction; expired rows are pruned.
CREATE TABLE seen_tokens (
    source       TEXT NOT NULL,
    token_sha256 BLOB NOT NULL,
    body_sha256  BLOB NOT NULL,
    expires_at   TEXT NOT NULL,
    PRIMARY KEY (source, token_sha256)
) STRICT, WITHOUT ROWID;
