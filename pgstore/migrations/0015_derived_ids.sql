-- Hookwarden PostgreSQL schema, version 15: claims whose id Hookwarden
-- derived (issue 47); SQLite's schema 20.
--
-- Where a platform gives an event no id at all (Discord Webhook Events,
-- Meta changes other than messages and statuses, Graph items without id),
-- the claim key is the SHA-256 of the event's own bytes, and this mark
-- says so in events show and events list --json ("derived_id"). A column
-- with a constant default is added without rewriting the table; IF NOT
-- EXISTS lets a test that rewinds schema_version run it again.
ALTER TABLE events ADD COLUMN IF NOT EXISTS derived boolean NOT NULL DEFAULT false;
